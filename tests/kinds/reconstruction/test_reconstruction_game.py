"""The reconstruction kind's interval (audit.reconstruction.game) on the simulated DP-SGD game: the lower limit is
valid at its confidence (docs/references.md, "Reconstruction robustness"; ``run reconstruction`` end to end:
tests/e2e/reconstruction/test_reconstruction_run.py)."""

from __future__ import annotations

import numpy as np
from scipy import stats

from attacks.reconstruction import candidate_arrangement, dpsgd_reconstruction_game
from audit.reconstruction.game import interval
from audit.theory.dpsgd import DPSGDClaim
from audit.theory.rero import rero_bound


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
