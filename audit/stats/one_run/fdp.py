"""One-run auditing of f-DP [Mahloujifar, Melis, Chaudhuri 2025, "Auditing f-Differential Privacy in
One Run", ICML, arXiv 2410.22235].

Same game as Steinke, Nasr, Jagielski 2023 (:mod:`audit.stats.one_run.steinke`): m canaries, each in the
training set by an independent fair coin; the auditor guesses "in" for the k highest scores and
v of those guesses are right. Under the null "the mechanism is f-DP", Mahloujifar et al. bound the
probability of v or more right guesses by a recursion over the number of right guesses that uses
only the blow-up function of f, ``B(x) = 1 - f(x)`` (the most an event of probability x in one
world can have in the other), through its inverse; the null is rejected at significance a when
``r + h > k/m`` after the recursion started from ``r = a v / m``, ``h = a (k - v) / m`` (their
``audit_rh_with_cap``). Unlike Steinke et al.'s p-value, no ``2 m delta`` term appears, so the test
does not collapse with many canaries, and any f can be tested:

* ``f_{eps,delta}`` (:func:`approx_dp_blow_up_inverse`): (eps, delta)-DP is exactly
  f_{eps,delta}-DP, so the largest eps whose null is rejected is a **valid** (eps, delta) lower
  bound with no assumption (:func:`fdp_epsilon_lb`);
* the claim's own tradeoff curve (:func:`tradeoff_blow_up_inverse`, e.g. the exact DP-SGD curve
  of the PLD accountant): a rejection is a **valid violation** of the claim, and it is implied by
  the epsilon bound exceeding the claim's epsilon (a claim's f lies above f_{eps_claim, delta});
* ``G_mu`` (:func:`gdp_blow_up_inverse`): the largest mu rejected is a rigorous mu-GDP lower bound;
  read as epsilon at delta it is an **estimate** that assumes a Gaussian tradeoff.

Guesses on both sides. The auditor may also guess "out" for the ``k_neg`` lowest scores (abstaining
on the rest); v then counts the right guesses of both kinds and the recursion runs with ``k_pos +
k_neg`` guesses. This is valid whenever the tested f bounds the tradeoff of BOTH ordered pairs of
neighbouring worlds, (out, in) and (in, out), which is what f-DP means for a symmetric neighbouring
relation (add/remove; Dong, Roth, Su 2019, Def. 2.3 quantifies over all neighbouring pairs) and holds
for every null tested here: f_{eps,delta} and G_mu are symmetric, and a claim's curve built from its
privacy profile is a supremum of symmetric f_{eps,delta(eps)} (:func:`audit.theory.tradeoff.
tradeoff_from_profile`). The argument: Mahloujifar et al.'s analysis is stated for a reconstruction
game in which each of the m slots holds one of ``k`` options and the adversary, after one run, guesses
an option for some slots and abstains on the others (their ``audit_rh_with_cap`` has the alphabet size
``k`` as a parameter; membership is ``k = 2``, the options "in" and "out"); the only property of the
mechanism the proof uses is, per slot i and for any event E that is a post-processing of the output
and of the other slots' secrets, ``P[E | secret_i = s] <= B(P[E | secret_i = s'])`` for the two options
s != s' (then averaged over the other slots by the concavity of B). For the event "guess on slot i
is 'in'" that is the f-DP bound of the pair (out, in); for "guess on slot i is 'out'" it is the bound
of the pair (in, out) — the same B when f bounds both orders. Nothing in the recursion asks which
option a guess names, so a guess "out" is a guess "in" on the complementary test with the same
tradeoff, and guesses of both kinds in one run are covered (as Steinke et al.'s guesses in
{-1, 0, +1} are for (eps, delta)). The Monte-Carlo soundness suite tests two-sided guesses at exact
claims (tests/e2e/montecarlo/test_soundness.py). Sources: docs/references.md, "One-run auditing".
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize, special

from audit.errors import UserError
from audit.stats.lower_bound import LowerBound
from audit.stats.rates import as_scores_members
from audit.theory.checks import as_alpha, check_confidence, check_delta
from audit.theory.gaussian import gaussian_epsilon

__all__ = ["BlowUpInverse", "approx_dp_blow_up_inverse", "gdp_blow_up_inverse", "tradeoff_blow_up_inverse",
           "fdp_statistic", "fdp_rejects", "fdp_epsilon_lb", "fdp_mu_lb", "fdp_one_run_bound", "FDP_GDP_ASSUMPTION"]

#: B^-1: probability in one world -> the least probability the same event must have in the other.
BlowUpInverse = Callable[[float], float]

FDP_GDP_ASSUMPTION = "epsilon assumes a Gaussian tradeoff (mu-GDP null); mu_lb is rigorous"


def approx_dp_blow_up_inverse(epsilon: float, delta: float) -> BlowUpInverse:
    """Inverse blow-up of (eps, delta)-DP: ``B(x) = min(1, delta + e^eps x, 1 - e^-eps (1 - delta - x))``
    (one minus f_{eps,delta}, Dong, Roth, Su 2019, Prop. 2.5), ``B^-1(y)`` its smallest preimage."""
    e = math.exp(min(epsilon, 700.0))

    def inverse(y: float) -> float:
        if y <= delta:
            return 0.0
        return max((y - delta) / e, 1.0 - delta - e * (1.0 - y), 0.0)

    return inverse


def gdp_blow_up_inverse(mu: float) -> BlowUpInverse:
    """Inverse blow-up of mu-GDP: ``B(x) = Phi(Phi^-1(x) + mu)``, so ``B^-1(y) = Phi(Phi^-1(y) - mu)``."""
    if math.isinf(mu):
        return lambda y: float(y >= 1.0)
    return lambda y: float(special.ndtr(special.ndtri(y) - mu))


def tradeoff_blow_up_inverse(tradeoff: Callable[[np.ndarray], np.ndarray], points: int = 4001) -> BlowUpInverse:
    """Inverse blow-up of any tradeoff curve f, from f on a grid (log-spaced near 0, linear above).

    Conservative: ``B^-1(y)`` is the largest grid point whose blow-up is still below y, never more
    than the exact inverse, so a rejection stays valid (a smaller ``B^-1`` only makes the recursion
    less likely to reject). For accountant curves that are themselves lower bounds on the true f
    (the PLD's pessimistic discretisation) the blow-up is over-estimated, which is conservative too.
    """
    grid = np.unique(np.concatenate([[0.0], np.logspace(-14, -2, points // 2), np.linspace(0.01, 1.0, points // 2)]))
    blow_up = np.maximum.accumulate(np.clip(1.0 - np.asarray(tradeoff(as_alpha(grid)), dtype=float), 0.0, 1.0))

    def inverse(y: float) -> float:
        j = int(np.searchsorted(blow_up, y, side="left")) - 1  # last grid point with B(x) < y
        return float(grid[max(j, 0)])

    return inverse


def fdp_statistic(blow_up_inverse: BlowUpInverse, m: int, k: int, v: int, significance: float) -> float:
    """The recursion of Mahloujifar, Melis, Chaudhuri 2025 (``audit_rh_with_cap``, alphabet size 2):
    positive iff k guesses ("in" or "out", see the module docstring) with v right, among m fair-coin
    canaries, reject f-DP at ``significance``."""
    r = significance * v / m
    h = significance * (k - v) / m
    for i in range(v - 1, -1, -1):
        h_new = max(h, blow_up_inverse(r))
        if h_new == h:  # neither h nor r can change any more
            break
        r = min(r + i / (k - i) * (h_new - h), 1.0)
        h = h_new
    return r + h - k / m


def _check_guesses(k: int, v: int, m: int) -> tuple[int, int, int]:
    for name, x in (("k", k), ("v", v), ("m", m)):
        if int(x) != x or x < 0:
            raise UserError(f"one-run audit: {name} must be a non-negative integer (got {x})")
    if not int(v) <= int(k) <= int(m):
        raise UserError(f"one-run audit needs 0 <= v <= k <= m (got v={v}, k={k}, m={m})")
    return int(k), int(v), int(m)


def fdp_rejects(blow_up_inverse: BlowUpInverse, m: int, k: int, v: int, confidence: float) -> bool:
    """Whether the guesses reject "the mechanism is f-DP" at ``confidence``."""
    k, v, m = _check_guesses(k, v, m)
    return k > 0 and fdp_statistic(blow_up_inverse, m, k, v, 1.0 - check_confidence(confidence)) > 0


def _largest_rejected(null: Callable[[float], BlowUpInverse], m: int, k: int, v: int, significance: float,
                      cap: float) -> float:
    """Largest parameter t (eps or mu) whose null ``null(t)`` is rejected: nulls are nested (larger t,
    less private, harder to reject), so the statistic decreases in t; Brent between 0 and a doubling
    bracket. 0 when even t = 0 is not rejected; ``cap`` when nothing below it survives."""
    def gap(t: float) -> float:
        return fdp_statistic(null(t), m, k, v, significance)

    if k == 0 or gap(0.0) <= 0:
        return 0.0
    lo, hi = 0.0, 1.0
    while gap(hi) > 0:
        lo, hi = hi, 2.0 * hi
        if hi > cap:
            return cap
    return float(optimize.brentq(gap, lo, hi, xtol=1e-7))


def fdp_epsilon_lb(k: int, v: int, m: int, delta: float, confidence: float) -> float:
    """Largest eps whose (eps, delta)-DP null is rejected: a valid (eps, delta) lower bound."""
    k, v, m = _check_guesses(k, v, m)
    delta = check_delta(delta)
    return _largest_rejected(lambda e: approx_dp_blow_up_inverse(e, delta), m, k, v,
                             1.0 - check_confidence(confidence), cap=700.0)


def fdp_mu_lb(k: int, v: int, m: int, confidence: float) -> float:
    """Largest mu whose mu-GDP null is rejected: a rigorous lower bound on mu."""
    k, v, m = _check_guesses(k, v, m)
    return _largest_rejected(gdp_blow_up_inverse, m, k, v, 1.0 - check_confidence(confidence), cap=1e3)


def fdp_one_run_bound(scores: ArrayLike, members: ArrayLike, k: int, delta: float, confidence: float,
                      claim_tradeoff: Callable[[np.ndarray], np.ndarray] | None = None,
                      role: str = "", k_neg: int = 0) -> LowerBound:
    """f-DP one-run audit of the guesses "in" for the ``k`` highest scores and "out" for the ``k_neg``
    lowest (both fixed before the labels are seen; ties broken by canary index as in
    :func:`audit.stats.one_run.steinke.one_run_bound`); two-sided guesses are valid for the symmetric nulls
    tested here (module docstring).

    ``epsilon`` is the valid (eps, delta) bound (:func:`fdp_epsilon_lb`); ``details`` hold the
    rigorous ``mu_lb``, its epsilon under a Gaussian tradeoff (``epsilon_gdp``, an estimate),
    ``claim_rejected`` when ``claim_tradeoff`` (the claim's f) is given — a valid violation at
    ``confidence`` — and the ``ceiling`` (all ``k + k_neg`` guesses right).
    """
    s, mem = as_scores_members(scores, members)
    m = s.size
    k, _, m = _check_guesses(k, 0, m)
    k_neg, _, m = _check_guesses(k_neg, 0, m)
    if k + k_neg > m:
        raise UserError(f"one-run audit: k + k_neg = {k + k_neg} exceeds the {m} canaries; guess fewer")
    delta = check_delta(delta)
    confidence = check_confidence(confidence)
    order = np.lexsort((np.arange(m), s))
    v_pos = int(np.sum(mem[order[m - k:]])) if k else 0
    v_neg = int(np.sum(~mem[order[:k_neg]]))
    guesses, v = k + k_neg, v_pos + v_neg
    mu = fdp_mu_lb(guesses, v, m, confidence)
    shape = f"'in' for the {k} highest scores" + (f", 'out' for the {k_neg} lowest" if k_neg else " (one-sided)")
    details = {"k": guesses, "v": v, "k_pos": k, "k_neg": k_neg, "v_pos": v_pos, "v_neg": v_neg, "m": m,
               "delta": delta, "guesses": shape,
               "mu_lb": mu, "epsilon_gdp": gaussian_epsilon(mu, delta) if delta > 0 else (math.inf if mu else 0.0),
               "gdp_assumption": FDP_GDP_ASSUMPTION,
               "ceiling": fdp_epsilon_lb(guesses, guesses, m, delta, confidence)}
    if claim_tradeoff is not None:
        details["claim_rejected"] = fdp_rejects(tradeoff_blow_up_inverse(claim_tradeoff), m, guesses, v, confidence)
    return LowerBound(method="one-run-fdp", epsilon=fdp_epsilon_lb(guesses, v, m, delta, confidence),
                      confidence=confidence, n=m, valid=True, details=details, role=role)
