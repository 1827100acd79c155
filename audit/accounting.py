"""Privacy accounting: the theoretical upper bounds every audit is compared against.

Every guarantee is a :class:`PrivacyClaim` with one interface:

* ``delta(epsilon)`` -- the privacy profile (hockey-stick divergence of the worst-case pair),
  vectorised: a scalar in gives a float out, an array in gives an array out;
* ``epsilon(delta)`` -- the smallest epsilon whose profile value is at most ``delta``;
* ``tradeoff(alpha)`` -- the f-DP curve ``beta = f(alpha)`` (minimum type-II error of any test at
  type-I error ``alpha``) [Dong, Roth, Su 2019, "Gaussian Differential Privacy", Def. 2.1];
* ``params()`` (JSON-serialisable), ``description`` (one line naming the accountant) and the
  attribute ``neighbouring`` ("add/remove" or "replace").

Profiles become tradeoff curves through the primal-dual formula of Dong, Roth, Su 2019, Prop. 2.12
(:func:`tradeoff_from_profile`); mechanisms whose dominating pair is known in closed form (Gaussian,
Laplace, randomized response, (eps, delta)-DP) also have a direct Neyman-Pearson tradeoff, and the
test-suite checks the two agree.

DP-SGD (Poisson-subsampled Gaussian composed ``steps`` times, add/remove neighbouring) is accounted
with Google's ``dp-accounting`` library: privacy-loss distributions (PLD, pessimistic
discretisation; Koskela et al. 2020, Doroshenko et al. 2022), Renyi DP (Mironov 2017 with the
conversion of Canonne, Kamath, Steinke 2020, Prop. 12), or the Gaussian-DP central-limit
approximation (Dong, Roth, Su 2019, Cor. 5.4).
"""

from __future__ import annotations

import abc
import functools
import logging
import math
from typing import Any, Callable, Sequence

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize, special

from audit.errors import UserError

ADD_REMOVE = "add/remove"
REPLACE = "replace"

__all__ = [
    "ADD_REMOVE",
    "REPLACE",
    "PrivacyClaim",
    "ApproxDPClaim",
    "PureDPClaim",
    "GaussianClaim",
    "LaplaceClaim",
    "RandomizedResponseClaim",
    "RDPClaim",
    "DiscretePairClaim",
    "ZCDPClaim",
    "PLDClaim",
    "DPSGDClaim",
    "tradeoff_from_profile",
    "default_alpha_grid",
    "approx_dp_tradeoff",
    "gaussian_tradeoff",
    "gaussian_delta",
    "gaussian_epsilon",
    "gaussian_mu_for",
    "analytic_gaussian_sigma",
    "classic_gaussian_sigma",
    "dpsgd_gdp_mu",
    "calibrate_noise_multiplier",
    "rdp_to_dp_epsilon",
    "rdp_to_dp_delta",
    "zcdp_to_dp_epsilon",
    "basic_composition",
    "advanced_composition",
    "compose_rdp",
    "compose_pld",
    "compose_gaussian",
    "amplify_by_subsampling",
    "implied_gdp_mu",
    "claim_from_dict",
]


# ----------------------------------------------------------------------------------------------
# small helpers


def _as_alpha(alpha: ArrayLike) -> np.ndarray:
    a = np.asarray(alpha, dtype=np.float64)
    if a.size and (np.any(~np.isfinite(a)) or np.any(a < 0.0) or np.any(a > 1.0)):
        raise UserError("tradeoff alpha (false-positive rate) must lie in [0, 1]; pass values in that range")
    return a


def _scalar_or_array(x: ArrayLike, values: np.ndarray) -> float | np.ndarray:
    """Return a float when the caller passed a scalar, else an array of the input's shape."""
    if np.ndim(x) == 0:
        return float(np.asarray(values).reshape(-1)[0])
    return np.asarray(values, dtype=np.float64).reshape(np.shape(x))


def _check_epsilon(epsilon: float, name: str = "epsilon") -> float:
    e = float(epsilon)
    if not (e >= 0.0) or math.isnan(e):
        raise UserError(f"{name} must be a non-negative number (got {epsilon!r}); pass e.g. {name}=1.0")
    return e


def _check_delta(delta: float, name: str = "delta") -> float:
    d = float(delta)
    if not (0.0 <= d <= 1.0):
        raise UserError(f"{name} must lie in [0, 1] (got {delta!r}); pass e.g. {name}=1e-5")
    return d


def _epsilon_from_profile(delta_of_eps: Callable[[np.ndarray], np.ndarray], delta: float,
                          eps_cap: float = 1e4) -> float:
    """Smallest eps >= 0 with delta(eps) <= delta, for a non-increasing profile (bisection).

    Bisection, not Brent, because pure-DP profiles are flat (zero) beyond a kink. Returns the upper
    end of the final bracket, so the returned eps satisfies delta(eps) <= delta (conservative).
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


# ----------------------------------------------------------------------------------------------
# closed-form tradeoff curves


def approx_dp_tradeoff(alpha: ArrayLike, epsilon: float, delta: float) -> np.ndarray:
    """f_{eps,delta}(alpha) = max(0, 1 - delta - e^eps alpha, e^-eps (1 - delta - alpha)).

    Kairouz, Oh, Viswanath 2015 (Thm. 2.1); Dong, Roth, Su 2019, Prop. 2.5.
    """
    a = _as_alpha(alpha)
    if math.isinf(epsilon):
        return np.zeros_like(a)
    e = math.exp(epsilon)
    return np.maximum.reduce([np.zeros_like(a), 1.0 - delta - e * a, (1.0 - delta - a) / e])


def gaussian_tradeoff(alpha: ArrayLike, mu: float) -> np.ndarray:
    """G_mu(alpha) = Phi(Phi^{-1}(1 - alpha) - mu)  [Dong, Roth, Su 2019, Eq. (2.2)].

    Written as Phi(-Phi^{-1}(alpha) - mu) for accuracy at small alpha.
    """
    a = _as_alpha(alpha)
    if math.isinf(mu):
        return np.zeros_like(a)
    with np.errstate(over="ignore", invalid="ignore"):
        return special.ndtr(-special.ndtri(a) - mu)


def gaussian_delta(epsilon: ArrayLike, mu: float) -> float | np.ndarray:
    """Privacy profile of mu-GDP: delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2).

    Dong, Roth, Su 2019, Cor. 2.13 (= Balle & Wang 2018, Thm. 8). The second term is evaluated in
    log space (log_ndtr) so large eps does not overflow.
    """
    e = np.asarray(epsilon, dtype=np.float64)
    if mu <= 0.0:
        return _scalar_or_array(epsilon, np.zeros_like(e))
    if math.isinf(mu):
        return _scalar_or_array(epsilon, np.ones_like(e))
    first = special.ndtr(-e / mu + mu / 2.0)
    second = np.exp(e + special.log_ndtr(-e / mu - mu / 2.0))
    return _scalar_or_array(epsilon, np.clip(first - second, 0.0, 1.0))


def gaussian_epsilon(mu: float, delta: float) -> float:
    """Smallest eps with gaussian_delta(eps, mu) <= delta (the profile is strictly decreasing; Brent)."""
    delta = _check_delta(delta)
    if mu <= 0.0:
        return 0.0
    if delta <= 0.0 or math.isinf(mu):
        return math.inf
    g = lambda e: float(gaussian_delta(e, mu)) - delta  # noqa: E731
    if g(0.0) <= 0.0:
        return 0.0
    hi = max(1.0, mu * mu)
    while g(hi) > 0.0:
        hi *= 2.0
        if hi > 1e6:
            return math.inf
    return float(optimize.brentq(g, 0.0, hi, xtol=1e-14, rtol=1e-15, maxiter=500))


def gaussian_mu_for(epsilon: float, delta: float) -> float:
    """Largest mu such that mu-GDP implies (eps, delta)-DP (delta(eps; mu) is increasing in mu)."""
    epsilon = _check_epsilon(epsilon)
    delta = _check_delta(delta)
    if delta <= 0.0:
        return 0.0
    if delta >= 1.0:
        return math.inf
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
    """
    epsilon = _check_epsilon(epsilon)
    delta = _check_delta(delta)
    if sensitivity <= 0:
        raise UserError(f"sensitivity must be positive (got {sensitivity!r})")
    if epsilon == 0.0 and delta == 0.0:
        raise UserError("epsilon = delta = 0 needs infinite noise; pass a positive epsilon or delta")
    if delta == 0.0:
        raise UserError("the Gaussian mechanism cannot give delta = 0; pass delta > 0 or use the Laplace mechanism")
    mu = gaussian_mu_for(epsilon, delta)
    return float(sensitivity / mu)


