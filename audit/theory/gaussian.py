"""Gaussian differential privacy (mu-GDP) and the Gaussian mechanism: the tradeoff curve G_mu, its
privacy profile delta(eps) and inverse, and noise calibration. The one implementation of these
formulas in the project (the statistics layer converts its mu bounds with them).
Formulas and sources: docs/references.md, "Gaussian DP".
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize, special

from audit.errors import UserError
from audit.theory.checks import as_alpha, check_delta, check_epsilon, scalar_or_array

__all__ = ["gaussian_tradeoff", "log_gaussian_delta", "gaussian_delta", "gaussian_epsilon", "gaussian_mu_for",
           "analytic_gaussian_sigma",
           "classic_gaussian_sigma"]


def gaussian_tradeoff(alpha: ArrayLike, mu: float) -> np.ndarray:
    """G_mu(alpha) = Phi(Phi^{-1}(1 - alpha) - mu)  [Dong, Roth, Su 2019, Eq. (2.2)].

    Written as Phi(-Phi^{-1}(alpha) - mu) for accuracy at small alpha.

    Args:
        alpha: type-I error(s) in [0, 1].
        mu: the GDP parameter, >= 0.

    Returns:
        beta = G_mu(alpha), an array of alpha's shape.
    """
    a = as_alpha(alpha)
    if math.isinf(mu):
        return np.zeros_like(a)
    with np.errstate(over="ignore", invalid="ignore"):
        return special.ndtr(-special.ndtri(a) - mu)


def log_gaussian_delta(epsilon: ArrayLike, mu: float) -> np.ndarray:
    """log of :func:`gaussian_delta` for 0 < mu < inf, computed as log(Phi(a) - e^eps Phi(b)) with
    both terms in log space (``log_ndtr``), so it stays accurate for tiny delta and large eps.

    Args:
        epsilon: eps >= 0, a scalar or an array.
        mu: the GDP parameter, 0 < mu < inf.

    Returns:
        log delta(eps), an array of epsilon's shape.
    """
    e = np.asarray(epsilon, dtype=np.float64)
    log_a = special.log_ndtr(-e / mu + mu / 2.0)
    log_b = e + special.log_ndtr(-e / mu - mu / 2.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        diff = np.minimum(log_b - log_a, 0.0)  # the true difference is negative; rounding can reach 0
        out = log_a + np.log(-np.expm1(diff))
    return np.where(np.isinf(e) | np.isneginf(log_a), -np.inf, out)


def gaussian_delta(epsilon: ArrayLike, mu: float) -> float | np.ndarray:
    """Privacy profile of mu-GDP: delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2).

    Dong, Roth, Su 2019, Cor. 2.13 (= Balle & Wang 2018, Thm. 8), evaluated by
    :func:`log_gaussian_delta`. ``mu = 0`` gives 0, ``mu = inf`` gives 1.

    Args:
        epsilon: eps >= 0, a scalar or an array.
        mu: the GDP parameter, >= 0 (inf allowed).

    Returns:
        delta(eps): a float for a scalar, an array for an array.

    Raises:
        UserError: a negative epsilon or mu.
    """
    e = np.asarray(epsilon, dtype=np.float64)
    if np.any(np.isnan(e)) or np.any(e < 0):
        raise UserError(f"epsilon must be >= 0 (got {epsilon})")
    if not mu >= 0:
        raise UserError(f"mu must be >= 0 (got {mu})")
    if mu == 0.0:
        return scalar_or_array(epsilon, np.zeros_like(e))
    if math.isinf(mu):
        return scalar_or_array(epsilon, np.ones_like(e))
    return scalar_or_array(epsilon, np.clip(np.exp(log_gaussian_delta(e, mu)), 0.0, 1.0))


def gaussian_epsilon(mu: float, delta: float) -> float:
    """Smallest eps with gaussian_delta(eps, mu) <= delta: the inverse of the mu-GDP profile.

    Brent's method on ``log gaussian_delta(eps, mu) - log delta`` (the profile is strictly
    decreasing in eps). 0 when ``delta >= gaussian_delta(0, mu) = 2 Phi(mu/2) - 1`` or mu = 0;
    ``inf`` when delta = 0 and mu > 0, or mu = inf.

    Args:
        mu: the GDP parameter, >= 0 (inf allowed).
        delta: the target delta, in [0, 1].

    Returns:
        eps(delta) of mu-GDP.

    Raises:
        UserError: a negative mu or a delta outside [0, 1].
    """
    delta = check_delta(delta)
    if not mu >= 0:
        raise UserError(f"mu must be >= 0 (got {mu})")
    if mu == 0.0 or delta >= gaussian_delta(0.0, mu):
        return 0.0
    if delta == 0.0 or math.isinf(mu):
        return math.inf
    log_delta = math.log(delta)

    def gap(e: float) -> float:
        return float(log_gaussian_delta(e, mu)) - log_delta

    hi = max(1.0, mu * mu)
    while gap(hi) > 0:
        hi *= 2.0
        if hi > 1e8:
            return math.inf
    return float(optimize.brentq(gap, 0.0, hi, xtol=1e-12, rtol=1e-12))


def gaussian_mu_for(epsilon: float, delta: float) -> float:
    """Largest mu such that mu-GDP implies (eps, delta)-DP (delta(eps; mu) is increasing in mu).

    Args:
        epsilon: the target epsilon, >= 0.
        delta: the target delta, in [0, 1].

    Returns:
        The largest such mu (0 when delta = 0).
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    if delta <= 0.0:
        return 0.0
    g = lambda m: float(gaussian_delta(epsilon, m)) - delta  # noqa: E731
    hi = 1.0
    while g(hi) < 0.0:
        hi *= 2.0
        if hi > 1e6:
            return math.inf
    return float(optimize.brentq(g, 1e-300, hi, xtol=1e-15, rtol=1e-15, maxiter=500))


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Smallest sigma making N(0, sigma^2) noise (eps, delta)-DP for L2 sensitivity ``sensitivity``.

    Analytic Gaussian mechanism, Balle & Wang 2018, Thm. 8: the condition is
    Phi(D/(2 s) - eps s/D) - e^eps Phi(-D/(2 s) - eps s/D) <= delta, i.e. the mu-GDP profile with
    mu = D/s (Dong, Roth, Su 2019, Cor. 2.13). We solve for the largest admissible mu by Brent's
    method and return sigma = D / mu (eps=1, delta=1e-5, D=1 gives 3.7306).

    Args:
        epsilon: the target epsilon, >= 0.
        delta: the target delta, in [0, 1].
        sensitivity: the L2 sensitivity D, positive.

    Returns:
        The noise standard deviation sigma.

    Raises:
        UserError: a non-positive sensitivity, epsilon = delta = 0, or delta = 0.
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    if sensitivity <= 0:
        raise UserError(f"sensitivity must be positive (got {sensitivity!r})")
    if epsilon == 0.0 and delta == 0.0:
        raise UserError("epsilon = delta = 0 needs infinite noise; pass a positive epsilon or delta")
    if delta == 0.0:
        raise UserError("the Gaussian mechanism cannot give delta = 0; pass delta > 0 or use the Laplace mechanism")
    mu = gaussian_mu_for(epsilon, delta)
    return float(sensitivity / mu)


def classic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """sigma = D sqrt(2 ln(1.25/delta)) / eps  [Dwork & Roth 2014, Thm. A.1]; valid only for eps < 1.

    Args:
        epsilon: the target epsilon, in (0, 1).
        delta: the target delta, positive.
        sensitivity: the L2 sensitivity D.

    Returns:
        The noise standard deviation sigma.

    Raises:
        UserError: epsilon >= 1 (the classic bound is not proven there) or a non-positive epsilon or delta.
    """
    epsilon = check_epsilon(epsilon, positive=True)
    delta = check_delta(delta, positive=True)
    if epsilon >= 1.0:
        raise UserError(
            f"the classic Gaussian mechanism is only proven for 0 < epsilon < 1 (got {epsilon}); "
            "use the analytic Gaussian mechanism for larger epsilon")
    return float(sensitivity * math.sqrt(2.0 * math.log(1.25 / delta)) / epsilon)
