"""The last-iterate heuristic of DP-SGD [Steinke, Nasr, Ganesh, Balle, Choquette-Choo, Jagielski, Hayes,
Thakurta, Smith, Terzis 2025, "The last iterate advantage", ICLR]: what an audit that sees only the final
model can expect to reach at all.

With linear losses, the last iterate of DP-SGD (Poisson rate q, noise multiplier sigma, T steps, clipping
norm 1, add/remove neighbours) moves along the differing example's gradient by the number of steps that
sampled it plus the summed noise, so the pair of output distributions is

    P = N(0, sigma^2 T)   (without the example),   Q = sum_k Bin(k; T, q) N(k, sigma^2 T)   (with it),

and the heuristic epsilon(delta) is the privacy profile of this pair, both directions. It is not an upper
bound (the paper builds counterexamples that exceed it), only a reference: audits of real final models
have stayed below it. Formulas and sources: docs/references.md, "Last-iterate heuristic".

Computation: the likelihood ratio Q/P(x) = sum_k w_k exp((2 k x - k^2) / (2 s^2)), s = sigma sqrt(T), is
increasing in x, so each direction's hockey-stick divergence is a difference of Gaussian tails at the one
point where the log ratio equals +epsilon (Q over P) or -epsilon (P over Q); epsilon(delta) is found by
bisection on that decreasing profile.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, special, stats

from audit.errors import UserError
from audit.theory.checks import check_delta, check_epsilon
from audit.theory.tradeoff import epsilon_from_profile

__all__ = ["last_iterate_delta", "last_iterate_epsilon", "LAST_ITERATE_MEANING"]

#: Binomial weights below the largest by more than this factor (e^-80) are dropped: they change delta by
#: less than 1e-34.
_LOG_WEIGHT_FLOOR = 80.0

#: The one sentence a report shows beside the reference.
LAST_ITERATE_MEANING = (
    "Last-iterate heuristic (Steinke et al. 2025): had the model been linear, an attacker who sees only the "
    "final model could reach about this epsilon and audits of real final models have stayed below it; a bound "
    "far below it is a weak audit more than evidence of a more private model. A reference, not a bound: it "
    "decides no verdict.")


def _check_dpsgd(noise_multiplier: float, sample_rate: float, steps: int) -> None:
    if not noise_multiplier > 0 or not 0 < sample_rate <= 1 or int(steps) != steps or steps < 1:
        raise UserError(f"the last-iterate heuristic needs sigma > 0, q in (0, 1] and T >= 1 steps; got sigma "
                        f"{noise_multiplier}, q {sample_rate}, T {steps}")


def _mixture(noise_multiplier: float, sample_rate: float, steps: int) -> tuple[np.ndarray, np.ndarray, float]:
    """(k, log Bin(k; T, q), s): the counts of Q's Gaussians that matter, their log weights and the sd s."""
    k = np.arange(int(steps) + 1, dtype=float)
    log_w = stats.binom.logpmf(k, int(steps), sample_rate)
    keep = log_w >= log_w.max() - _LOG_WEIGHT_FLOOR
    return k[keep], log_w[keep], noise_multiplier * math.sqrt(steps)


def _log_ratio(x: float, k: np.ndarray, log_w: np.ndarray, s: float) -> float:
    """log Q(x)/P(x), increasing in x."""
    return float(special.logsumexp(log_w + (2.0 * k * x - k * k) / (2.0 * s * s)))


def _crossing(level: float, k: np.ndarray, log_w: np.ndarray, s: float) -> float | None:
    """The x where the log ratio equals ``level`` (None where it never does: below its infimum)."""
    lo, hi = -s, k.max() + s
    while _log_ratio(hi, k, log_w, s) < level:
        hi += 2.0 * (hi - lo)
    step = s
    while _log_ratio(lo, k, log_w, s) > level:
        if step > 1e6 * (s + k.max()):
            return None  # the ratio's infimum (weight of k = 0) is above the level
        lo -= step
        step *= 2.0
    return optimize.brentq(lambda x: _log_ratio(x, k, log_w, s) - level, lo, hi, xtol=1e-12 * (s + k.max()))


def last_iterate_delta(epsilon: float, noise_multiplier: float, sample_rate: float, steps: int) -> float:
    """delta(epsilon) of the heuristic pair (P, Q), the larger of its two directions.

    Args:
        epsilon: epsilon >= 0.
        noise_multiplier: sigma, the noise standard deviation over the clipping norm.
        sample_rate: q, the Poisson sampling rate, in (0, 1].
        steps: T, the number of steps.

    Returns:
        max(sup_S Q(S) - e^eps P(S), sup_S P(S) - e^eps Q(S)).
    """
    epsilon = check_epsilon(epsilon)
    _check_dpsgd(noise_multiplier, sample_rate, steps)
    k, log_w, s = _mixture(noise_multiplier, sample_rate, steps)
    w = np.exp(log_w)
    deltas = [0.0]
    x = _crossing(epsilon, k, log_w, s)  # Q > e^eps P right of x
    if x is not None:
        deltas.append(float(np.sum(w * special.ndtr((k - x) / s)) - math.exp(epsilon) * special.ndtr(-x / s)))
    x = _crossing(-epsilon, k, log_w, s)  # P > e^eps Q left of x
    if x is not None:
        deltas.append(float(special.ndtr(x / s) - math.exp(epsilon) * np.sum(w * special.ndtr((x - k) / s))))
    return max(deltas)


def last_iterate_epsilon(delta: float, noise_multiplier: float, sample_rate: float, steps: int) -> float:
    """The heuristic epsilon at ``delta`` [Steinke et al. 2025]: the least epsilon with
    :func:`last_iterate_delta` at most ``delta``.

    Args:
        delta: delta in (0, 1).
        noise_multiplier: sigma.
        sample_rate: q in (0, 1].
        steps: T.

    Returns:
        The heuristic epsilon (0 when delta(0) <= delta already; bisection rounded up,
        :func:`audit.theory.tradeoff.epsilon_from_profile`).
    """
    delta = check_delta(delta, positive=True)
    _check_dpsgd(noise_multiplier, sample_rate, steps)
    return epsilon_from_profile(
        lambda e: np.array([last_iterate_delta(float(e[0]), noise_multiplier, sample_rate, steps)]), delta)