def classic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """sigma = D sqrt(2 ln(1.25/delta)) / eps  [Dwork & Roth 2014, Thm. A.1]; valid only for eps < 1."""
    epsilon = _check_epsilon(epsilon)
    delta = _check_delta(delta)
    if not (0.0 < epsilon < 1.0):
        raise UserError(
            f"the classic Gaussian mechanism is only proven for 0 < epsilon < 1 (got {epsilon}); "
            "use the analytic Gaussian mechanism for larger epsilon")
    if not (0.0 < delta < 1.0):
        raise UserError(f"the classic Gaussian mechanism needs 0 < delta < 1 (got {delta})")
    return float(sensitivity * math.sqrt(2.0 * math.log(1.25 / delta)) / epsilon)


# ----------------------------------------------------------------------------------------------
# privacy profile -> tradeoff curve


def default_alpha_grid(n: int = 401) -> np.ndarray:
    """Alpha grid for tradeoff curves: log-spaced 1e-6..1e-2 plus linear to 1; includes 0, 1e-3,
    1e-2, 0.1 and 1 exactly."""
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
    curves above the true one (see REFERENCES.md).

    The sup is first taken over ``eps_grid`` (default: dense grid up to where the profile is flat),
    then, if ``refine``, polished per alpha by golden-section search between the grid neighbours of
    the best grid point. This is exact for true profiles: with s = e^eps the first term
    1 - delta(ln s) - s alpha is concave in s, and with t = e^-eps the second is concave in t
    (delta(eps) = sup_S P(S) - e^eps Q(S) is convex in e^eps), so each term is unimodal in eps. For
    a mere upper bound on a profile (e.g. from RDP) every eps still gives a valid lower bound on the
    true curve; refinement can only raise it towards the sup. Each term is <= 1 - alpha for eps >= 0.
    """
    a = _as_alpha(alpha)
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


# ----------------------------------------------------------------------------------------------
# the interface


class PrivacyClaim(abc.ABC):
    """A differential-privacy guarantee: privacy profile, epsilon(delta) and f-DP tradeoff curve.

    Subclasses implement ``_delta_array`` (profile on an array of eps >= 0) and ``params``; the
    defaults for ``epsilon`` (bisection on the profile) and ``tradeoff`` (primal-dual formula) are
    overridden where a closed form or a library computation is better.
    """

    neighbouring: str = ADD_REMOVE
    accountant: str = "closed form"
    kind: str = "abstract"

    @abc.abstractmethod
    def _delta_array(self, eps: np.ndarray) -> np.ndarray:
        """Profile delta(eps) on a 1-D array of eps >= 0."""

    @abc.abstractmethod
    def params(self) -> dict[str, Any]:
        """JSON-serialisable parameters that reconstruct the claim (see claim_from_dict)."""

    @property
    @abc.abstractmethod
    def description(self) -> str:
        """One line: the guarantee and the accountant used."""

    def delta(self, epsilon: ArrayLike) -> float | np.ndarray:
        """delta(eps): float for a scalar eps, array for an array (vectorised)."""
        e = np.asarray(epsilon, dtype=np.float64)
        if np.any(np.isnan(e)) or np.any(e < 0):
            raise UserError("epsilon must be non-negative; pass eps >= 0 to delta(eps)")
        return _scalar_or_array(epsilon, self._delta_array(e.reshape(-1)))

    def epsilon(self, delta: float) -> float:
        """Smallest eps with delta(eps) <= delta."""
        delta = _check_delta(delta)
        return _epsilon_from_profile(self._delta_array, delta)

    def tradeoff(self, alpha: ArrayLike) -> np.ndarray:
        """f-DP curve beta = f(alpha) (vectorised)."""
        return tradeoff_from_profile(self._delta_array, alpha)

    def gdp_mu(self) -> float | None:
        """mu of a Gaussian-DP approximation of this claim, where one is meaningful (else None)."""
        return None

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable summary: type, params, description, neighbouring, accountant."""
        return {"type": self.kind, "params": self.params(), "description": self.description,
                "neighbouring": self.neighbouring, "accountant": self.accountant}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{type(self).__name__}({args})"


class ApproxDPClaim(PrivacyClaim):
    """(eps, delta)-DP. Tradeoff f_{eps,delta} [Kairouz et al. 2015; Dong, Roth, Su 2019 Prop. 2.5].

    The profile is the tightest one implied by the claim: that of the pair which has exactly the
    tradeoff f_{eps,delta}: delta(e') = delta + (1 - delta)(e^eps - e^e')_+ / (1 + e^eps).
    """

    kind = "approx_dp"

    def __init__(self, epsilon: float, delta: float, neighbouring: str = ADD_REMOVE,
                 accountant: str = "claimed (eps, delta)") -> None:
        self.eps0 = _check_epsilon(epsilon)
        self.delta0 = _check_delta(delta)
        self.neighbouring = neighbouring
        self.accountant = accountant

    def _delta_array(self, eps: np.ndarray) -> np.ndarray:
        if math.isinf(self.eps0):
            return np.ones_like(eps)
        # (e^eps0 - e^e)/(1 + e^eps0) computed as (1 - e^(e - eps0)) / (1 + e^-eps0): no overflow
        gap = -np.expm1(np.minimum(eps - self.eps0, 0.0)) / (1.0 + math.exp(-self.eps0))
        return self.delta0 + (1.0 - self.delta0) * gap

    def epsilon(self, delta: float) -> float:
        delta = _check_delta(delta)
        if delta < self.delta0:
            return math.inf
        if delta >= 1.0:
            return 0.0
        # solve delta0 + (1-delta0)(1 - e^(e-eps0))/(1+e^-eps0) = delta for e
        r = (delta - self.delta0) * (1.0 + math.exp(-self.eps0)) / (1.0 - self.delta0)
        if r >= 1.0:
            return 0.0
        return max(0.0, self.eps0 + math.log1p(-r))

    def tradeoff(self, alpha: ArrayLike) -> np.ndarray:
        return approx_dp_tradeoff(alpha, self.eps0, self.delta0)

    def params(self) -> dict[str, Any]:
        return {"epsilon": self.eps0, "delta": self.delta0}

    @property
    def description(self) -> str:
        return f"({self.eps0:g}, {self.delta0:g})-DP, {self.neighbouring} neighbours ({self.accountant})"


