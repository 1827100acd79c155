"""``run dp`` end to end, and the game's statistics by Monte Carlo on simulated mechanisms (its other units
and the canary trainer: tests/kinds/dp/test_dp_game.py).

Validity tests use fixed seeds and a stated failure probability: each bound holds with its
confidence, so with confidence c per bound and B bounds checked the test fails with probability
at most B (1 - c) for a correct implementation (union bound); we use c = 0.999.
"""

import json

import numpy as np
import pytest

from audit.cli import main
from audit.dp.game import ScoreModel, audit_runs
from audit.dp.options import DPOptions
from audit.dp.runner import run_dp
from audit.errors import UserError
from audit.stats.per_step import StepComposition, per_step_bound
from audit.theory.claims import GaussianClaim
from audit.theory.gaussian import gaussian_mu_for

DELTA = 1e-5


def test_run_dp_dpgd_updates_end_to_end(tmp_path):
    run_dir, results = run_dp(DPOptions(target="dpgd_logreg_digits", out=str(tmp_path), runs=200, canary="dirac",
                                        threat="updates", device="cpu", quiet=True, confidence=0.999))
    assert (run_dir / "results.json").is_file()
    assert not (run_dir / "report.html").exists()  # a library caller of the runner asks for it (audit.report_step)
    saved = json.loads((run_dir / "results.json").read_text())
    assert saved["kind"] == "dp" and saved["game"]["runs"] == 200
    methods = {b["method"] for b in saved["lower_bounds"]}
    assert methods == {"clopper-pearson", "gdp", "gaussian-fit", "per-step-composed"}
    for b in saved["lower_bounds"]:  # 4 bounds at 0.999: false alarm <= 0.4%
        assert float(b["epsilon"]) <= saved["epsilon_theory"] + 1e-9
    assert saved["best_lower_bound"]["valid"] is True


def test_user_errors(tmp_path):
    with pytest.raises(UserError):
        run_dp(DPOptions(target="dpgd_logreg_digits", out=str(tmp_path), runs=8, canary="dirac", threat="black-box",
                         device="cpu", quiet=True))
    with pytest.raises(UserError):
        run_dp(DPOptions(target="nonprivate_digits", out=str(tmp_path), runs=8, canary="crafted",
                         threat="black-box", device="cpu", quiet=True))
    with pytest.raises(UserError):
        run_dp(DPOptions(target="dperm_digits", out=str(tmp_path), runs=8, canary="crafted", threat="updates",
                         quiet=True))
    assert main(["run", "dp", "--target", "dpgd_logreg_digits", "--threat", "black-box", "--canary", "dirac",
                 "--runs", "8", "--out", str(tmp_path), "--quiet"]) == 2


def test_cli_black_box_input_canary(tmp_path, capsys):
    code = main(["run", "dp", "--target", "dpgd_logreg_digits", "--threat", "black-box", "--canary", "crafted",
                 "--runs", "60", "--out", str(tmp_path), "--quiet", "--device", "cpu", "--epsilon", "2"])
    assert code == 0
    out = capsys.readouterr().out
    assert "clopper-pearson" in out and "verdict" in out


def test_run_dp_dperm_white_box(tmp_path):
    run_dir, outcome = run_dp(DPOptions(target="dperm_digits", out=str(tmp_path), runs=40000, canary="mislabelled",
                                        threat="white-box", quiet=True, confidence=0.999))
    methods = [b.method for b in outcome.lower_bounds]
    assert methods == ["clopper-pearson", "gdp", "gaussian-fit"]
    mu_pair = outcome.audited.params["minimiser_shift"] / outcome.audited.params["sigma"]
    for b in outcome.lower_bounds:  # 3 bounds at 0.999: false alarm <= 0.3%
        assert float(b.epsilon) <= outcome.epsilon_theory + 1e-9
    fit = outcome.lower_bounds[2].details
    # the fit estimates the pair's mu (not the claim's): within 5 standard errors
    assert abs(fit["mu_hat"] - mu_pair) < 5 * fit["mu_se"]


def test_no_bound_exceeds_theory_for_exact_mechanisms():
    """Simulated correct mechanisms (exact Gaussian / subsampled Gaussian steps) at their claims:
    5 seeds x 3 bounds (CP, GDP, per-step) at confidence 0.999 -> false alarm <= 1.5%."""
    from audit.theory.dpsgd import DPSGDClaim

    checked = 0
    for seed in range(5):
        rng = np.random.default_rng(seed)
        R, T = 3000, 8
        inc = rng.random(R) < 0.5
        if seed % 2 == 0:  # full batch: per step N(1, sigma^2) vs N(0, sigma^2)
            mu = gaussian_mu_for(4.0, DELTA)
            sigma = np.sqrt(T) / mu
            obs = rng.normal(size=(R, T)) * sigma + inc[:, None]
            claim, q = GaussianClaim(mu), 1.0
            scores = obs.sum(1)
        else:  # Poisson q: mixture in, N(0, sigma^2) out
            q, sigma = 0.1, 0.8
            obs = rng.normal(size=(R, T)) * sigma + ((rng.random((R, T)) < q) & inc[:, None])
            claim = DPSGDClaim(sigma, q, T)
            scores = obs.max(1)
        design = sigma if seed == 3 else None  # also the per-step threshold fixed in advance from the claim
        out = audit_runs(scores, inc, claim, DELTA, 0.999, seed,
                         ScoreModel(step_scores=obs, sample_rate=q, steps=T, design_sigma=design))
        theory = out.judgement.epsilon_theory
        for b in out.judgement.lower_bounds:
            assert float(b.epsilon) <= theory + 1e-9, (seed, b)
            checked += 1
        assert out.judgement.verdict.status == "consistent"
    assert checked == 15


def test_per_step_bound_detects_a_broken_noise_scale():
    """A mechanism adding half the claimed noise is caught by the per-step bound."""
    from audit.theory.dpsgd import DPSGDClaim

    rng = np.random.default_rng(0)
    R, T, q, sigma = 2000, 20, 0.05, 1.0
    inc = rng.random(R) < 0.5
    obs = rng.normal(size=(R, T)) * (sigma / 2) + ((rng.random((R, T)) < q) & inc[:, None])
    claimed = DPSGDClaim(sigma, q, T).epsilon(DELTA)
    composition = StepComposition(sample_rate=q, steps=T)
    assert per_step_bound(obs, inc, composition, DELTA, 0.95, 0).epsilon > claimed
    assert per_step_bound(obs, inc, composition, DELTA, 0.95, 0, design_sigma=sigma).epsilon > claimed
