"""The final-model perfect-attack expectation (audit.stats.one_run.final_model): canaries of a linear model's
last iterate, drawn exactly, and the bound of fixed guesses on them; the black-box design chosen on those
games."""

from __future__ import annotations

import numpy as np
import pytest

from audit.stats.one_run.design import CanaryMechanism, DesignObjective, guess_shapes
from audit.stats.one_run.fdp import fdp_epsilon_lb
from audit.stats.one_run.final_model import (
    choose_final_model_design,
    last_iterate_expectation,
    simulate_last_iterate_scores,
)
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


TINYGPT = CanaryMechanism(0.1, 1.386, 100)  # dpsgd_tinygpt's DP-SGD: (4, 1e-5) by PLD
OBJECTIVE = DesignObjective(delta=1e-5, confidence=0.95)


def test_the_black_box_design_is_two_sided_on_the_final_models_mirrored_tails_and_can_reject_the_claim():
    """At epsilon 4 and 1,000 canaries: every shape that competed can reject the claim (ceiling above 4), the
    one of the largest mean bound on final-model games wins, and it is two-sided (the one-sided shape of the
    leak design, 174 guesses, expects less on the same games)."""
    design = choose_final_model_design(TINYGPT, 1000, 4.0, OBJECTIVE, 0, simulations=10)
    assert design.criterion == "final-model" and design.k_neg == design.k_pos and design.ceiling > 4.0
    assert all(fdp_epsilon_lb(sum(s), sum(s), 1000, 1e-5, 0.95) > 4.0 for s in design.grid)
    assert design.grid[int(np.argmax(design.grid_value))] == (design.k_pos, design.k_neg)
    one_sided = dict(zip(design.grid, design.grid_value, strict=True))[(174, 0)]
    assert one_sided < max(design.grid_value)
    assert design == choose_final_model_design(TINYGPT, 1000, 4.0, OBJECTIVE, 0, simulations=10)
    assert "final model" in design.to_dict()["rule"]


def test_without_a_shape_that_can_reject_the_claim_every_shape_competes():
    design = choose_final_model_design(TINYGPT, 200, 20.0, OBJECTIVE, 0, simulations=4)
    assert design.ceiling < 20.0 and len(design.grid) == len(guess_shapes(200, "fdp", None))


@pytest.mark.parametrize("sides", ["one", "two"])
def test_the_sides_asked_for_are_the_only_candidates(sides):
    design = choose_final_model_design(TINYGPT, 400, 4.0, OBJECTIVE, 1, simulations=4, guess_counts=[60, 100],
                                       sides=sides)
    assert (design.k_neg == 0) == (sides == "one") and design.k_pos in (60, 100)