class PureDPClaim(ApproxDPClaim):
    """Pure eps-DP: (eps, 0)-DP, tradeoff f_{eps,0}."""

    kind = "pure_dp"

    def __init__(self, epsilon: float, neighbouring: str = ADD_REMOVE,
                 accountant: str = "claimed pure eps") -> None:
        super().__init__(epsilon, 0.0, neighbouring=neighbouring, accountant=accountant)

    def params(self) -> dict[str, Any]:
        return {"epsilon": self.eps0}

    @property
    def description(self) -> str:
        return f"{self.eps0:g}-DP (pure), {self.neighbouring} neighbours ({self.accountant})"


class GaussianClaim(PrivacyClaim):
    """mu-Gaussian DP: tradeoff exactly G_mu [Dong, Roth, Su 2019, Def. 2.6].

    This is the exact guarantee of the Gaussian mechanism with mu = sensitivity / sigma (ibid.
    Thm. 2.7). Profile in closed form (ibid. Cor. 2.13), epsilon by root finding.
    """

    kind = "gdp"

    def __init__(self, mu: float, neighbouring: str = ADD_REMOVE,
                 accountant: str = "exact Gaussian DP") -> None:
        mu = float(mu)
        if not (mu >= 0.0):
            raise UserError(f"GDP mu must be non-negative (got {mu!r})")
        self.mu = mu
        self.neighbouring = neighbouring
        self.accountant = accountant

    def _delta_array(self, eps: np.ndarray) -> np.ndarray:
        return np.asarray(gaussian_delta(eps, self.mu), dtype=np.float64).reshape(-1)

    def epsilon(self, delta: float) -> float:
        return gaussian_epsilon(self.mu, delta)

    def tradeoff(self, alpha: ArrayLike) -> np.ndarray:
        return gaussian_tradeoff(alpha, self.mu)

    def gdp_mu(self) -> float:
        return self.mu

    def params(self) -> dict[str, Any]:
        return {"mu": self.mu}

    @property
    def description(self) -> str:
        return f"{self.mu:.4g}-GDP, {self.neighbouring} neighbours ({self.accountant})"


class LaplaceClaim(PrivacyClaim):
    """Laplace mechanism Lap(Delta/eps) on a sensitivity-Delta query: exact profile and tradeoff.

    Dominating pair Lap(0, 1) vs Lap(eps, 1). Profile delta(e) = (1 - e^{(e - eps)/2})_+ (Balle et
    al. 2018 "Privacy amplification by subsampling"; direct integration of the privacy loss), tradeoff
    by Neyman-Pearson threshold tests on that pair (cf. the Laplace example of Dong, Roth, Su 2019):
    f(a) = 1 - e^eps a (a < e^-eps/2), e^-eps/(4a) (e^-eps/2 <= a <= 1/2), e^-eps (1 - a) (a > 1/2).
    """

    kind = "laplace"

    def __init__(self, epsilon: float, neighbouring: str = ADD_REMOVE,
                 accountant: str = "exact Laplace") -> None:
        self.eps0 = _check_epsilon(epsilon)
        self.neighbouring = neighbouring
        self.accountant = accountant

    def _delta_array(self, eps: np.ndarray) -> np.ndarray:
        return -np.expm1(np.minimum(eps - self.eps0, 0.0) / 2.0)

    def epsilon(self, delta: float) -> float:
        delta = _check_delta(delta)
        if delta >= 1.0:
            return 0.0
        # 1 - e^{(e - eps0)/2} = delta  =>  e = eps0 + 2 ln(1 - delta)
        return max(0.0, self.eps0 + 2.0 * math.log1p(-delta))

    def tradeoff(self, alpha: ArrayLike) -> np.ndarray:
        a = _as_alpha(alpha)
        e = self.eps0
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            low = 1.0 - math.exp(e) * a
            mid = math.exp(-e) / (4.0 * a)
            high = math.exp(-e) * (1.0 - a)
        out = np.where(a < 0.5 * math.exp(-e), low, np.where(a <= 0.5, mid, high))
        return np.clip(out, 0.0, 1.0)

    def params(self) -> dict[str, Any]:
        return {"epsilon": self.eps0}

    @property
    def description(self) -> str:
        return f"Laplace mechanism, {self.eps0:g}-DP, exact tradeoff, {self.neighbouring} neighbours"


class RandomizedResponseClaim(PrivacyClaim):
    """k-ary randomized response: report the true value w.p. e^eps/(e^eps + k - 1), otherwise each
    other value w.p. 1/(e^eps + k - 1) [Warner 1965; Kairouz, Oh, Viswanath 2016]. eps-DP under
    replacement of one individual's value.

    Worst pair p = (e^eps, 1, 1..)/Z, q = (1, e^eps, 1..)/Z with Z = e^eps + k - 1: profile
    delta(e) = (e^eps - e^e)_+ / Z; tradeoff (Neyman-Pearson with randomised tests) is the
    piecewise-linear max(0, 1 - e^eps a, 1 - (e^eps - 1)/Z - a, e^-eps (1 - a)); k = 2 gives f_{eps,0}.
    """

    kind = "randomized_response"

    def __init__(self, epsilon: float, k: int = 2, neighbouring: str = REPLACE,
                 accountant: str = "exact randomized response") -> None:
        self.eps0 = _check_epsilon(epsilon)
        if int(k) != k or k < 2:
            raise UserError(f"randomized response needs k >= 2 categories (got {k!r})")
        self.k = int(k)
        self.neighbouring = neighbouring
        self.accountant = accountant

    @property
    def keep_probability(self) -> float:
        return 1.0 / (1.0 + (self.k - 1) * math.exp(-self.eps0))

    def _z_scaled(self) -> float:
        """Z e^-eps = 1 + (k-1) e^-eps (avoids overflow)."""
        return 1.0 + (self.k - 1) * math.exp(-self.eps0)

    def _delta_array(self, eps: np.ndarray) -> np.ndarray:
        return -np.expm1(np.minimum(eps - self.eps0, 0.0)) / self._z_scaled()

    def epsilon(self, delta: float) -> float:
        delta = _check_delta(delta)
        r = delta * self._z_scaled()
        if r >= 1.0:
            return 0.0
        return max(0.0, self.eps0 + math.log1p(-r))

    def tradeoff(self, alpha: ArrayLike) -> np.ndarray:
        a = _as_alpha(alpha)
        e = self.eps0
        zs = self._z_scaled()
        mid = 1.0 - (1.0 - math.exp(-e)) / zs - a
        return np.maximum.reduce([np.zeros_like(a), 1.0 - math.exp(e) * a, mid, math.exp(-e) * (1.0 - a)])

    def params(self) -> dict[str, Any]:
        return {"epsilon": self.eps0, "k": self.k}

    @property
    def description(self) -> str:
        return f"{self.k}-ary randomized response, {self.eps0:g}-DP, exact tradeoff, {self.neighbouring} neighbours"


