"""The black-box one-run design against a partial leak (audit/stats/one_run/leak.py) and the ``--guesses``
forms (audit/arguments.py): one- and two-sided shapes weighed by the smallest leaked fraction they catch."""

from __future__ import annotations

import math

import numpy as np
import pytest

from audit.arguments import guess_spec
from audit.dp.one_run.bounds import one_run_results
from audit.stats.one_run.design import CanaryMechanism, DesignObjective
from audit.stats.one_run.leak import Leak, choose_leak_design, expected_right, reach
from audit.theory.claims import ApproxDPClaim
from audit.theory.dpsgd import calibrate_noise_multiplier

EPS, DELTA, M = 2.0, 1e-5, 510
OBJECTIVE = DesignObjective(delta=DELTA, confidence=0.95)


def test_expected_right_guesses_at_no_leak_and_a_full_leak():
    assert expected_right((40, 0), M, 1.0) == 40 and expected_right((40, 40), M, 1.0) == 80
    assert expected_right((40, 0), M, 0.0) == 20 and expected_right((40, 40), M, 0.0) == 40
    # 10% of the 255 included leak: 25.5 at the top, the other 14.5 "in" guesses right a third of the time
    assert expected_right((40, 0), M, 0.1) == math.floor(25.5 + 14.5 * 0.9 / 1.9)


def test_a_partial_leak_needs_one_sided_guesses():
    """The issue's case: 35 of 255 included canaries leak (13.7%). Two-sided guesses (39 + 39, what simulating
    the claim chose) need most canaries to leak; one-sided ones catch 35 of 255."""
    assert reach((39, 39), M, Leak(EPS), OBJECTIVE) > 0.5
    assert reach((30, 0), M, Leak(EPS), OBJECTIVE) < 35 / 255
    assert reach((5, 0), M, Leak(EPS), OBJECTIVE) == math.inf  # five right guesses cannot reject epsilon 2


def _mechanism() -> CanaryMechanism:
    return CanaryMechanism(0.2, float(calibrate_noise_multiplier(EPS, DELTA, 0.2, 5)), 5)


def test_the_design_catches_35_of_255_leaked_canaries():
    design = choose_leak_design(_mechanism(), M, Leak(EPS), OBJECTIVE, 0, simulations=2)
    assert design.k_neg == 0 and design.criterion == "leak"
    assert min(design.grid_value) <= 35 / 255 and len(design.grid) == len(design.grid_value)
    rng = np.random.default_rng(1)
    included = np.zeros(M, dtype=bool)
    included[rng.choice(M, 255, replace=False)] = True
    scores = rng.normal(size=M)
    scores[np.flatnonzero(included)[:35]] += 50.0  # 35 leak, the others look like the excluded ones
    stats = one_run_results(scores, included, ApproxDPClaim(EPS, DELTA), DELTA, 0.95, design)
    assert stats.judgement.verdict.status == "violation" and stats.judgement.best_lower_bound.epsilon > EPS


@pytest.mark.parametrize("sides", ["one", "two"])
def test_the_sides_asked_for_are_kept(sides):
    design = choose_leak_design(_mechanism(), 64, Leak(EPS), OBJECTIVE, 0, simulations=2, guess_counts=[16],
                                sides=sides)
    assert design.k_pos == 16 and design.k_neg == (0 if sides == "one" else 16)


def test_guess_forms():
    assert guess_spec("35") == (35, "both") and guess_spec(35) == (35, "both")
    assert guess_spec("35:0") == (35, "one") and guess_spec("35:35") == (35, "two")
    for bad in ("0", "35:3", "x", "-1", "35:", ":0"):
        assert guess_spec(bad) is None, bad


def test_a_design_that_expects_errors_needs_no_perfect_run():
    """With 2% of the leaked canaries' places taken by others the shape is longer and its reach larger."""
    exact = min(reach(s, M, Leak(EPS), OBJECTIVE) for s in [(24, 0), (39, 0)])
    tolerant = reach((39, 0), M, Leak(EPS, 0.02), OBJECTIVE)
    assert reach((24, 0), M, Leak(EPS, 0.02), OBJECTIVE) == math.inf and exact < tolerant < 1
    assert expected_right((40, 0), M, 1.0, 0.05) == 38  # 2 of the 40 top places to excluded canaries (all in leak)
    with pytest.raises(Exception, match="errors"):
        Leak(EPS, 1.0)
