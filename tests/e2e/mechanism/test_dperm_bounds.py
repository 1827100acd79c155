"""The statistics of ``run mechanism`` (:func:`audit.mechanism.runner.mechanism_bounds`) on DP-ERM, at 50,000 draws
per world (its unit tests on the built-in mechanisms: tests/kinds/mechanism/test_mechanism_bounds.py): the lower
bound stays below the exact pair, which stays below the claim, and sees a good part of the pair."""

from __future__ import annotations

from audit.mechanism.runner import mechanism_bounds
from targets.dperm import make_dperm


def test_dperm_audit_below_claim_and_near_pair():
    mech = make_dperm("dperm_breast_cancer", epsilon=2.0)
    d0, d1 = mech.neighbouring_pair()
    n = 50_000
    s0 = mech.score(mech.sample(d0, n, 11))
    s1 = mech.score(mech.sample(d1, n, 12))
    (cp, _), _, _ = mechanism_bounds(mech, s0, s1, 1e-5, 0.95, seed=0)
    pair_eps = mech.pair_claim().epsilon(1e-5)
    assert cp.valid and cp.epsilon < pair_eps < mech.claim.epsilon(1e-5)
    assert cp.epsilon > 0.3 * pair_eps
    p = mech.params()
    assert p["minimiser_shift"] <= p["sensitivity"]