class DiscretePairClaim(PrivacyClaim):
    """The exact guarantee of one pair of output distributions on a finite set (p under D0, q under
    D1): profile delta(e) = max(H_{e^e}(p || q), H_{e^e}(q || p)) with the hockey-stick divergence
    H_g(p || q) = sum_o (p(o) - g q(o))_+ [Barthe & Olmedo 2013; Balle et al. 2018], tradeoff by the
    primal-dual formula (the symmetrised Neyman-Pearson curve of the pair).

    This is what the best possible test on that pair achieves; it is a mechanism-level guarantee
    only when the pair is a dominating (worst-case) pair.
    """

    kind = "discrete_pair"

    def __init__(self, p: ArrayLike, q: ArrayLike, neighbouring: str = ADD_REMOVE,
                 accountant: str = "exact (finite output pair)", label: str = "finite output pair") -> None:
        p = np.asarray(p, dtype=np.float64).reshape(-1)
        q = np.asarray(q, dtype=np.float64).reshape(-1)
        if p.shape != q.shape or p.size == 0 or np.any(p < 0) or np.any(q < 0):
            raise UserError("a discrete pair needs two non-negative probability vectors of equal length")
        if abs(p.sum() - 1.0) > 1e-9 or abs(q.sum() - 1.0) > 1e-9:
            raise UserError("discrete pair probabilities must each sum to 1")
        self.p = p
        self.q = q
        self.neighbouring = neighbouring
        self.accountant = accountant
        self.label = label

    def _delta_array(self, eps: np.ndarray) -> np.ndarray:
        g = np.exp(eps)[:, None]
        with np.errstate(over="ignore", invalid="ignore"):
            h_pq = np.sum(np.maximum(self.p[None, :] - g * self.q[None, :], 0.0), axis=1)
            h_qp = np.sum(np.maximum(self.q[None, :] - g * self.p[None, :], 0.0), axis=1)
        return np.nan_to_num(np.maximum(h_pq, h_qp), nan=0.0)

    def max_privacy_loss(self) -> float:
        """max_o |ln p(o)/q(o)| (inf if the supports differ): the pure-DP epsilon of this pair."""
        both = (self.p > 0) | (self.q > 0)
        if np.any((self.p[both] == 0) | (self.q[both] == 0)):
            return math.inf
        return float(np.max(np.abs(np.log(self.p[both]) - np.log(self.q[both]))))

    def params(self) -> dict[str, Any]:
        return {"p": self.p.tolist(), "q": self.q.tolist()}

    @property
    def description(self) -> str:
        return f"{self.label}: exact tradeoff of {self.p.size} outcomes, {self.neighbouring} neighbours"


# ----------------------------------------------------------------------------------------------
# Renyi DP and zCDP


def _rdp_log_delta(orders: np.ndarray, rdp: np.ndarray, eps: np.ndarray) -> np.ndarray:
    """log delta(eps) from RDP curve, vectorised over eps: min over orders of
    (a - 1)(r - eps + ln(1 - 1/a)) - ln a   [Canonne, Kamath, Steinke 2020, Prop. 12; as in
    dp_accounting.rdp.compute_delta], also min with the KL bound 0.5 ln(1 - e^-r) for every order.
    """
    orders = np.asarray(orders, dtype=np.float64)
    rdp = np.asarray(rdp, dtype=np.float64)
    finite = np.isfinite(rdp) & (rdp >= 0)
    o = orders[finite]
    r = rdp[finite]
    if o.size == 0:
        return np.zeros_like(eps)
    with np.errstate(divide="ignore"):
        kl = np.where(r > 0, 0.5 * np.log1p(-np.exp(-r)), -np.inf)
    out = np.full(eps.shape, np.min(kl))
    big = o > 1.01
    if np.any(big):
        ob, rb = o[big], r[big]
        vals = (ob[None, :] - 1.0) * (rb[None, :] - eps[:, None] + np.log1p(-1.0 / ob)[None, :]) - np.log(ob)[None, :]
        out = np.minimum(out, np.min(vals, axis=1))
    return np.minimum(out, 0.0)


def rdp_to_dp_delta(orders: Sequence[float], rdp: Sequence[float], epsilon: ArrayLike) -> float | np.ndarray:
    """RDP -> (eps, delta): delta(eps) [Canonne, Kamath, Steinke 2020, Prop. 12], vectorised."""
    e = np.asarray(epsilon, dtype=np.float64).reshape(-1)
    return _scalar_or_array(epsilon, np.exp(_rdp_log_delta(np.asarray(orders), np.asarray(rdp), e)))


def rdp_to_dp_epsilon(orders: Sequence[float], rdp: Sequence[float], delta: float,
                      conversion: str = "improved") -> float:
    """RDP -> (eps, delta): eps(delta).

    ``conversion="improved"``: min_a r_a + ln(1 - 1/a) - ln(delta a)/(a - 1) [Canonne, Kamath,
    Steinke 2020, Prop. 12; via dp_accounting.rdp.compute_epsilon] -- what current accountants report.
    ``conversion="classic"``: min_a r_a + ln(1/delta)/(a - 1) [Mironov 2017, Prop. 3] -- the older,
    looser conversion behind historical figures such as "MNIST eps = 3.01".
    """
    from dp_accounting import rdp as dp_rdp

    delta = _check_delta(delta)
    orders = np.asarray(orders, dtype=np.float64)
    rdp = np.asarray(rdp, dtype=np.float64)
    if conversion == "improved":
        return float(dp_rdp.compute_epsilon(orders, rdp, delta)[0])
    if conversion == "classic":
        if delta <= 0.0:
            return 0.0 if np.all(rdp == 0) else math.inf
        ok = orders > 1.0
        vals = rdp[ok] + math.log(1.0 / delta) / (orders[ok] - 1.0)
        return float(max(0.0, np.min(vals))) if vals.size else math.inf
    raise UserError(f"unknown RDP conversion {conversion!r}; use 'improved' or 'classic'")


