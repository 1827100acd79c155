"""Testing a claim's own tradeoff curve with threshold tests, and designing the test most likely to
reject it.

A mechanism that satisfies its claim is f-DP for the claim's tradeoff curve f (Dong, Roth, Su 2019,
Def. 2.3 and Prop. 2.12: every (eps, delta(eps)) of a privacy profile holds, so f is the
primal–dual curve of the profile), so every test has ``FNR >= f(FPR)``. Given one-sided upper
bounds ``FPR_ub``, ``FNR_ub`` that hold simultaneously with probability ``c``, a test with
``FNR_ub < f(FPR_ub)`` rejects the claim at confidence ``c``: f is non-increasing, so with
probability ``c``, ``FNR <= FNR_ub < f(FPR_ub) <= f(FPR)``. For an (eps, delta) claim this is the
Clopper–Pearson comparison ``eps_lb > eps``; for a DP-SGD claim the exact curve of the composed
subsampled Gaussian is far below ``f_{eps,delta}`` in the bulk, where a few hundred runs can see it.

The rejection probability of a test whose true rates are (FPR, FNR) on ``n_neg`` / ``n_pos``
independent runs is a finite sum over the binomial false-positive count (:func:`rejection_power`);
:func:`designed_rejection_threshold` maximises it over thresholds of scores simulated under a stated
hypothesis (e.g. the mechanism the audited code runs), before any audit run is seen.
Sources: docs/references.md, "Threshold selection" and "f-DP and tradeoff curves".
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

from audit.stats.rates import cp_upper_array

__all__ = ["claim_margin", "rejection_power", "designed_rejection_threshold"]

Tradeoff = Callable[[np.ndarray], np.ndarray]


def claim_margin(fpr_ub: ArrayLike, fnr_ub: ArrayLike, claim_tradeoff: Tradeoff) -> np.ndarray:
    """``f(FPR_ub) - FNR_ub`` per test: positive means the test rejects the claim's curve ``f``.

    Args:
        fpr_ub: the tests' false-positive rate upper bounds.
        fnr_ub: their false-negative rate upper bounds.
        claim_tradeoff: the claim's curve f.

    Returns:
        The margins, one per test.
    """
    fpr_ub = np.clip(np.asarray(fpr_ub, dtype=float), 0.0, 1.0)
    return np.asarray(claim_tradeoff(fpr_ub), dtype=float) - np.asarray(fnr_ub, dtype=float)


def rejection_power(fpr: ArrayLike, fnr: ArrayLike, n_pos: int, n_neg: int, alpha_each: float,
                    claim_tradeoff: Tradeoff) -> np.ndarray:
    """Probability that the test "in iff score >= t" with true rates ``fpr``, ``fnr`` (one entry per
    threshold) rejects the claim's curve when its counts come from ``n_neg`` / ``n_pos`` runs and its
    rates are bounded by Clopper–Pearson at ``alpha_each`` each: ``sum_k P[FP = k] P[FN <= m(k)]``
    with ``m(k)`` the largest false-negative count whose bound lies below ``f(FPR_ub(k))``.

    Args:
        fpr: the true false-positive rate of each threshold.
        fnr: its true false-negative rate.
        n_pos: the number of runs with the target.
        n_neg: the number without.
        alpha_each: the Clopper–Pearson error of each rate bound.
        claim_tradeoff: the claim's curve f.

    Returns:
        The rejection probability of each threshold.
    """
    fpr, fnr = np.atleast_1d(np.asarray(fpr, dtype=float)), np.atleast_1d(np.asarray(fnr, dtype=float))
    k = np.arange(n_neg + 1)
    need = np.asarray(claim_tradeoff(cp_upper_array(k, n_neg, alpha_each)), dtype=float)
    fn_ub = cp_upper_array(np.arange(n_pos + 1), n_pos, alpha_each)  # increasing in the count
    most = np.searchsorted(fn_ub, need, side="left") - 1  # largest count with fn_ub < need, -1 if none
    p_fp = stats.binom.pmf(k[None, :], n_neg, fpr[:, None])
    p_fn = np.where(most[None, :] >= 0, stats.binom.cdf(np.maximum(most, 0)[None, :], n_pos, fnr[:, None]), 0.0)
    return np.sum(p_fp * p_fn, axis=1)


def designed_rejection_threshold(sim_in: ArrayLike, sim_out: ArrayLike, n_pos: int, n_neg: int, confidence: float,
                                 claim_tradeoff: Tradeoff, n_thresholds: int = 200) -> tuple[float, float]:
    """The threshold of "in iff score >= t" with the largest :func:`rejection_power` when the scores
    follow ``sim_in`` / ``sim_out`` (simulated under a hypothesis, never the audit's runs), its
    rates bounded at ``(1 - confidence)/2`` each. Chosen before the runs are seen, it lets the bound
    use every run; a wrong hypothesis costs power, never validity. Returns (threshold, power under
    the hypothesis).

    Args:
        sim_in: simulated scores with the target.
        sim_out: simulated scores without it.
        n_pos: the number of runs with the target.
        n_neg: the number without.
        confidence: the confidence of the test.
        claim_tradeoff: the claim's curve f.
        n_thresholds: the candidate thresholds.

    Returns:
        (threshold, power under the hypothesis).
    """
    sim_in, sim_out = np.sort(np.asarray(sim_in, dtype=float)), np.sort(np.asarray(sim_out, dtype=float))
    cands = np.unique(np.quantile(sim_out, 1.0 - np.logspace(-4, 0, n_thresholds)))
    fpr = 1.0 - np.searchsorted(sim_out, cands, side="left") / sim_out.size
    fnr = np.searchsorted(sim_in, cands, side="left") / sim_in.size
    power = rejection_power(fpr, fnr, n_pos, n_neg, (1.0 - confidence) / 2, claim_tradeoff)
    j = int(np.argmax(power))
    return float(cands[j]), float(power[j])
