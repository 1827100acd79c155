"""Monte-Carlo check of the verdict's family-wise confidence (audit.stats.verdict): k synthetic attacks at the
boundary of eps-DP, 600 repetitions (about 20 s, so it runs with the end-to-end tests, not the unit lane)."""

from __future__ import annotations

import numpy as np
from helpers import max_exceedances
from scipy import special

from audit.stats.judgement import judge
from audit.stats.lower_bound import LowerBound
from audit.stats.one_run.steinke import one_run_epsilon_lb
from audit.stats.outcome import Bound
from audit.stats.verdict import Family
from audit.theory.claims import PureDPClaim

ALPHA = 0.05


def _row(eps: float, confidence: float) -> Bound:
    return LowerBound(method="one-run", epsilon=eps, confidence=confidence, n=100, valid=True, details={},
                      role="").block()


def test_k_synthetic_attacks_at_the_boundary() -> None:
    """k = 5 attacks, each a one-run audit whose guesses are right exactly with the probability
    e^eps/(1 + e^eps) that an eps-DP mechanism allows (the boundary). With each bound at 95% the
    largest of the five exceeds eps far more often than 5%; with the family's Bonferroni
    confidence the verdict's false-violation rate stays within 5% plus binomial slack."""
    eps, k, r, reps = 1.0, 5, 2000, 600
    q = float(special.expit(eps))
    claim = PureDPClaim(eps)
    rng = np.random.default_rng(2024)
    v = rng.binomial(r, q, size=(reps, k))
    corrected, uncorrected = 0, 0
    family = Family(size=k, confidence=1 - ALPHA)
    for row in v:
        rows = [_row(one_run_epsilon_lb(r, int(x), r, 0.0, family.member_confidence), family.member_confidence)
                for x in row]
        verdict = judge(rows, claim=claim, delta=1e-5, alpha=np.array([0.5]), family=family).verdict
        corrected += verdict.status == "violation"
        naive = [one_run_epsilon_lb(r, int(x), r, 0.0, 1 - ALPHA) for x in row]
        uncorrected += max(naive) > claim.epsilon(1e-5)
    assert corrected <= max_exceedances(reps, ALPHA)
    assert uncorrected > 2.5 * ALPHA * reps  # the correction is needed: without it the rate is ~ 1 - 0.95^5