class RDPClaim(PrivacyClaim):
    """A Renyi-DP curve (orders, rdp values) [Mironov 2017], converted to (eps, delta) with the
    improved conversion of Canonne, Kamath, Steinke 2020 (Prop. 12). The tradeoff is the dual of
    that profile: a valid lower bound on the true curve (conservative)."""

    kind = "rdp"

    def __init__(self, orders: Sequence[float], rdp: Sequence[float], neighbouring: str = ADD_REMOVE,
                 accountant: str = "RDP (Canonne-Kamath-Steinke conversion)",
                 label: str = "RDP curve") -> None:
        self.orders = np.asarray(orders, dtype=np.float64).reshape(-1)
        self.rdp = np.asarray(rdp, dtype=np.float64).reshape(-1)
        if self.orders.shape != self.rdp.shape or self.orders.size == 0:
            raise UserError("RDP orders and values must be non-empty arrays of the same length")
        if np.any(self.orders <= 1.0):
            raise UserError("RDP orders must be > 1")
        self.neighbouring = neighbouring
        self.accountant = accountant
        self.label = label

    def _delta_array(self, eps: np.ndarray) -> np.ndarray:
        return np.exp(_rdp_log_delta(self.orders, self.rdp, eps))

    def epsilon(self, delta: float, conversion: str = "improved") -> float:
        return rdp_to_dp_epsilon(self.orders, self.rdp, delta, conversion=conversion)

    def params(self) -> dict[str, Any]:
        return {"orders": self.orders.tolist(), "rdp": self.rdp.tolist()}

    @property
    def description(self) -> str:
        return f"{self.label}, {self.neighbouring} neighbours ({self.accountant})"


def _zcdp_orders() -> np.ndarray:
    return np.unique(np.concatenate([np.linspace(1.02, 10.0, 200), np.logspace(1.0, 5.0, 200)]))


def zcdp_to_dp_epsilon(rho: float, delta: float, conversion: str = "improved") -> float:
    """rho-zCDP -> (eps, delta).

    ``"simple"``: eps = rho + 2 sqrt(rho ln(1/delta)) [Bun & Steinke 2016, Prop. 1.3];
    ``"improved"``: inf over orders a > 1 of rho a + ln(1 - 1/a) - ln(delta a)/(a - 1)
    [Canonne, Kamath, Steinke 2020, Prop. 12 applied to D_a <= rho a], minimised over a continuum.
    """
    delta = _check_delta(delta)
    rho = float(rho)
    if rho < 0:
        raise UserError(f"zCDP rho must be non-negative (got {rho})")
    if rho == 0:
        return 0.0
    if delta <= 0:
        return math.inf
    if conversion == "simple":
        return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))
    if conversion != "improved":
        raise UserError(f"unknown zCDP conversion {conversion!r}; use 'improved' or 'simple'")
    g = lambda la: rho * (1.0 + math.exp(la)) + math.log1p(-1.0 / (1.0 + math.exp(la))) - math.log(delta * (1.0 + math.exp(la))) / math.exp(la)  # noqa: E731
    grid = np.log(np.unique(np.concatenate([np.linspace(1.02, 20.0, 900), np.logspace(np.log10(20.0), 6, 600)])) - 1.0)
    vals = np.array([g(x) for x in grid])
    i = int(np.argmin(vals))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    res = optimize.minimize_scalar(g, bounds=(lo, hi), method="bounded", options={"xatol": 1e-12})
    return float(max(0.0, min(vals[i], res.fun)))


class ZCDPClaim(RDPClaim):
    """rho-zCDP [Bun & Steinke 2016]: D_a <= rho a for every order a > 1; converted to (eps, delta)
    through RDP (Canonne, Kamath, Steinke 2020, Prop. 12) over a dense continuum of orders."""

    kind = "zcdp"

    def __init__(self, rho: float, neighbouring: str = ADD_REMOVE) -> None:
        rho = float(rho)
        if not rho >= 0:
            raise UserError(f"zCDP rho must be non-negative (got {rho!r})")
        self.rho = rho
        orders = _zcdp_orders()
        super().__init__(orders, rho * orders, neighbouring=neighbouring,
                         accountant="zCDP via RDP conversion", label=f"{rho:g}-zCDP")

    def epsilon(self, delta: float, conversion: str = "improved") -> float:
        """On the claim's order grid (consistent with its delta(eps)); zcdp_to_dp_epsilon optimises
        over a continuum of orders and is at most this value."""
        if conversion == "simple":
            return zcdp_to_dp_epsilon(self.rho, delta, conversion="simple")
        return super().epsilon(delta, conversion=conversion)

    def params(self) -> dict[str, Any]:
        return {"rho": self.rho}


# ----------------------------------------------------------------------------------------------
# privacy-loss distributions (dp-accounting)


def _pmf_arrays(pmf: Any) -> tuple[np.ndarray, np.ndarray, float]:
    """(losses, probs, infinity_mass) of a dp_accounting PLD pmf (dense representation).

    Reads the pmf's fields, which dp-accounting does not expose publicly; tests check the profile
    computed from them against the library's own get_delta_for_epsilon.
    """
    dense = pmf.to_dense_pmf()
    probs = np.asarray(dense._probs, dtype=np.float64)
    losses = (np.arange(probs.size) + dense._lower_loss) * dense._discretization
    return losses, probs, float(dense._infinity_mass)


class _HockeyStick:
    """Vectorised hockey-stick divergence of a discrete PLD: delta(eps) = inf_mass +
    sum_{l_j > eps} p_j (1 - e^{eps - l_j}) [Koskela et al. 2020; Sommer et al. 2019, Eq. (2)],
    evaluated with suffix sums so any number of eps costs one searchsorted."""

    def __init__(self, losses: np.ndarray, probs: np.ndarray, infinity_mass: float) -> None:
        self.losses = losses
        self.inf = infinity_mass
        # suffix sums S1[k] = sum_{j>=k} p_j, S2[k] = sum_{j>=k} p_j e^{-l_j}
        self.s1 = np.concatenate([np.cumsum(probs[::-1])[::-1], [0.0]])
        with np.errstate(over="ignore"):
            self.s2 = np.concatenate([np.cumsum((probs * np.exp(-losses))[::-1])[::-1], [0.0]])

    def __call__(self, eps: np.ndarray) -> np.ndarray:
        k = np.searchsorted(self.losses, eps, side="right")
        with np.errstate(over="ignore", invalid="ignore"):
            d = self.inf + self.s1[k] - np.exp(eps) * self.s2[k]
        d = np.where(k >= self.losses.size, self.inf, d)
        return np.clip(d, 0.0, None)


