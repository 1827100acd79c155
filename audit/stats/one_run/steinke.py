"""One-run auditing [Steinke, Nasr, Jagielski 2023, "Privacy auditing with one (1) training run"]:
m canaries, each included by an independent fair coin; the auditor makes r guesses of which v
are correct; the p-value of v or more correct guesses under (eps, delta)-DP (Thm. 5.2,
Algorithm 2) is bisected for epsilon. Sources: docs/references.md, "One-run auditing".
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike
from scipy import special, stats

from audit.errors import UserError
from audit.stats.lower_bound import LowerBound
from audit.stats.rates import as_scores_members
from audit.theory.checks import check_confidence, check_delta

__all__ = ["one_run_p_value", "one_run_epsilon_lb", "one_run_bound"]


def _check_one_run(r: int, v: int, m: int) -> tuple[int, int, int]:
    for name, x in (("r", r), ("v", v), ("m", m)):
        if int(x) != x or x < 0:
            raise UserError(f"one-run audit: {name} must be a non-negative integer (got {x})")
    r, v, m = int(r), int(v), int(m)
    if not (v <= r <= m):
        raise UserError(f"one-run audit needs 0 <= v <= r <= m (got v={v}, r={r}, m={m})")
    return r, v, m


def one_run_p_value(r: int, v: int, m: int, epsilon: float, delta: float) -> float:
    """p-value of >= v correct guesses out of r under (eps, delta)-DP with m fair-coin canaries.

    Steinke, Nasr, Jagielski 2023, Thm. 5.2 and Algorithm 2: with ``q = e^eps/(1 + e^eps)``,
    ``beta = P[Bin(r, q) >= v]``, ``alpha* = max_{i=1..v} P[v > Bin(r, q) >= v - i] / i`` and the
    p-value is ``min(1, beta + alpha* * delta * 2m)``. Vectorised over i (O(v) numpy work).
    """
    r, v, m = _check_one_run(r, v, m)
    eps = float(epsilon)
    if eps < 0 or math.isnan(eps):
        raise UserError(f"epsilon must be >= 0 (got {epsilon})")
    delta = check_delta(delta)
    return _one_run_p(r, v, m, eps, delta)


def _one_run_p(r: int, v: int, m: int, eps: float, delta: float) -> float:
    if v == 0:
        return 1.0
    q = float(special.expit(eps))
    beta = float(stats.binom.sf(v - 1, r, q))
    alpha_star = 0.0
    if delta > 0.0:
        # P[v > X >= v - i] for i = 1..v is the cumulative sum of pmf(v-1), pmf(v-2), ..., pmf(0)
        pmf = stats.binom.pmf(np.arange(v - 1, -1, -1), r, q)
        alpha_star = float(np.max(np.cumsum(pmf) / np.arange(1, v + 1)))
    return min(1.0, beta + alpha_star * delta * 2.0 * m)


def one_run_epsilon_lb(r: int, v: int, m: int, delta: float, confidence: float) -> float:
    """Largest epsilon whose one-run p-value is below ``1 - confidence`` (0 if none).

    Steinke, Nasr, Jagielski 2023, Algorithm 2 ("get_eps_audit"): bisection on eps using
    :func:`one_run_p_value`, which is increasing in eps. Tolerance 1e-6 in eps.
    """
    r, v, m = _check_one_run(r, v, m)
    delta = check_delta(delta)
    confidence = check_confidence(confidence)
    p_target = 1.0 - confidence
    if _one_run_p(r, v, m, 0.0, delta) >= p_target:
        return 0.0
    lo, hi = 0.0, 1.0
    while _one_run_p(r, v, m, hi, delta) < p_target:
        lo, hi = hi, hi * 2.0
        if hi > 1e4:  # p-value -> P[Bin(r,1) >= v] = 1 as eps -> inf; never reached in practice
            return lo
    while hi - lo > 1e-6:
        mid = 0.5 * (lo + hi)
        if _one_run_p(r, v, m, mid, delta) < p_target:
            lo = mid
        else:
            hi = mid
    return float(lo)


def one_run_bound(
    scores: ArrayLike,
    members: ArrayLike,
    k_pos: int,
    k_neg: int,
    delta: float,
    confidence: float,
    role: str = "",
) -> LowerBound:
    """One-run audit (Steinke, Nasr, Jagielski 2023, Sec. 5, Algorithm 1 guessing rule).

    ``scores[i]`` is the attack score of canary i, ``members[i]`` whether it was included.
    Requires that each canary was included by an independent fair coin and that k_pos/k_neg were
    fixed without looking at these labels. Guesses "in" for the k_pos highest and "out" for the
    k_neg lowest scores (ties broken deterministically by canary index: among equal scores, the
    higher index counts as higher), abstains on the rest; r = k_pos + k_neg, v = number of correct
    guesses, m = number of canaries. Epsilon from :func:`one_run_epsilon_lb`. ``role``: the row's
    role in the verdict (:mod:`audit.stats.lower_bound`; default verdict).
    """
    s, mem = as_scores_members(scores, members)
    m = s.size
    for name, k in (("k_pos", k_pos), ("k_neg", k_neg)):
        if int(k) != k or k < 0:
            raise UserError(f"one-run audit: {name} must be a non-negative integer (got {k})")
    k_pos, k_neg = int(k_pos), int(k_neg)
    if k_pos + k_neg > m:
        raise UserError(f"one-run audit: k_pos + k_neg = {k_pos + k_neg} exceeds the {m} canaries; guess fewer")
    delta = check_delta(delta)
    confidence = check_confidence(confidence)
    order = np.lexsort((np.arange(m), s))  # ascending by score, then by index
    low = order[:k_neg]
    high = order[m - k_pos:] if k_pos > 0 else order[:0]
    v_pos = int(np.sum(mem[high]))
    v_neg = int(np.sum(~mem[low]))
    r = k_pos + k_neg
    v = v_pos + v_neg
    eps = one_run_epsilon_lb(r, v, m, delta, confidence)
    details = {
        "ceiling": one_run_epsilon_lb(r, r, m, delta, confidence) if r else 0.0,
        "r": r,
        "v": v,
        "k_pos": k_pos,
        "k_neg": k_neg,
        "v_pos": v_pos,
        "v_neg": v_neg,
        "m": m,
        "delta": delta,
        "p_value_at_eps": _one_run_p(r, v, m, eps, delta) if r else 1.0,
    }
    return LowerBound(method="one-run", epsilon=eps, confidence=confidence, n=m, valid=True, details=details, role=role)
