"""f-DP tradeoff curves [Dong, Roth, Su 2019]: the (eps, delta) curve in closed form, any privacy
profile's curve by the primal-dual formula, epsilon(delta) of a profile, and the tightest mu-GDP a
claim implies. Formulas and sources: docs/references.md, "f-DP and tradeoff curves".
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize, stats

from audit.theory.checks import as_alpha


class HasTradeoff(Protocol):
    """Anything with a tradeoff curve, e.g. an :class:`audit.theory.claims.PrivacyClaim` (claims build
    on this module, so it names the one method it needs instead of importing them)."""

    def tradeoff(self, alpha: ArrayLike) -> np.ndarray: ...


__all__ = ["approx_dp_tradeoff", "default_alpha_grid", "tradeoff_from_profile", "epsilon_from_profile",
           "implied_gdp_mu"]


def approx_dp_tradeoff(alpha: ArrayLike, epsilon: float, delta: float) -> np.ndarray:
    """f_{eps,delta}(alpha) = max(0, 1 - delta - e^eps alpha, e^-eps (1 - delta - alpha)).

    Kairouz, Oh, Viswanath 2015 (Thm. 2.1); Dong, Roth, Su 2019, Prop. 2.5.

    Args:
        alpha: type-I error(s) in [0, 1].
        epsilon: the claim's epsilon.
        delta: the claim's delta.

    Returns:
        beta = f_{eps,delta}(alpha), an array of alpha's shape.
    """
    a = as_alpha(alpha)
    if math.isinf(epsilon):
        return np.zeros_like(a)
    e = math.exp(epsilon)
    return np.maximum.reduce([np.zeros_like(a), 1.0 - delta - e * a, (1.0 - delta - a) / e])


def default_alpha_grid(n: int = 401) -> np.ndarray:
    """Alpha grid for tradeoff curves: log-spaced 1e-6..1e-2 plus linear to 1; includes 0, 1e-3,
    1e-2, 0.1 and 1 exactly.

    Args:
        n: the number of points of the linear part.

    Returns:
        The sorted grid of alphas in [0, 1].
    """
    n_log = max(n // 3, 10)
    grid = np.concatenate([
        [0.0],
        np.logspace(-6, -2, n_log),
        np.linspace(0.01, 1.0, max(n - n_log - 1, 10)),
        [1e-3, 1e-2, 0.1, 0.5],
    ])
    return np.unique(grid)


def _default_eps_grid(delta_of_eps: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Grid 0..eps_max where the profile has flattened (delta(eps_max) - delta(2 eps_max) <= 1e-15)."""
    eps_max = 1.0
    while eps_max < 256.0:
        d = np.asarray(delta_of_eps(np.array([eps_max, 2.0 * eps_max])), dtype=np.float64)
        if d[0] - d[1] <= 1e-15:
            break
        eps_max *= 2.0
    eps_max = min(2.0 * eps_max, 512.0)
    dense_to = min(eps_max, 16.0)
    parts = [np.linspace(0.0, dense_to, 1601)]
    if eps_max > dense_to:
        parts.append(np.linspace(dense_to, eps_max, 400))
    return np.unique(np.concatenate(parts))