class PLDClaim(PrivacyClaim):
    """A guarantee given by a dp_accounting PrivacyLossDistribution (pessimistic discretisation).

    delta(eps) is the max of the remove- and add-direction hockey-stick divergences (as the library's
    own get_delta_for_epsilon); epsilon(delta) is the library's get_epsilon_for_delta. PLD mass is
    used as is (never renormalised). Compose with ``compose_pld``.
    """

    kind = "pld"

    def __init__(self, pld: Any, neighbouring: str = ADD_REMOVE,
                 accountant: str = "PLD (dp-accounting)", label: str = "PLD") -> None:
        self.pld = pld
        self.neighbouring = neighbouring
        self.accountant = accountant
        self.label = label
        self._profiles: list[_HockeyStick] | None = None

    def _hockey(self) -> list[_HockeyStick]:
        if self._profiles is None:
            pld = self.pld
            profs = [_HockeyStick(*_pmf_arrays(pld._pmf_remove))]
            if not pld._symmetric:
                profs.append(_HockeyStick(*_pmf_arrays(pld._pmf_add)))
            self._profiles = profs
        return self._profiles

    def _delta_array(self, eps: np.ndarray) -> np.ndarray:
        return np.max(np.stack([h(eps) for h in self._hockey()]), axis=0)

    def epsilon(self, delta: float) -> float:
        delta = _check_delta(delta)
        return float(self.pld.get_epsilon_for_delta(delta))

    def params(self) -> dict[str, Any]:
        return {}

    @property
    def description(self) -> str:
        return f"{self.label}, {self.neighbouring} neighbours ({self.accountant})"


@functools.lru_cache(maxsize=32)
def _dpsgd_pld(noise_multiplier: float, sample_rate: float, steps: int, discretization: float,
               neighbouring: str = ADD_REMOVE) -> Any:
    import dp_accounting
    from dp_accounting import pld as dp_pld

    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(sample_rate, dp_accounting.GaussianDpEvent(noise_multiplier)), steps)
    relation = (dp_accounting.NeighboringRelation.REPLACE_ONE if neighbouring == REPLACE
                else dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE)
    acc = dp_pld.PLDAccountant(relation, value_discretization_interval=discretization)
    acc.compose(event)
    return acc._pld


@functools.lru_cache(maxsize=64)
def _dpsgd_rdp(noise_multiplier: float, sample_rate: float, steps: int) -> tuple[np.ndarray, np.ndarray]:
    import dp_accounting
    from dp_accounting import rdp as dp_rdp

    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(sample_rate, dp_accounting.GaussianDpEvent(noise_multiplier)), steps)
    acc = dp_rdp.RdpAccountant()
    logger = logging.getLogger("absl")
    level = logger.level
    logger.setLevel(logging.ERROR)  # dp-accounting warns when it drops an order it cannot compute
    try:
        acc.compose(event)
    finally:
        logger.setLevel(level)
    return acc.orders, acc.rdp


def dpsgd_gdp_mu(noise_multiplier: float, sample_rate: float, steps: int) -> float:
    """CLT approximation of DP-SGD: mu = q sqrt(T (e^{1/sigma^2} - 1)) [Dong, Roth, Su 2019,
    Cor. 5.4 / Bu et al. 2020]; full batch (q = 1) is exactly T-fold composition of G_{1/sigma}:
    mu = sqrt(T)/sigma (ibid. Cor. 3.3)."""
    if sample_rate >= 1.0:
        return math.sqrt(steps) / noise_multiplier
    x = 1.0 / noise_multiplier ** 2
    if x > 700:
        return math.inf
    return sample_rate * math.sqrt(steps * math.expm1(x))


DPSGD_ACCOUNTANTS = ("pld", "rdp", "gdp")


class DPSGDClaim(PrivacyClaim):
    """DP-SGD [Abadi et al. 2016]: Poisson subsampling with rate q, Gaussian noise with multiplier
    sigma, composed over T steps; add/remove neighbours, or with ``neighbouring=REPLACE`` the same
    mechanism's guarantee for replace-one pairs (PLD accountant only: dp-accounting's
    ``REPLACE_ONE`` dominating pair of the subsampled Gaussian, Zhu, Dong, Wang 2022) — what a
    correct implementation promises a replace-one canary pair.

    accountant ``"pld"`` (default; tightest; dp-accounting PLDAccountant with pessimistic
    discretisation ``value_discretization_interval``), ``"rdp"`` (dp-accounting RdpAccountant, default
    orders, Canonne-Kamath-Steinke conversion), or ``"gdp"`` (CLT mu-GDP approximation: not a
    rigorous bound). The PLD / RDP computation is cached per parameter set.
    """

    kind = "dpsgd"

    def __init__(self, noise_multiplier: float, sample_rate: float, steps: int, accountant: str = "pld",
                 value_discretization_interval: float = 1e-4, neighbouring: str = ADD_REMOVE) -> None:
        sigma = float(noise_multiplier)
        q = float(sample_rate)
        if not (sigma > 0) or math.isinf(sigma):
            raise UserError(f"DP-SGD noise_multiplier must be positive and finite (got {noise_multiplier!r})")
        if not (0.0 < q <= 1.0):
            raise UserError(f"DP-SGD sample_rate must lie in (0, 1] (got {sample_rate!r})")
        if int(steps) != steps or steps < 1:
            raise UserError(f"DP-SGD steps must be a positive integer (got {steps!r})")
        if accountant not in DPSGD_ACCOUNTANTS:
            raise UserError(f"unknown accountant {accountant!r}; use one of {', '.join(DPSGD_ACCOUNTANTS)}")
        if not (0 < value_discretization_interval <= 0.1):
            raise UserError("value_discretization_interval must lie in (0, 0.1]; e.g. 1e-4")
        if neighbouring not in (ADD_REMOVE, REPLACE):
            raise UserError(f"unknown neighbouring relation {neighbouring!r}; use {ADD_REMOVE!r} or {REPLACE!r}")
        if neighbouring == REPLACE and accountant != "pld":
            raise UserError("replace-one DP-SGD accounting needs the PLD accountant")
        self.neighbouring = neighbouring
        self.noise_multiplier = sigma
        self.sample_rate = q
        self.steps = int(steps)
        self.accountant = accountant
        self.value_discretization_interval = float(value_discretization_interval)
        self._inner: PrivacyClaim | None = None

    def _impl(self) -> PrivacyClaim:
        if self._inner is None:
            if self.accountant == "pld":
                pld = _dpsgd_pld(self.noise_multiplier, self.sample_rate, self.steps,
                                 self.value_discretization_interval, self.neighbouring)
                self._inner = PLDClaim(pld)
            elif self.accountant == "rdp":
                orders, rdp = _dpsgd_rdp(self.noise_multiplier, self.sample_rate, self.steps)
                self._inner = RDPClaim(orders, rdp)
            else:
                self._inner = GaussianClaim(self.gdp_mu(), accountant="GDP CLT approximation")
        return self._inner

    @property
    def pld(self) -> Any:
        """The composed dp_accounting PrivacyLossDistribution (PLD accountant only)."""
        if self.accountant != "pld":
            raise UserError("this DP-SGD claim does not use the PLD accountant; construct it with accountant='pld'")
        return self._impl().pld  # type: ignore[attr-defined]

    def _delta_array(self, eps: np.ndarray) -> np.ndarray:
        return self._impl()._delta_array(eps)

    def epsilon(self, delta: float) -> float:
        return self._impl().epsilon(delta)

    def tradeoff(self, alpha: ArrayLike) -> np.ndarray:
        return self._impl().tradeoff(alpha)

    def gdp_mu(self) -> float:
        return dpsgd_gdp_mu(self.noise_multiplier, self.sample_rate, self.steps)

    def params(self) -> dict[str, Any]:
        return {"noise_multiplier": self.noise_multiplier, "sample_rate": self.sample_rate, "steps": self.steps}

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        d["accountant_options"] = {"value_discretization_interval": self.value_discretization_interval}
        return d

    @property
    def description(self) -> str:
        names = {"pld": f"PLD accountant (dp-accounting, discretisation {self.value_discretization_interval:g})",
                 "rdp": "RDP accountant (dp-accounting, Canonne-Kamath-Steinke conversion)",
                 "gdp": "GDP central-limit approximation (not a rigorous bound)"}
        return (f"DP-SGD, Poisson rate q={self.sample_rate:.6g}, noise multiplier {self.noise_multiplier:.6g}, "
                f"{self.steps} steps, {self.neighbouring} neighbours; {names[self.accountant]}")


