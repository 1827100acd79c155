"""The statistics of ``run mechanism`` (:func:`audit.mechanism.runner.mechanism_bounds`) on the built-in
mechanisms (on DP-ERM: tests/e2e/mechanism/test_dperm_bounds.py): the lower bounds stay below the claim and the
exact pair yet see a good part of it, and the verdict's false-violation rate at the exact epsilon stays within
its confidence."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import max_exceedances

from audit.mechanism.runner import mechanism_bounds
from audit.stats.verdict import best_valid_bound, claim_verdict
from targets.mechanisms import MECHANISMS, make_mechanism

N_DRAWS = 100_000  # per world, as the mechanism audit requires (>= 1e5)
ALPHA = 0.05


@pytest.mark.parametrize("name", list(MECHANISMS))
def test_mechanism_audit_lower_bound_is_below_the_claim(name):
    mech = make_mechanism(name)
    delta = getattr(mech, "delta", 1e-5)
    d0, d1 = mech.neighbouring_pair()
    s0 = mech.score(mech.sample(d0, N_DRAWS, np.random.default_rng(1)))
    s1 = mech.score(mech.sample(d1, N_DRAWS, np.random.default_rng(2)))
    (cp, _gdp), _, _ = mechanism_bounds(mech, s0, s1, delta, 0.95, seed=0)
    claim_eps = mech.claim.epsilon(delta)
    pair_eps = mech.pair_claim().epsilon(delta)
    assert cp.valid
    assert cp.epsilon < claim_eps
    assert cp.epsilon <= pair_eps  # a valid bound cannot exceed the exact pair (fails w.p. <= 5%; seeds fixed)
    # power: the audit sees a substantial part of what the pair allows (regression guard; fixed seeds)
    assert cp.epsilon > 0.3 * pair_eps



@pytest.mark.parametrize("name", ["gaussian_analytic", "randomized_response"])
def test_false_violation_rate_at_the_exact_epsilon(name: str) -> None:
    """Mechanisms whose true epsilon equals the claim exactly (the analytic Gaussian mechanism, and
    randomized response), audited by the statistics of ``run mechanism`` at small draw counts over
    many seeds: the verdict says violation in at most 5% of the seeds (plus binomial slack)."""
    mech = make_mechanism(name)
    delta = float(getattr(mech, "delta", 1e-5))
    assert mech.pair_claim().epsilon(delta) == pytest.approx(mech.claim.epsilon(delta), rel=1e-3)
    d0, d1 = mech.neighbouring_pair()
    theory = mech.claim.epsilon(delta)
    violations, reps, draws = 0, 200, 400
    for seed in range(reps):
        rng = np.random.default_rng([seed, 9])
        s0 = mech.score(mech.sample(d0, draws, rng))
        s1 = mech.score(mech.sample(d1, draws, rng))
        _, rows, family = mechanism_bounds(mech, s0, s1, delta, 1 - ALPHA, seed)
        violations += claim_verdict(best_valid_bound(rows, family), theory, delta).status == "violation"
    assert violations <= max_exceedances(reps, ALPHA)
