"""The one-run DP-SGD audit (``run dp --one-run``): its statistics (audit/dp/one_run/bounds.py) at and away from
the claim, and the built-in targets' game end to end (audit/dp/one_run/game.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from audit.dp.one_run.bounds import one_run_results
from audit.dp.options import DPOptions
from audit.dp.runner import run_dp
from audit.errors import UserError
from audit.report_step import write_report
from audit.schemas import validate_results
from audit.stats.one_run.design import DesignObjective, choose_one_run_design, simulate_dpsgd_canary_scores
from audit.theory.dpsgd import DPSGDClaim, calibrate_noise_multiplier

DELTA, CONFIDENCE = 1e-5, 0.95
#: A small Poisson DP-SGD (q 0.1, T 10) claiming epsilon 1: cheap to simulate, and a one-run game with
#: 5,000 canaries can reject it when the noise is halved (the expected perfect bound under the claim
#: is 0.26 and the ceiling 4.6).
Q, T, EPS = 0.1, 10, 1.0
ROOT = Path(__file__).resolve().parents[3]


class _CachedClaim(DPSGDClaim):
    """The claimed DP-SGD with its tradeoff curve memoised per alpha grid (same values; the tests call
    it on the same grids game after game)."""

    def tradeoff(self, alpha):
        a = np.asarray(alpha, dtype=float)
        cache = self.__dict__.setdefault("_memo", {})
        key = a.tobytes()
        if key not in cache:
            cache[key] = super().tradeoff(a)
        return cache[key]


@pytest.fixture(scope="module")
def claimed():
    sigma = calibrate_noise_multiplier(EPS, DELTA, Q, T)
    return sigma, _CachedClaim(noise_multiplier=sigma, sample_rate=Q, steps=T)


def test_no_false_violation_at_the_claim(claimed):
    """DP-SGD exactly at its claim: the one-run verdict (f-DP bound or the claim's own curve) is a
    violation in at most 5% of games, up to binomial slack (fails with probability < 0.1% when the
    true rate is 5%)."""
    sigma, claim = claimed
    m, games = 1000, 60
    design = choose_one_run_design(claim, m, DesignObjective(delta=DELTA, confidence=CONFIDENCE), 2024, simulations=10)
    violations = 0
    for g in range(games):
        scores, members = simulate_dpsgd_canary_scores(m, Q, sigma, T, [11, g])
        out = one_run_results(scores, members, claim, DELTA, CONFIDENCE, design)
        assert out.judgement.family.to_dict() == {"size": 1, "confidence": CONFIDENCE}
        assert [b.role for b in out.judgement.lower_bounds] == ["verdict", "secondary", "estimate"]
        violations += out.judgement.verdict.status == "violation"
    assert violations <= stats.binom.isf(0.001, games, 0.05)


def test_halved_noise_is_a_violation(claimed):
    """The same DP-SGD with half the claimed noise multiplier (true epsilon about 3.8): the one-run game
    with 5,000 canaries rejects the claim (the same guesses, fixed under the claim). Measured power on
    8 games of other seeds: 8 of 8; at power 0.9, 6 or more of 8 happens with probability 0.96."""
    sigma, claim = claimed
    m = 5000
    design = choose_one_run_design(claim, m, DesignObjective(delta=DELTA, confidence=CONFIDENCE), 2024, simulations=10)
    found = 0
    for g in range(8):
        scores, members = simulate_dpsgd_canary_scores(m, Q, sigma / 2, T, [13, g])
        out = one_run_results(scores, members, claim, DELTA, CONFIDENCE, design)
        found += out.judgement.verdict.status == "violation"
        assert out.one_run.correct <= design.k_pos + design.k_neg
    assert found >= 6


def test_design_mismatch_is_refused(claimed):
    sigma, claim = claimed
    design = choose_one_run_design(claim, 200, DesignObjective(delta=DELTA, confidence=CONFIDENCE), 0, simulations=2)
    scores, members = simulate_dpsgd_canary_scores(100, Q, sigma, T, 0)
    with pytest.raises(Exception, match="design is for 200 canaries"):
        one_run_results(scores, members, claim, DELTA, CONFIDENCE, design)


def _run(*args: str, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "audit", "run", "dp", *args, "--out", str(out), "-q"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


def test_one_run_end_to_end(tmp_path):
    """One training of dpsgd_audit_logreg_digits with gradient canaries: results blocks and report."""
    run_dir, outcome = run_dp(DPOptions(target="dpsgd_audit_logreg_digits", out=str(tmp_path), one_run=True,
                                        quick=True, canaries=400, quiet=True))
    results = json.loads((run_dir / "results.json").read_text())
    validate_results(results)
    assert results["kind"] == "dp" and results["game"]["one_run"] is True and results["game"]["trainings"] == 1
    one = results["one_run"]
    assert one["canaries"] == 400 and results["game"]["canary_kind"] == "dirac"
    assert 0 <= one["correct"] <= one["k_pos"] + one["k_neg"] and one["k_neg"] in (0, one["k_pos"])
    assert one["design"]["rule"].startswith("guess counts maximising")
    assert one["expected_perfect"]["mean"] >= 0 and one["ceiling"] == results["ceiling"]["epsilon"]
    assert results["best_lower_bound"]["method"] == "one-run-fdp"
    assert results["verdict"]["status"] == "consistent"
    assert results["best_lower_bound"]["epsilon"] <= one["ceiling"]
    assert "One run of your training" in write_report(run_dir, outcome).read_text()


def test_too_many_canaries_exit_2(tmp_path):
    proc = _run("--target", "dpsgd_audit_logreg_digits", "--one-run", "--canaries", "100000", out=tmp_path)
    assert proc.returncode == 2 and "more than" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not list(tmp_path.glob("*/results.json"))


def test_black_box_one_run_points_to_membership(tmp_path):
    with pytest.raises(UserError, match="run membership --target dpsgd_audit_logreg_digits"):
        run_dp(DPOptions(target="dpsgd_audit_logreg_digits", out=str(tmp_path), one_run=True, threat="black-box"))


@pytest.mark.parametrize("kind", ["dirac", "random"])
def test_canaries_join_like_poisson_records(kind):
    """With (almost) no noise, a canary's per-step observations sum to the number of steps it joined
    (Dirac: exactly; random directions: up to their cross-talk), 0 when it is out; its joins follow
    the target's Poisson rate."""
    from dataclasses import replace

    from targets.catalogue import trained_target
    from targets.datasets import load_dataset
    from targets.gradient_canaries import OneRunCanaries, quiet_coordinates, train_one_run

    target = trained_target("dpsgd_audit_logreg_digits")
    config = replace(target.train_config(1e-6), epochs=5.0)  # 100 steps at q 0.05
    data = load_dataset(target.dataset, None)
    rows = np.random.default_rng(0).permutation(len(data))[:target.n_train]
    m, p = 64, 650
    included = np.random.default_rng(1).random(m) < 0.5
    if kind == "dirac":
        canaries = OneRunCanaries("dirac", included, 3, coordinates=quiet_coordinates(target.arch, data, rows, 7, m))
    else:
        d = np.random.default_rng(2).standard_normal((m, p)).astype(np.float32)
        canaries = OneRunCanaries("random", included, 3, directions=d / np.linalg.norm(d, axis=1, keepdims=True))
    run = train_one_run(data, rows, config, 7, canaries, updates=True)
    total = run.step_obs.sum(axis=1)
    # cross-talk of random directions: each of the other joins adds <d_i, d_j> ~ N(0, 1/P); 6 sd slack
    slack = 1e-3 if kind == "dirac" else 6 * np.sqrt(run.joins.sum() / p)
    np.testing.assert_allclose(total, run.joins, atol=slack)
    assert np.all(run.joins[~included] == 0)
    steps_in = run.joins[included].sum()
    n = included.sum() * config.steps  # Binomial(n, q): 5 sd
    assert abs(steps_in - n * config.sample_rate) <= 5 * np.sqrt(n * config.sample_rate)
