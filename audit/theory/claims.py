"""Privacy claims: the theoretical upper bound every audit is compared against.

Every guarantee is a :class:`PrivacyClaim` with one interface:

* ``delta(epsilon)`` -- the privacy profile (hockey-stick divergence of the worst-case pair),
  vectorised: a scalar in gives a float out, an array in gives an array out;
* ``epsilon(delta)`` -- the smallest epsilon whose profile value is at most ``delta``;
* ``tradeoff(alpha)`` -- the f-DP curve ``beta = f(alpha)`` (minimum type-II error of any test at
  type-I error ``alpha``) [Dong, Roth, Su 2019, Def. 2.1];
* ``params()`` (JSON-serialisable), ``description`` (one line naming the accountant) and the
  attribute ``neighbouring`` (a :class:`Neighbouring`: "add/remove" or "replace").

Profiles become tradeoff curves through the primal-dual formula (:mod:`audit.theory.tradeoff`);
mechanisms whose dominating pair is known in closed form (Gaussian, Laplace, randomized response,
(eps, delta)-DP) also have a direct Neyman-Pearson tradeoff, and the test-suite checks the two
agree. Claims defined through an accountant live in :mod:`audit.theory.rdp`,
:mod:`audit.theory.pld` and :mod:`audit.theory.dpsgd`. Sources: docs/references.md.
"""

from __future__ import annotations

import abc
import math
from enum import StrEnum
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from audit.errors import UserError
from audit.theory.checks import as_alpha, check_delta, check_epsilon, scalar_or_array
from audit.theory.gaussian import gaussian_delta, gaussian_epsilon, gaussian_tradeoff
from audit.theory.tradeoff import approx_dp_tradeoff, epsilon_from_profile, tradeoff_from_profile


class Neighbouring(StrEnum):
    """Which datasets are neighbours: one record added or removed, or one record replaced. A
    :class:`enum.StrEnum` (so a ``str``): its values are the strings results.json records, and it
    formats as them."""

    ADD_REMOVE = "add/remove"
    REPLACE = "replace"

    @classmethod
    def of(cls, value: str) -> Neighbouring:
        """``value`` as a relation; a one-line UserError for any other string.

        Args:
            value: ``"add/remove"`` or ``"replace"``.

        Returns:
            The relation.

        Raises:
            UserError: any other string.
        """
        try:
            return cls(value)
        except ValueError:
            raise UserError(f"unknown neighbouring relation {value!r}; use {cls.ADD_REMOVE.value!r} or "
                            f"{cls.REPLACE.value!r}") from None

#: Delta at which pure-DP claims are reported and audited unless told otherwise: small enough that
#: epsilon(delta) of the exact profile is within 1e-4 of the nominal epsilon, and positive so the
#: Gaussian-DP estimator gives a finite epsilon.
PURE_DP_DELTA = 1e-5

__all__ = ["Neighbouring", "PURE_DP_DELTA", "PrivacyClaim", "ApproxDPClaim", "PureDPClaim",
           "GaussianClaim", "LaplaceClaim", "RandomizedResponseClaim", "DiscretePairClaim"]


