"""The final-model perfect-attack expectation (audit.stats.one_run.final_model): canaries of a linear model's
last iterate, drawn exactly, and the bound of fixed guesses on them."""

from __future__ import annotations

import numpy as np
import pytest

from audit.stats.one_run.design import CanaryMechanism
from audit.stats.one_run.final_model import last_iterate_expectation, simulate_last_iterate_scores
from audit.stats.one_run.steinke import one_run_epsilon_lb
from audit.theory.last_iterate import last_iterate_epsilon

MECH = CanaryMechanism(0.2, 0.8, 10)


def test_an_included_canary_moves_its_coordinate_by_the_steps_that_sampled_it():
    scores, members = simulate_last_iterate_scores(40_000, MECH, np.random.default_rng(0))
    assert 0.45 < members.mean() < 0.55
    assert scores[members].mean() - scores[~members].mean() == pytest.approx(0.2 * 10, abs=0.1)
    assert scores[~members].std() == pytest.approx(0.8 * np.sqrt(10), rel=0.03)


def test_the_expectation_lies_between_zero_and_the_ceiling_and_below_the_pairs_epsilon():
    m, k = 2000, 100
    out = last_iterate_expectation(MECH, m, (k, 0), "steinke", 1e-5, 0.95, 30, seed=0)
    assert 0 < out["range_5_95"][0] <= out["mean"] <= out["range_5_95"][1]
    assert out["mean"] < one_run_epsilon_lb(k, k, m, 1e-5, 0.95)  # every guess right
    assert out["mean"] < last_iterate_epsilon(1e-5, 0.8, 0.2, 10)  # a valid bound on the pair, on average
    assert out == last_iterate_expectation(MECH, m, (k, 0), "steinke", 1e-5, 0.95, 30, seed=0)
