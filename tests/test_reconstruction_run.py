"""``run reconstruction``: the game on a small DP-SGD target meets the ReRo bound, a broken control exceeds it,
the non-private twin reconstructs, and the lower confidence limit is valid (docs/references.md,
"Reconstruction robustness")."""

from __future__ import annotations

import json

import numpy as np
from scipy import stats

from attacks.reconstruction import candidate_arrangement, dpsgd_reconstruction_game
from audit.cli import main
from audit.reconstruction.dpsgd import dpsgd_games
from audit.reconstruction.game import interval
from audit.theory.dpsgd import DPSGDClaim
from audit.theory.rero import rero_bound
from targets.datasets import load_dataset
from targets.dpsgd_controls import NoiseOverBatchStep
from targets.registry import get_target


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
    target = get_target("dpgd_logreg_digits")
    data = load_dataset(target.dataset)
    train_index = np.random.default_rng([0, 5]).permutation(len(data))[:target.n_train]
    sigma = target.noise_multiplier()
    (game,), _ = dpsgd_games(data, train_index, target.train_config(sigma), (10,), 60, "updates", 0, "cpu",
                             twin=False, step_type=NoiseOverBatchStep)
    lower, _ = interval(game.successes, game.runs, 0.05)
    assert lower > rero_bound(target.claim(sigma), 0.1)


def test_lower_limit_valid_monte_carlo():
    # the simulated DP-SGD game (the mechanism itself) at the bound-meeting simplex: the lower limit of the
    # two-sided 95% interval exceeds the true bound in at most alpha/2 of the repetitions, plus binomial slack
    sigma, q, steps, n, reps, runs = 2.0, 1.0, 4, 10, 300, 100
    bound = rero_bound(DPSGDClaim(sigma, q, steps), 1 / n)
    cands = candidate_arrangement(n)
    rng = np.random.default_rng(11)
    above = sum(interval(g.successes, g.trials, 0.05)[0] > bound
                for g in (dpsgd_reconstruction_game(cands, q, sigma, steps, runs, rng) for _ in range(reps)))
    assert above <= stats.binom.ppf(0.999, reps, 0.025)