class PrivacyClaim(abc.ABC):
    """A differential-privacy guarantee: privacy profile, epsilon(delta) and f-DP tradeoff curve.

    Subclasses implement ``delta_array`` (profile on an array of eps >= 0) and ``params``; the
    defaults for ``epsilon`` (bisection on the profile) and ``tradeoff`` (primal-dual formula) are
    overridden where a closed form or a library computation is better.
    """

    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE
    accountant: str = "closed form"
    kind: str = "abstract"

    @abc.abstractmethod
    def delta_array(self, eps: np.ndarray) -> np.ndarray:
        """Profile delta(eps) on a 1-D array of eps >= 0.

        Args:
            eps: a 1-D array of epsilons, each >= 0.

        Returns:
            delta(eps) for each, an array of the same shape.
        """

    @abc.abstractmethod
    def params(self) -> dict[str, Any]:
        """JSON-serialisable parameters that reconstruct the claim (see claim_from_dict).

        Returns:
            The constructor's parameters by name.
        """

    @property
    @abc.abstractmethod
    def description(self) -> str:
        """One line: the guarantee and the accountant used.

        Returns:
            The description, for reports and console lines.
        """

    def delta(self, epsilon: ArrayLike) -> float | np.ndarray:
        """delta(eps): float for a scalar eps, array for an array (vectorised).

        Args:
            epsilon: a scalar or an array of epsilons, each >= 0.

        Returns:
            The profile delta(epsilon): a float for a scalar, an array for an array.

        Raises:
            UserError: a negative or NaN epsilon.
        """
        e = np.asarray(epsilon, dtype=np.float64)
        if np.any(np.isnan(e)) or np.any(e < 0):
            raise UserError("epsilon must be non-negative; pass eps >= 0 to delta(eps)")
        return scalar_or_array(epsilon, self.delta_array(e.reshape(-1)))

    def epsilon(self, delta: float) -> float:
        """Smallest eps with delta(eps) <= delta.

        Args:
            delta: the target delta, in [0, 1].

        Returns:
            epsilon(delta), by bisection on the profile unless a subclass has a closed form.
        """
        delta = check_delta(delta)
        return epsilon_from_profile(self.delta_array, delta)

    def tradeoff(self, alpha: ArrayLike) -> np.ndarray:
        """f-DP curve beta = f(alpha) (vectorised).

        Args:
            alpha: type-I error(s) in [0, 1], a scalar or an array.

        Returns:
            beta = f(alpha), the least type-II error of any test, an array of alpha's shape.
        """
        return tradeoff_from_profile(self.delta_array, alpha)

    def gdp_mu(self) -> float | None:
        """mu of a Gaussian-DP approximation of this claim, where one is meaningful (else None).

        Returns:
            mu, or None where no Gaussian-DP approximation is meaningful.
        """
        return None

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable summary: type, params, description, neighbouring, accountant.

        Returns:
            A dict with the keys ``type``, ``params``, ``description``, ``neighbouring`` and ``accountant``.
        """
        return {"type": self.kind, "params": self.params(), "description": self.description,
                "neighbouring": self.neighbouring.value, "accountant": self.accountant}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{type(self).__name__}({args})"


class ApproxDPClaim(PrivacyClaim):
    """(eps, delta)-DP. Tradeoff f_{eps,delta} [Kairouz et al. 2015; Dong, Roth, Su 2019 Prop. 2.5].

    The profile is the tightest one implied by the claim: that of the pair which has exactly the
    tradeoff f_{eps,delta}: delta(e') = delta + (1 - delta)(e^eps - e^e')_+ / (1 + e^eps).

    Args:
        epsilon: the claimed epsilon, >= 0.
        delta: the claimed delta, in [0, 1].
        neighbouring: the neighbouring relation, a :class:`Neighbouring` or its string.
        accountant: the name of the accountant the description states.
    """

    kind = "approx_dp"

    def __init__(self, epsilon: float, delta: float, neighbouring: Neighbouring | str = Neighbouring.ADD_REMOVE,
                 accountant: str = "claimed (eps, delta)") -> None:
        self.eps0 = check_epsilon(epsilon)
        self.delta0 = check_delta(delta)
        self.neighbouring = Neighbouring.of(neighbouring)
        self.accountant = accountant

    def delta_array(self, eps: np.ndarray) -> np.ndarray:
        if math.isinf(self.eps0):
            return np.ones_like(eps)
        # (e^eps0 - e^e)/(1 + e^eps0) computed as (1 - e^(e - eps0)) / (1 + e^-eps0): no overflow
        gap = -np.expm1(np.minimum(eps - self.eps0, 0.0)) / (1.0 + math.exp(-self.eps0))
        return self.delta0 + (1.0 - self.delta0) * gap

    def epsilon(self, delta: float) -> float:
        delta = check_delta(delta)
        if delta < self.delta0:
            return math.inf
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
    """Pure eps-DP: (eps, 0)-DP, tradeoff f_{eps,0}.

    Args:
        epsilon: the claimed epsilon, >= 0.
        neighbouring: the neighbouring relation, a :class:`Neighbouring` or its string.
        accountant: the name of the accountant the description states.
    """

    kind = "pure_dp"

    def __init__(self, epsilon: float, neighbouring: Neighbouring | str = Neighbouring.ADD_REMOVE,
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

    Args:
        mu: the GDP parameter, >= 0 (sensitivity / sigma for the Gaussian mechanism).
        neighbouring: the neighbouring relation, a :class:`Neighbouring` or its string.
        accountant: the name of the accountant the description states.

    Raises:
        UserError: a negative or NaN mu.
    """

    kind = "gdp"

    def __init__(self, mu: float, neighbouring: Neighbouring | str = Neighbouring.ADD_REMOVE,
                 accountant: str = "exact Gaussian DP") -> None:
        mu = float(mu)
        if not (mu >= 0.0):
            raise UserError(f"GDP mu must be non-negative (got {mu!r})")
        self.mu = mu
        self.neighbouring = Neighbouring.of(neighbouring)
        self.accountant = accountant

    def delta_array(self, eps: np.ndarray) -> np.ndarray:
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

    Args:
        epsilon: the mechanism's epsilon (sensitivity / scale), >= 0.
        neighbouring: the neighbouring relation, a :class:`Neighbouring` or its string.
        accountant: the name of the accountant the description states.
    """

    kind = "laplace"

    def __init__(self, epsilon: float, neighbouring: Neighbouring | str = Neighbouring.ADD_REMOVE,
                 accountant: str = "exact Laplace") -> None:
        self.eps0 = check_epsilon(epsilon)
        self.neighbouring = Neighbouring.of(neighbouring)
        self.accountant = accountant

    def delta_array(self, eps: np.ndarray) -> np.ndarray:
        return -np.expm1(np.minimum(eps - self.eps0, 0.0) / 2.0)

    def epsilon(self, delta: float) -> float:
        delta = check_delta(delta)
        # 1 - e^{(e - eps0)/2} = delta  =>  e = eps0 + 2 ln(1 - delta)
        return max(0.0, self.eps0 + 2.0 * math.log1p(-delta))

    def tradeoff(self, alpha: ArrayLike) -> np.ndarray:
        a = as_alpha(alpha)
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

    Args:
        epsilon: the mechanism's epsilon, >= 0.
        k: the number of categories, >= 2.
        neighbouring: the neighbouring relation (replacement by default: one individual's value changes).
        accountant: the name of the accountant the description states.

    Raises:
        UserError: k not an integer >= 2.
    """

    kind = "randomized_response"

    def __init__(self, epsilon: float, k: int = 2, neighbouring: Neighbouring | str = Neighbouring.REPLACE,
                 accountant: str = "exact randomized response") -> None:
        self.eps0 = check_epsilon(epsilon)
        if int(k) != k or k < 2:
            raise UserError(f"randomized response needs k >= 2 categories (got {k!r})")
        self.k = int(k)
        self.neighbouring = Neighbouring.of(neighbouring)
        self.accountant = accountant

    @property
    def keep_probability(self) -> float:
        return 1.0 / (1.0 + (self.k - 1) * math.exp(-self.eps0))

    def _z_scaled(self) -> float:
        """Z e^-eps = 1 + (k-1) e^-eps (avoids overflow)."""
        return 1.0 + (self.k - 1) * math.exp(-self.eps0)

    def delta_array(self, eps: np.ndarray) -> np.ndarray:
        return -np.expm1(np.minimum(eps - self.eps0, 0.0)) / self._z_scaled()

    def epsilon(self, delta: float) -> float:
        delta = check_delta(delta)
        r = delta * self._z_scaled()
        if r >= 1.0:
            return 0.0
        return max(0.0, self.eps0 + math.log1p(-r))

    def tradeoff(self, alpha: ArrayLike) -> np.ndarray:
        a = as_alpha(alpha)
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

    Args:
        p: the output distribution under D0, non-negative, summing to 1.
        q: the output distribution under D1, of p's length, non-negative, summing to 1.
        neighbouring: the neighbouring relation, a :class:`Neighbouring` or its string.
        accountant: the name of the accountant the description states.
        label: how the description names the pair.

    Raises:
        UserError: vectors of different lengths, empty, negative or not summing to 1.
    """

    kind = "discrete_pair"

    def __init__(self, p: ArrayLike, q: ArrayLike, neighbouring: Neighbouring | str = Neighbouring.ADD_REMOVE,
                 accountant: str = "exact (finite output pair)", label: str = "finite output pair") -> None:
        p = np.asarray(p, dtype=np.float64).reshape(-1)
        q = np.asarray(q, dtype=np.float64).reshape(-1)
        if p.shape != q.shape or p.size == 0 or np.any(p < 0) or np.any(q < 0):
            raise UserError("a discrete pair needs two non-negative probability vectors of equal length")
        if abs(p.sum() - 1.0) > 1e-9 or abs(q.sum() - 1.0) > 1e-9:
            raise UserError("discrete pair probabilities must each sum to 1")
        self.p = p
        self.q = q
        self.neighbouring = Neighbouring.of(neighbouring)
        self.accountant = accountant
        self.label = label

    def delta_array(self, eps: np.ndarray) -> np.ndarray:
        g = np.exp(eps)[:, None]
        with np.errstate(over="ignore", invalid="ignore"):
            h_pq = np.sum(np.maximum(self.p[None, :] - g * self.q[None, :], 0.0), axis=1)
            h_qp = np.sum(np.maximum(self.q[None, :] - g * self.p[None, :], 0.0), axis=1)
        return np.nan_to_num(np.maximum(h_pq, h_qp), nan=0.0)

    def max_privacy_loss(self) -> float:
        """max_o |ln p(o)/q(o)| (inf if the supports differ): the pure-DP epsilon of this pair.

        Returns:
            The largest absolute log-likelihood ratio over the outputs, inf if the supports differ.
        """
        both = (self.p > 0) | (self.q > 0)
        if np.any((self.p[both] == 0) | (self.q[both] == 0)):
            return math.inf
        return float(np.max(np.abs(np.log(self.p[both]) - np.log(self.q[both]))))

    def params(self) -> dict[str, Any]:
        return {"p": self.p.tolist(), "q": self.q.tolist()}

    @property
    def description(self) -> str:
        return f"{self.label}: exact tradeoff of {self.p.size} outcomes, {self.neighbouring} neighbours"
