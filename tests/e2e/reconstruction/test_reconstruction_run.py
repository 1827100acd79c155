"""``run reconstruction``: the game on a small DP-SGD target meets the ReRo bound, a broken control exceeds it,
and the non-private twin reconstructs (docs/references.md, "Reconstruction robustness"; the lower confidence
limit's validity: tests/kinds/reconstruction/test_reconstruction_game.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import results_in, without_volatile
from scipy import stats

import audit.executors as executors
from audit.cli import main
from audit.reconstruction.dperm import dperm_games
from audit.reconstruction.dpsgd import GamePlan, dpsgd_games
from audit.reconstruction.game import interval
from audit.theory.rero import rero_bound
from targets.catalogue import trained_target
from targets.datasets import load_dataset
from targets.dperm import DPERM, DPERM_TARGETS
from targets.dpsgd_controls import NoiseOverBatchStep


def test_run_reconstruction_meets_rero_bound(tmp_path, capsys):
    # dpgd_logreg_digits: full batch, 4 steps, so the game is one Gaussian release (mu = 2 / sigma): the optimal
    # attack's exact success (arrangement_success_probability) is 0.333 and 0.073 against bounds 0.361 and 0.081;
    # 400 runs give a standard error <= 0.024, so |success - bound| <= 0.1 has a margin of 3 standard errors
    code = main(["run", "reconstruction", "--target", "dpgd_logreg_digits", "--candidates", "10,100", "--runs", "400",
                 "--out", str(tmp_path), "--seed", "0", "-q"])
    assert code == 0
    (results_file,) = tmp_path.glob("*/results.json")
    results = json.loads(results_file.read_text())
    points = results["reconstruction"]["points"]
    assert [p["kappa"] for p in points] == [0.1, 0.01]
    for p in points:
        assert abs(p["success"] - p["rero_bound"]) <= 0.1
        assert p["success_ci"][0] <= p["rero_bound"]
        assert p["twin_success"] >= 0.95  # the non-private twin (noise 0)
    assert results["verdict"]["status"] == "consistent"
    assert "ReRo bound" in capsys.readouterr().out


def test_broken_control_exceeds_rero_bound():
    # noise divided by the batch size (targets.dpsgd_controls.NoiseOverBatchStep): 32 times less noise than
    # the claim's; the attack's lower confidence limit lies above the claim's bound
    target = trained_target("dpgd_logreg_digits")
    data = load_dataset(target.dataset)
    train_index = np.random.default_rng([0, 5]).permutation(len(data))[:target.n_train]
    sigma = target.noise_multiplier()
    plan = GamePlan(counts=(10,), runs=60, threat="updates", seed=0, twin=False)
    (game,), _ = dpsgd_games(data, train_index, target.train_config(sigma), plan, "cpu", step_type=NoiseOverBatchStep)
    lower, _ = interval(game.successes, game.runs, 0.05)
    assert lower > rero_bound(target.claim(sigma), 0.1)


def test_white_box_runs_cached_and_identical_on_a_process_pool(tmp_path, monkeypatch):
    # white-box (final parameters only) through the run's executor and the model cache: 40 runs in 2 chunks give
    # the same results.json in-process and on 2 workers, and a rerun trains nothing
    monkeypatch.setattr(executors, "CANDIDATE_CHUNK", 20)
    argv = ["run", "reconstruction", "--target", "dpgd_logreg_digits", "--threat", "white-box", "--candidates", "10",
            "--runs", "40", "--seed", "1", "--device", "cpu", "-q"]
    assert main(argv + ["--out", str(tmp_path / "a")]) == 0
    results = without_volatile(results_in(tmp_path / "a"))
    (p,) = results["reconstruction"]["points"]
    assert results["reconstruction"]["threat"] == "white-box"
    assert p["success_ci"][0] <= p["rero_bound"] and p["twin_success"] >= 0.95
    assert (next((tmp_path / "a").glob("*/report.html"))).stat().st_size > 0
    assert main(argv + ["--workers", "2", "--out", str(tmp_path / "b")]) == 0
    assert without_volatile(results_in(tmp_path / "b")) == results
    assert main(argv + ["--out", str(tmp_path / "a")]) == 0
    log = "".join(f.read_text() for f in (tmp_path / "a").glob("*/log.txt"))
    assert "reused cached models for 2 of 2 chunk(s)" in log  # the private runs, then the twin's
    assert "reconstruction runs: 40 runs in 2 chunk(s): 2 from the cache" in log


def test_dperm_run_within_rero_bound(tmp_path):
    # DP-ERM (1, 1e-5) on breast cancer: mu = 0.142, ReRo bound at kappa 1/10 is 0.127; the lower limit of the
    # success's interval must not exceed it for a correct mechanism
    assert main(["run", "reconstruction", "--target", "dperm_breast_cancer", "--candidates", "10", "--runs", "60",
                 "--seed", "0", "--out", str(tmp_path), "-q"]) == 0
    results = without_volatile(results_in(tmp_path))
    (p,) = results["reconstruction"]["points"]
    assert results["reconstruction"]["threat"] == "white-box"
    assert p["rero_bound"] == pytest.approx(stats.norm.cdf(stats.norm.ppf(0.1) + results["params"]["mu"]), abs=1e-9)
    assert p["success_ci"][0] <= p["rero_bound"]
    assert p["record_error_median"] > p["twin_record_error_median"]
    assert results["verdict"]["status"] == "consistent"


def test_dperm_closed_form_exact_without_noise_and_degrades_with_epsilon():
    # Balle, Cherubin & Hayes 2022: the released minimiser's first-order condition gives the missing record exactly;
    # output noise N(0, sigma^2 I) enters the implied gradient as n * lambda * noise, sigma ~ 1/epsilon
    spec = DPERM_TARGETS["dperm_digits"]
    minimisers: dict = {}
    errors, twin = {}, None
    for eps in (0.5, 1e6):
        (game,), _, _ = dperm_games("dperm_digits", lambda n, e=eps: DPERM(e, spec["delta"], spec["l2_reg"], n), (10,),
                                    20, 0, twin=twin is None, minimisers=minimisers)
        errors[eps] = game.record_error_median
        twin = twin if game.twin_record_error_median is None else game.twin_record_error_median
    assert twin < 1e-6
    assert errors[0.5] > 10 * errors[1e6]