@functools.lru_cache(maxsize=64)
def calibrate_noise_multiplier(epsilon: float, delta: float, sample_rate: float, steps: int,
                               value_discretization_interval: float = 1e-4, tol: float = 1e-4) -> float:
    """Smallest noise multiplier (to within ``tol``) for which DP-SGD is (eps, delta)-DP by PLD.

    1. Upper bracket from the RDP accountant (cheap): RDP epsilons upper-bound the true ones, so the
       RDP-calibrated sigma is private enough. 2. Lower bracket by shrinking it until a coarse PLD
       (discretisation 1e-3) exceeds the target (very small sigma is never tried: its PLD is huge).
    3. Brent search on the coarse PLD (dp_accounting.calibrate_dp_mechanism). 4. The result is checked
       with the PLD at ``value_discretization_interval`` (what DPSGDClaim uses), nudged up until that
       claim meets the target, and tightened by bisection on the fine PLD to ``tol``.
    The returned sigma always satisfies DPSGDClaim(sigma, q, T).epsilon(delta) <= epsilon.
    """
    import dp_accounting
    from dp_accounting import pld as dp_pld

    epsilon = _check_epsilon(epsilon)
    delta = _check_delta(delta)
    if epsilon <= 0 or math.isinf(epsilon) or not (0.0 < delta < 1.0):
        raise UserError("calibration needs a finite epsilon > 0 and 0 < delta < 1; e.g. --epsilon 2 --delta 1e-5")
    if not (0.0 < sample_rate <= 1.0) or int(steps) != steps or steps < 1:
        raise UserError("calibration needs 0 < sample_rate <= 1 and a positive integer number of steps")
    q = float(sample_rate)
    steps = int(steps)

    def make_event(s: float) -> Any:
        return dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(s)), steps)

    def rdp_gap(log_s: float) -> float:
        orders, rdp = _dpsgd_rdp(float(math.exp(log_s)), q, steps)
        return rdp_to_dp_epsilon(orders, rdp, delta) - epsilon

    lo_log, hi_log = math.log(0.05), math.log(1.0)
    while rdp_gap(hi_log) > 0:
        hi_log += math.log(2.0)
        if hi_log > math.log(1e6):
            raise UserError(f"no noise multiplier below 1e6 reaches epsilon={epsilon} at delta={delta}")
    if rdp_gap(lo_log) <= 0:
        s_hi = math.exp(lo_log)
    else:
        s_hi = math.exp(optimize.brentq(rdp_gap, lo_log, hi_log, xtol=1e-6))
        s_hi *= 1.0 + 1e-5  # brentq may land just on the wrong side of the root

    coarse = max(1e-3, value_discretization_interval)

    def coarse_eps(s: float) -> float:
        return DPSGDClaim(s, q, steps, value_discretization_interval=coarse).epsilon(delta)

    s_lo = 0.8 * s_hi
    while coarse_eps(s_lo) <= epsilon and s_lo > 0.3:
        s_lo *= 0.8
    if coarse_eps(s_lo) <= epsilon:
        sigma = s_lo
    else:
        sigma = float(dp_accounting.calibrate_dp_mechanism(
            lambda: dp_pld.PLDAccountant(value_discretization_interval=coarse), make_event, epsilon, delta,
            bracket_interval=dp_accounting.ExplicitBracketInterval(s_lo, s_hi), tol=tol / 4))

    def fine_eps(s: float) -> float:
        return DPSGDClaim(s, q, steps, value_discretization_interval=value_discretization_interval).epsilon(delta)

    hi = sigma
    e_hi = fine_eps(hi)
    while e_hi > epsilon:
        hi *= 1.002
        e_hi = fine_eps(hi)
    # bracket the fine-PLD root from below, then regula falsi (epsilon is smooth and decreasing in
    # sigma); hi always verifiably meets the target
    lo = hi * 0.995
    e_lo = fine_eps(lo)
    while e_lo <= epsilon:
        hi, e_hi = lo, e_lo
        lo = hi * 0.99
        e_lo = fine_eps(lo)
    for _ in range(6):
        if hi - lo <= tol or e_hi >= epsilon * (1.0 - 1e-5):
            break
        guess = lo + (e_lo - epsilon) / (e_lo - e_hi) * (hi - lo)
        guess = min(max(guess + tol / 4, lo + tol / 4), hi - tol / 4)
        e_g = fine_eps(guess)
        if e_g <= epsilon:
            hi, e_hi = guess, e_g
        else:
            lo, e_lo = guess, e_g
    return float(hi)


# ----------------------------------------------------------------------------------------------
# composition and amplification


def basic_composition(epsilons: Sequence[float], deltas: Sequence[float]) -> tuple[float, float]:
    """Basic composition: (sum eps_i, sum delta_i) [Dwork & Roth 2014, Thm. 3.16]."""
    e = [_check_epsilon(x) for x in epsilons]
    d = [_check_delta(x) for x in deltas]
    if len(e) != len(d):
        raise UserError("basic composition needs one delta per epsilon")
    return float(sum(e)), float(min(1.0, sum(d)))


def advanced_composition(epsilon: float, delta: float, k: int, delta_prime: float) -> tuple[float, float]:
    """k-fold adaptive composition of (eps, delta)-DP is (eps', k delta + delta')-DP with
    eps' = eps sqrt(2 k ln(1/delta')) + k eps (e^eps - 1)  [Dwork, Rothblum, Vadhan 2010;
    Dwork & Roth 2014, Thm. 3.20]."""
    epsilon = _check_epsilon(epsilon)
    delta = _check_delta(delta)
    delta_prime = _check_delta(delta_prime, "delta_prime")
    if int(k) != k or k < 1:
        raise UserError(f"composition count k must be a positive integer (got {k!r})")
    if delta_prime <= 0:
        raise UserError("advanced composition needs delta_prime > 0")
    eps_p = epsilon * math.sqrt(2.0 * k * math.log(1.0 / delta_prime)) + k * epsilon * math.expm1(epsilon)
    return float(eps_p), float(min(1.0, k * delta + delta_prime))


