"""One-run bounds the way jax_privacy's ``CanaryScoreAuditor`` computes them by default, for
comparison with published figures: one-sided guesses at every threshold on the ROC frontier of
the canary scores, Bonferroni over those thresholds, the best bound kept.

The frontier is computed from the canaries' membership labels, so the family of candidate guesses
depends on the data and the union bound is not rigorous: these figures are reported as estimates
and never decide a verdict (the workbench's own one-run bounds fix their guess counts on shadow or
reference games). Sources: docs/references.md, "One-run auditing".
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy import special

from audit.stats.one_run.fdp import (
    approx_dp_blow_up_inverse,
    fdp_epsilon_lb,
    fdp_mu_lb,
    fdp_statistic,
    gdp_blow_up_inverse,
)
from audit.stats.one_run.steinke import one_run_epsilon_lb
from audit.stats.rates import as_scores_members
from audit.theory.checks import check_confidence, check_delta
from audit.theory.gaussian import gaussian_epsilon

__all__ = ["roc_frontier", "frontier_one_run_epsilons", "FRONTIER_ASSUMPTION"]

FRONTIER_ASSUMPTION = ("jax_privacy's procedure: Bonferroni over ROC-frontier guess counts, which are chosen with "
                       "the canary labels; reported for comparison, not a valid bound")


def roc_frontier(scores: np.ndarray, members: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(true positives, false positives) of "in iff score >= t" at the thresholds whose
    (false negatives, true negatives) points lie on the upper convex hull (ties kept together)."""
    pos, neg = np.sort(scores[members]), np.sort(scores[~members])
    thresholds = np.concatenate([np.union1d(pos, neg), [np.inf]])
    fn = np.searchsorted(pos, thresholds, side="left").astype(float)
    tn = np.searchsorted(neg, thresholds, side="left").astype(float)
    keep = np.arange(thresholds.size)
    while keep.size > 2:  # drop points on or below the chord of their neighbours until none is left
        d = np.diff(np.stack([fn[keep], tn[keep]], axis=1), axis=0)
        dominated = d[:-1, 1] * d[1:, 0] - d[1:, 1] * d[:-1, 0] <= 0
        if not dominated.any():
            break
        keep = keep[np.r_[True, ~dominated, True]]
    return (pos.size - fn[keep]).astype(int), (neg.size - tn[keep]).astype(int)


def frontier_one_run_epsilons(scores: ArrayLike, members: ArrayLike, delta: float,
                              confidence: float) -> dict[str, float]:
    """The best one-run figures over the frontier guesses at ``alpha / K`` each (K frontier points):
    ``steinke`` (Steinke et al. 2023), ``fdp`` (f_{eps,delta} null, Mahloujifar et al. 2025),
    ``fdp_gdp`` (epsilon of the rejected mu-GDP null) and ``mu`` and ``tests`` (K)."""
    s, mem = as_scores_members(scores, members)
    delta = check_delta(delta)
    confidence = check_confidence(confidence)
    tp, fp = roc_frontier(s, mem)
    m = s.size
    each = 1.0 - (1.0 - confidence) / tp.size
    best = {"steinke": 0.0, "fdp": 0.0, "mu": 0.0}
    for v, k in sorted(zip(tp.tolist(), (tp + fp).tolist(), strict=True), key=lambda c: -c[0] / max(c[1], 1)):
        if k == 0 or v / k <= 0.5:
            continue
        if v / k > special.expit(best["steinke"]):  # a lower precision cannot beat the best so far
            best["steinke"] = max(best["steinke"], one_run_epsilon_lb(k, v, m, delta, each))
        if fdp_statistic(approx_dp_blow_up_inverse(best["fdp"], delta), m, k, v, 1.0 - each) > 0:
            best["fdp"] = fdp_epsilon_lb(k, v, m, delta, each)
        if fdp_statistic(gdp_blow_up_inverse(best["mu"]), m, k, v, 1.0 - each) > 0:
            best["mu"] = fdp_mu_lb(k, v, m, each)
    return best | {"fdp_gdp": gaussian_epsilon(best["mu"], delta), "tests": int(tp.size)}