def tradeoff_from_profile(delta_of_eps: Callable[[np.ndarray], np.ndarray], alpha: ArrayLike,
                          eps_grid: ArrayLike | None = None, refine: bool = True) -> np.ndarray:
    """Tradeoff curve of a privacy profile by the primal-dual formula.

    f(alpha) = sup_{eps >= 0} max(0, 1 - delta(eps) - e^eps alpha, e^-eps (1 - delta(eps) - alpha))
    [Dong, Roth, Su 2019, Prop. 2.12; for a symmetric profile taking eps >= 0 with both terms is the
    full dual]. ``delta_of_eps`` maps an array of eps >= 0 to the profile (any order). The profile is
    used as given: a PLD whose mass exceeds 1 is NOT renormalised, since renormalising can produce
    curves above the true one (docs/references.md, "Pitfalls").

    The sup is first taken over ``eps_grid`` (default: dense grid up to where the profile is flat),
    then, if ``refine``, polished per alpha by golden-section search between the grid neighbours of
    the best grid point. This is exact for true profiles: with s = e^eps the first term
    1 - delta(ln s) - s alpha is concave in s, and with t = e^-eps the second is concave in t
    (delta(eps) = sup_S P(S) - e^eps Q(S) is convex in e^eps), so each term is unimodal in eps. For
    a mere upper bound on a profile (e.g. from RDP) every eps still gives a valid lower bound on the
    true curve; refinement can only raise it towards the sup. Each term is <= 1 - alpha for eps >= 0.

    Args:
        delta_of_eps: the privacy profile, an array of eps >= 0 to an array of deltas.
        alpha: type-I error(s) in [0, 1].
        eps_grid: the eps at which the sup is first taken (default: as above).
        refine: polish the sup per alpha by golden-section search.

    Returns:
        beta = f(alpha), an array of alpha's shape.

    Raises:
        ValueError: an empty eps_grid or one with negative or non-finite values.
    """
    a = as_alpha(alpha)
    shape = a.shape
    a = a.reshape(-1)
    if eps_grid is None:
        grid = _default_eps_grid(delta_of_eps)
    else:
        grid = np.asarray(eps_grid, dtype=np.float64).reshape(-1)
        if grid.size == 0 or np.any(grid < 0) or np.any(~np.isfinite(grid)):
            raise ValueError("eps_grid must be a non-empty array of finite eps >= 0")
        grid = np.unique(grid)
    d = np.asarray(delta_of_eps(grid), dtype=np.float64).reshape(-1)
    eg = np.exp(grid)
    out = np.zeros_like(a)
    chunk = max(1, 4_000_000 // grid.size)
    for start in range(0, a.size, chunk):
        ac = a[start:start + chunk]
        t1 = (1.0 - d)[None, :] - eg[None, :] * ac[:, None]
        t2 = ((1.0 - d)[None, :] - ac[:, None]) / eg[None, :]
        best = np.zeros_like(ac)
        for term, t in ((1, t1), (2, t2)):
            idx = np.argmax(t, axis=1)
            val = t[np.arange(ac.size), idx]
            if refine and grid.size > 1:
                lo = grid[np.maximum(idx - 1, 0)]
                hi = grid[np.minimum(idx + 1, grid.size - 1)]
                val = np.maximum(val, _golden_max(delta_of_eps, ac, lo, hi, term))
            best = np.maximum(best, val)
        out[start:start + chunk] = best
    return np.clip(out, 0.0, 1.0).reshape(shape)


_INV_PHI = (math.sqrt(5.0) - 1.0) / 2.0


def _dual_term(delta_of_eps: Callable[[np.ndarray], np.ndarray], eps: np.ndarray, a: np.ndarray,
               term: int) -> np.ndarray:
    d = np.asarray(delta_of_eps(eps), dtype=np.float64).reshape(-1)
    if term == 1:
        return 1.0 - d - np.exp(eps) * a
    return np.exp(-eps) * (1.0 - d - a)


def _golden_max(delta_of_eps: Callable[[np.ndarray], np.ndarray], a: np.ndarray, lo: np.ndarray,
                hi: np.ndarray, term: int, iters: int = 70) -> np.ndarray:
    """Vectorised golden-section maximisation of one dual term per alpha on [lo, hi]."""
    lo = lo.copy()
    hi = hi.copy()
    x1 = hi - _INV_PHI * (hi - lo)
    x2 = lo + _INV_PHI * (hi - lo)
    f1 = _dual_term(delta_of_eps, x1, a, term)
    f2 = _dual_term(delta_of_eps, x2, a, term)
    best = np.maximum(f1, f2)
    for _ in range(iters):
        left = f1 >= f2  # maximum lies in [lo, x2]
        hi = np.where(left, x2, hi)
        lo = np.where(left, lo, x1)
        new_x = np.where(left, hi - _INV_PHI * (hi - lo), lo + _INV_PHI * (hi - lo))
        f_new = _dual_term(delta_of_eps, new_x, a, term)
        x1, x2, f1, f2 = (np.where(left, new_x, x2), np.where(left, x1, new_x),
                          np.where(left, f_new, f2), np.where(left, f1, f_new))
        best = np.maximum(best, f_new)
        if np.all(hi - lo <= 1e-12 * np.maximum(1.0, hi)):
            break
    return best


def epsilon_from_profile(delta_of_eps: Callable[[np.ndarray], np.ndarray], delta: float,
                          eps_cap: float = 1e4) -> float:
    """Smallest eps >= 0 with delta(eps) <= delta, for a non-increasing profile (bisection).

    Bisection, not Brent, because pure-DP profiles are flat (zero) beyond a kink. Returns the upper
    end of the final bracket, so the returned eps satisfies delta(eps) <= delta (conservative).

    Args:
        delta_of_eps: the privacy profile, non-increasing in eps.
        delta: the target delta.
        eps_cap: the largest eps tried; inf is returned if delta(eps_cap) > delta.

    Returns:
        The smallest eps (to bisection precision, rounded up) with delta(eps) <= delta.
    """
    f = lambda e: float(np.asarray(delta_of_eps(np.array([e], dtype=np.float64)))[0])  # noqa: E731
    if f(0.0) <= delta:
        return 0.0
    hi = 1.0
    while f(hi) > delta:
        hi *= 2.0
        if hi > eps_cap:
            return math.inf
    lo = 0.0 if hi == 1.0 else hi / 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if f(mid) > delta:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-13 * max(1.0, hi):
            break
    return hi


def implied_gdp_mu(claim: HasTradeoff, tol: float = 1e-13) -> float:
    """The smallest mu such that the claim implies mu-GDP: G_mu(alpha) <= f(alpha) for all alpha.

    A mechanism that is f-DP is mu-GDP for every mu with G_mu <= f [Dong, Roth, Su 2019, Def. 2.3,
    G_mu(alpha) = Phi(Phi^-1(1 - alpha) - mu), decreasing in mu], so this is the tightest Gaussian
    summary of a claim that is not Gaussian itself (pure DP, Laplace, randomized response, zCDP).
    Solving G_mu(alpha) <= f(alpha) for mu at each alpha gives it directly:
    ``mu = sup_alpha Phi^-1(1 - alpha) - Phi^-1(f(alpha))`` (the GDP estimator of Nasr et al. 2023
    applied to the claimed curve), with f raised by 1e-12 (numerical slack of the curve; infinite
    when f(0) < 1, e.g. (eps, delta)-DP with delta > 0).

    The sup is taken on an alpha grid and then, around the (largest 20) local maxima on it, by
    bounded maximisation over the neighbouring grid cells to ``tol`` in alpha: the worst point is
    often a kink of a piecewise-linear f (e.g. alpha = 1/(1 + e^eps) for pure DP), which no fixed
    grid contains. One pass, no bisection on mu: claims whose curve is costly to evaluate (zCDP
    through its RDP profile) take about a second.

    Args:
        claim: anything with a ``tradeoff(alpha)`` method, e.g. a PrivacyClaim.
        tol: the tolerance in alpha of the local maximisation.

    Returns:
        The smallest mu (inf where f(0) < 1).
    """
    grid = np.unique(np.concatenate([np.linspace(0.0, 1.0, 2001), np.logspace(-9, 0, 181)]))

    def needed(a: np.ndarray) -> np.ndarray:
        f = np.minimum(np.asarray(claim.tradeoff(a), dtype=np.float64) + 1e-12, 1.0)
        with np.errstate(invalid="ignore"):
            mu = stats.norm.isf(a) - stats.norm.ppf(f)
        return np.where(f >= 1.0, -np.inf, mu)

    values = needed(grid)
    best = float(np.max(values))
    if not best < 1e3:
        return math.inf
    peaks = 1 + np.flatnonzero((values[1:-1] >= values[:-2]) & (values[1:-1] >= values[2:]))
    for i in peaks[np.argsort(values[peaks])[-20:]]:
        found = optimize.minimize_scalar(lambda a: -float(needed(np.array([a]))[0]), bounds=(grid[i - 1], grid[i + 1]),
                                         method="bounded", options={"xatol": tol})
        best = max(best, -float(found.fun))
    return max(0.0, best)