def compose_rdp(claims: Sequence[RDPClaim]) -> RDPClaim:
    """RDP composition: RDP values add order by order [Mironov 2017, Prop. 1]. All claims must share
    the orders."""
    if not claims:
        raise UserError("compose_rdp needs at least one claim")
    orders = claims[0].orders
    for c in claims[1:]:
        if c.orders.shape != orders.shape or not np.allclose(c.orders, orders):
            raise UserError("RDP claims must use the same orders to be composed")
    total = np.sum([c.rdp for c in claims], axis=0)
    return RDPClaim(orders, total, neighbouring=claims[0].neighbouring, label=f"composition of {len(claims)} RDP curves")


def compose_pld(claims: Sequence[PLDClaim]) -> PLDClaim:
    """PLD composition: privacy-loss distributions convolve [Koskela et al. 2020; Meiser & Mohammadi
    2018]; via dp_accounting's PrivacyLossDistribution.compose."""
    if not claims:
        raise UserError("compose_pld needs at least one claim")
    pld = claims[0].pld
    for c in claims[1:]:
        pld = pld.compose(c.pld)
    return PLDClaim(pld, neighbouring=claims[0].neighbouring, label=f"composition of {len(claims)} PLDs")


def compose_gaussian(mus: Sequence[float]) -> GaussianClaim:
    """GDP composition: G_mu1 x ... x G_muk = G_sqrt(sum mu_i^2) [Dong, Roth, Su 2019, Cor. 3.3]."""
    return GaussianClaim(math.sqrt(sum(float(m) ** 2 for m in mus)))


def amplify_by_subsampling(epsilon: float, delta: float, sample_rate: float) -> tuple[float, float]:
    """Poisson subsampling with rate q of an (eps, delta)-DP mechanism is
    (ln(1 + q (e^eps - 1)), q delta)-DP under add/remove [Balle, Barthe, Gaboardi 2018, Thm. 8;
    Li, Qardaji, Su 2012]."""
    epsilon = _check_epsilon(epsilon)
    delta = _check_delta(delta)
    q = float(sample_rate)
    if not (0.0 <= q <= 1.0):
        raise UserError(f"sample_rate must lie in [0, 1] (got {sample_rate!r})")
    return float(math.log1p(q * math.expm1(epsilon))), float(q * delta)


def implied_gdp_mu(claim: PrivacyClaim, tol: float = 1e-9) -> float:
    """The smallest mu such that the claim implies mu-GDP: G_mu(alpha) <= f(alpha) for all alpha.

    A mechanism that is f-DP is mu-GDP for every mu with G_mu <= f [Dong, Roth, Su 2019, Def. 2.3,
    G_mu(alpha) = Phi(Phi^-1(1 - alpha) - mu), decreasing in mu], so this is the tightest Gaussian
    summary of a claim that is not Gaussian itself (pure DP, Laplace, randomized response). It is
    finite for every claim with finite epsilon(delta) for some delta < 1, since the Gaussian
    tradeoff has slope -inf at alpha = 0 and touches 0 only at alpha = 1.

    Bisection on mu to ``tol``. Domination is checked on a dense alpha grid and then, around the
    (largest 20) local maxima of G_mu - f on it, by bounded maximisation over the neighbouring grid cells:
    the worst point is often a kink of a piecewise-linear f (e.g. alpha = 1/(1 + e^eps) for pure
    DP), where G_mu - f, convex on each linear piece, peaks, and which no fixed grid contains.
    """
    grid = np.unique(np.concatenate([np.linspace(0.0, 1.0, 20001), np.logspace(-9, 0, 901)]))
    f_grid = np.asarray(claim.tradeoff(grid), dtype=np.float64)

    def excess(a: float, mu: float) -> float:
        return float(gaussian_tradeoff(np.array([a]), mu)[0] - np.asarray(claim.tradeoff(np.array([a])))[0])

    def dominated(mu: float) -> bool:
        gap = gaussian_tradeoff(grid, mu) - f_grid
        if np.any(gap > 1e-12):
            return False
        peaks = 1 + np.flatnonzero((gap[1:-1] >= gap[:-2]) & (gap[1:-1] >= gap[2:]))
        for i in peaks[np.argsort(gap[peaks])[-20:]]:
            lo, hi = grid[i - 1], grid[i + 1]
            found = optimize.minimize_scalar(lambda a: -excess(a, mu), bounds=(lo, hi), method="bounded",
                                             options={"xatol": 1e-13})
            if -found.fun > 1e-12:
                return False
        return True

    lo, hi = 0.0, 1.0
    while not dominated(hi):
        lo, hi = hi, hi * 2.0
        if hi > 1e3:
            return math.inf
    while hi - lo > tol * max(1.0, hi):
        mid = 0.5 * (lo + hi)
        if dominated(mid):
            hi = mid
        else:
            lo = mid
    return hi


# ----------------------------------------------------------------------------------------------
# reconstruction from JSON


def claim_from_dict(d: dict[str, Any]) -> PrivacyClaim:
    """Rebuild a claim from ``PrivacyClaim.to_dict()`` output (PLD claims other than DP-SGD cannot be
    rebuilt from parameters and raise UserError)."""
    kind = d.get("type")
    p = dict(d.get("params", {}))
    nb = d.get("neighbouring", ADD_REMOVE)
    if kind == "approx_dp":
        return ApproxDPClaim(p["epsilon"], p["delta"], neighbouring=nb)
    if kind == "pure_dp":
        return PureDPClaim(p["epsilon"], neighbouring=nb)
    if kind == "gdp":
        return GaussianClaim(p["mu"], neighbouring=nb)
    if kind == "laplace":
        return LaplaceClaim(p["epsilon"], neighbouring=nb)
    if kind == "randomized_response":
        return RandomizedResponseClaim(p["epsilon"], p.get("k", 2), neighbouring=nb)
    if kind == "rdp":
        return RDPClaim(p["orders"], p["rdp"], neighbouring=nb)
    if kind == "discrete_pair":
        return DiscretePairClaim(p["p"], p["q"], neighbouring=nb)
    if kind == "zcdp":
        return ZCDPClaim(p["rho"], neighbouring=nb)
    if kind == "dpsgd":
        opts = d.get("accountant_options", {})
        return DPSGDClaim(p["noise_multiplier"], p["sample_rate"], p["steps"], accountant=d.get("accountant", "pld"),
                          value_discretization_interval=opts.get("value_discretization_interval", 1e-4),
                          neighbouring=d.get("neighbouring", ADD_REMOVE))
    raise UserError(f"cannot rebuild a privacy claim of type {kind!r} from JSON")
