"""Textbook DP mechanisms as auditable targets.

Each :class:`Mechanism` knows its sensitivity, its neighbouring relation and a worst-case pair of
neighbouring datasets ``(D0, D1)`` (D1 is the world "with the target record"), its privacy claim,
and draws many outputs at once with vectorised numpy (``sample(dataset, n, rng)``). ``score``
maps outputs to a one-dimensional statistic whose large values indicate D1 (for every mechanism
here the likelihood ratio p1/p0 is non-decreasing in the score, so threshold tests on it are
Neyman-Pearson optimal). ``pair_claim()`` is the exact tradeoff of the pair itself: the best any
test on these two datasets can do, which an audit can approach but never beat.

Mechanisms and sources (Dwork & Roth 2014, "The Algorithmic Foundations of DP", unless noted):

* ``laplace_count``: counting query + Lap(1/eps), add/remove, eps-DP (Thm. 3.6).
* ``laplace_mean``: mean of n values clipped to [lower, upper], fixed public n, replace-one,
  sensitivity (upper - lower)/n, + Lap(sensitivity/eps), eps-DP.
* ``gaussian_classic``: counting query + N(0, sigma^2) with sigma = sqrt(2 ln(1.25/delta))/eps
  (Thm. A.1, eps < 1); ``gaussian_analytic``: sigma from Balle & Wang 2018. Both claim exactly
  G_{Delta/sigma} (Dong, Roth, Su 2019, Thm. 2.7), which implies the nominal (eps, delta).
* ``randomized_response``: each of m individuals reports their value in {0..k-1} truthfully w.p.
  e^eps/(e^eps + k - 1) (Warner 1965; k-ary: Kairouz, Oh, Viswanath 2016), replace-one, eps-DP.
* ``exponential``: McSherry & Talwar 2007, P(o) prop. to exp(eps u(D, o) / (2 Delta_u)) with the
  histogram utility u(D, o) = #{records equal to o} (Delta_u = 1), replace-one, eps-DP (Thm. 3.10).
* ``report_noisy_max``: argmax of histogram counts + i.i.d. Lap(1/eps), add/remove, eps-DP
  (Claim 3.9, counting queries).
"""

from __future__ import annotations

import abc
import math
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy.integrate import trapezoid as _trapezoid

from audit.errors import UserError
from audit.theory.checks import check_delta, check_epsilon
from audit.theory.claims import (
    ApproxDPClaim,
    DiscretePairClaim,
    GaussianClaim,
    LaplaceClaim,
    Neighbouring,
    PrivacyClaim,
    PureDPClaim,
    RandomizedResponseClaim,
)
from audit.theory.gaussian import analytic_gaussian_sigma, classic_gaussian_sigma

__all__ = [
    "Mechanism",
    "LaplaceCount",
    "LaplaceMean",
    "GaussianCount",
    "RandomizedResponse",
    "ExponentialMechanism",
    "ReportNoisyMax",
    "MECHANISMS",
    "make_mechanism",
]


def _check_n(n: int) -> int:
    if int(n) != n or n < 1:
        raise UserError(f"number of draws must be a positive integer (got {n!r})")
    return int(n)


def _rng(rng: np.random.Generator | int | None) -> np.random.Generator:
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


class Mechanism(abc.ABC):
    """A DP mechanism with a worst-case neighbouring pair and a privacy claim."""

    name: str = "mechanism"
    neighbouring: str = Neighbouring.ADD_REMOVE  # a Neighbouring, or a plugin's own text
    output_kind: str = "real"  # "real" (shape (n,)), "categorical" ((n,) ints) or "vector" ((n, m))
    #: True when the score is Gaussian with the same known variance in both worlds, so the pair's
    #: tradeoff is exactly G_mu and a lower bound on mu is a valid epsilon lower bound.
    gaussian_output: bool = False

    @property
    @abc.abstractmethod
    def sensitivity(self) -> float:
        """Sensitivity of the underlying query under ``neighbouring``."""

    @property
    @abc.abstractmethod
    def claim(self) -> PrivacyClaim:
        """The privacy guarantee the mechanism is proven to have (what the audit checks)."""

    @property
    def nominal_claim(self) -> PrivacyClaim:
        """The advertised (eps, delta) guarantee; equal to ``claim`` unless the proven one is finer."""
        return self.claim

    @abc.abstractmethod
    def neighbouring_pair(self) -> tuple[np.ndarray, np.ndarray]:
        """(D0, D1): worst-case neighbouring datasets; D1 is the world with the target record."""

    @abc.abstractmethod
    def sample(self, dataset: np.ndarray, n: int, rng: np.random.Generator | int | None) -> np.ndarray:
        """n independent outputs of the mechanism on ``dataset`` (vectorised)."""

    def score(self, outputs: np.ndarray) -> np.ndarray:
        """One real statistic per output; p1/p0 is non-decreasing in it. Default: the output."""
        return np.asarray(outputs, dtype=np.float64).reshape(-1)

    @abc.abstractmethod
    def pair_claim(self) -> PrivacyClaim:
        """Exact privacy of the neighbouring pair (the best achievable by any test on it)."""

    @abc.abstractmethod
    def params(self) -> dict[str, Any]:
        """JSON-serialisable parameters (names as in results.json ``params``)."""

    @property
    @abc.abstractmethod
    def description(self) -> str:
        """One line for reports."""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "neighbouring": self.neighbouring,
                "sensitivity": self.sensitivity, "params": self.params(), "claim": self.claim.to_dict()}


# ---------------------------------------------------------------------------------- Laplace


class _LaplaceQuery(Mechanism):
    """A real-valued query plus Lap(sensitivity / epsilon) noise: epsilon-DP [Dwork & Roth, Thm 3.6].

    Subclasses define ``epsilon``, ``sensitivity`` and ``query(dataset)``.
    """

    @property
    def scale(self) -> float:
        return self.sensitivity / self.epsilon

    @property
    def claim(self) -> PrivacyClaim:
        return LaplaceClaim(self.epsilon, neighbouring=self.neighbouring)

    @property
    def nominal_claim(self) -> PrivacyClaim:
        return PureDPClaim(self.epsilon, neighbouring=self.neighbouring, accountant="Laplace mechanism theorem")

    def sample(self, dataset: np.ndarray, n: int, rng: np.random.Generator | int | None) -> np.ndarray:
        return self.query(dataset) + _rng(rng).laplace(0.0, self.scale, size=_check_n(n))

    def pair_claim(self) -> PrivacyClaim:
        return LaplaceClaim(self.epsilon, neighbouring=self.neighbouring, accountant="exact (Laplace pair)")

    @abc.abstractmethod
    def query(self, dataset: np.ndarray) -> float:
        """The exact query answer on ``dataset``."""


class LaplaceCount(_LaplaceQuery):
    """Counting query ``#{records with value 1}`` plus Lap(1/eps) noise; add/remove; eps-DP."""

    name = "laplace_count"
    neighbouring = Neighbouring.ADD_REMOVE

    def __init__(self, epsilon: float = 1.0, n_records: int = 100) -> None:
        self.epsilon = check_epsilon(epsilon, "mechanism epsilon", positive=True)
        self.n_records = _check_n(n_records)

    @property
    def sensitivity(self) -> float:
        return 1.0

    def neighbouring_pair(self) -> tuple[np.ndarray, np.ndarray]:
        d0 = np.ones(self.n_records, dtype=np.int64)
        return d0, np.append(d0, 1)

    def query(self, dataset: np.ndarray) -> float:
        d = np.asarray(dataset)
        if d.ndim != 1 or not np.all((d == 0) | (d == 1)):
            raise UserError("laplace_count expects a 1-D dataset of 0/1 records (1 = satisfies the predicate)")
        return float(d.sum())

    def params(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "sensitivity": self.sensitivity, "scale": self.scale,
                "n_records": self.n_records}

    @property
    def description(self) -> str:
        return f"Laplace counting query, Lap(1/{self.epsilon:g}) noise, {self.epsilon:g}-DP, add/remove"


class LaplaceMean(_LaplaceQuery):
    """Mean of a fixed number of values clipped to [lower, upper] plus Laplace noise; replace-one."""

    name = "laplace_mean"
    neighbouring = Neighbouring.REPLACE

    def __init__(self, epsilon: float = 1.0, n_records: int = 100, lower: float = 0.0, upper: float = 1.0) -> None:
        self.epsilon = check_epsilon(epsilon, "mechanism epsilon", positive=True)
        self.n_records = _check_n(n_records)
        if not (upper > lower):
            raise UserError(f"laplace_mean needs upper > lower (got [{lower}, {upper}])")
        self.lower = float(lower)
        self.upper = float(upper)

    @property
    def sensitivity(self) -> float:
        return (self.upper - self.lower) / self.n_records

    def neighbouring_pair(self) -> tuple[np.ndarray, np.ndarray]:
        d0 = np.full(self.n_records, self.lower)
        d1 = d0.copy()
        d1[0] = self.upper
        return d0, d1

    def query(self, dataset: np.ndarray) -> float:
        d = np.asarray(dataset, dtype=np.float64)
        if d.ndim != 1 or d.size != self.n_records:
            raise UserError(f"laplace_mean expects a 1-D dataset of exactly n_records={self.n_records} values "
                            "(the record count is public under replace-one neighbouring)")
        return float(np.clip(d, self.lower, self.upper).mean())

    def params(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "sensitivity": self.sensitivity, "scale": self.scale,
                "n_records": self.n_records, "lower": self.lower, "upper": self.upper}

    @property
    def description(self) -> str:
        return (f"Laplace bounded mean of {self.n_records} values in [{self.lower:g}, {self.upper:g}], "
                f"{self.epsilon:g}-DP, replace-one")


# ---------------------------------------------------------------------------------- Gaussian


class GaussianCount(Mechanism):
    """Counting query plus N(0, sigma^2); sigma by the classic or the analytic calibration."""

    neighbouring = Neighbouring.ADD_REMOVE
    gaussian_output = True

    def __init__(self, epsilon: float = 1.0, delta: float = 1e-5, calibration: str = "analytic",
                 n_records: int = 100, sensitivity: float = 1.0) -> None:
        self.epsilon = check_epsilon(epsilon, "mechanism epsilon", positive=True)
        self.delta = check_delta(delta, "the Gaussian mechanism's delta", positive=True)
        if calibration not in ("analytic", "classic"):
            raise UserError(f"unknown Gaussian calibration {calibration!r}; use 'analytic' or 'classic'")
        if not sensitivity > 0:
            raise UserError(f"sensitivity must be positive (got {sensitivity!r})")
        self.calibration = calibration
        self.n_records = _check_n(n_records)
        self._sensitivity = float(sensitivity)
        self.name = f"gaussian_{calibration}"
        if calibration == "analytic":
            self.sigma = analytic_gaussian_sigma(self.epsilon, self.delta, self._sensitivity)
        else:
            self.sigma = classic_gaussian_sigma(self.epsilon, self.delta, self._sensitivity)

    @property
    def sensitivity(self) -> float:
        return self._sensitivity

    @property
    def mu(self) -> float:
        return self.sensitivity / self.sigma

    @property
    def claim(self) -> PrivacyClaim:
        return GaussianClaim(self.mu, neighbouring=self.neighbouring,
                             accountant="exact Gaussian DP (mu = sensitivity / sigma)")

    @property
    def nominal_claim(self) -> PrivacyClaim:
        return ApproxDPClaim(self.epsilon, self.delta, neighbouring=self.neighbouring,
                             accountant=f"{self.calibration} Gaussian calibration")

    def neighbouring_pair(self) -> tuple[np.ndarray, np.ndarray]:
        d0 = np.ones(self.n_records, dtype=np.int64)
        return d0, np.append(d0, 1)

    def query(self, dataset: np.ndarray) -> float:
        d = np.asarray(dataset)
        if d.ndim != 1 or not np.all((d == 0) | (d == 1)):
            raise UserError(f"{self.name} expects a 1-D dataset of 0/1 records (1 = satisfies the predicate)")
        return float(d.sum()) * self.sensitivity

    def sample(self, dataset: np.ndarray, n: int, rng: np.random.Generator | int | None) -> np.ndarray:
        return self.query(dataset) + _rng(rng).normal(0.0, self.sigma, size=_check_n(n))

    def pair_claim(self) -> PrivacyClaim:
        return GaussianClaim(self.mu, neighbouring=self.neighbouring, accountant="exact (Gaussian pair)")

    def params(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "delta": self.delta, "calibration": self.calibration,
                "sensitivity": self.sensitivity, "sigma": self.sigma, "mu": self.mu, "n_records": self.n_records}

    @property
    def description(self) -> str:
        return (f"Gaussian counting query, {self.calibration} calibration sigma={self.sigma:.4g} for "
                f"({self.epsilon:g}, {self.delta:g})-DP (exactly {self.mu:.4g}-GDP), add/remove")


# ---------------------------------------------------------------------------------- randomized response


class RandomizedResponse(Mechanism):
    """Local k-ary randomized response on m individuals; output (n, m) reports; replace-one."""

    name = "randomized_response"
    neighbouring = Neighbouring.REPLACE
    output_kind = "vector"

    def __init__(self, epsilon: float = 1.0, k: int = 2, n_records: int = 20) -> None:
        self.epsilon = check_epsilon(epsilon, "mechanism epsilon", positive=True)
        if int(k) != k or k < 2:
            raise UserError(f"randomized response needs k >= 2 categories (got {k!r})")
        self.k = int(k)
        self.n_records = _check_n(n_records)

    @property
    def sensitivity(self) -> float:
        return 1.0  # one individual's value changes

    @property
    def keep_probability(self) -> float:
        return 1.0 / (1.0 + (self.k - 1) * math.exp(-self.epsilon))

    @property
    def claim(self) -> PrivacyClaim:
        return RandomizedResponseClaim(self.epsilon, self.k, neighbouring=self.neighbouring)

    def neighbouring_pair(self) -> tuple[np.ndarray, np.ndarray]:
        d0 = np.zeros(self.n_records, dtype=np.int64)
        d1 = d0.copy()
        d1[0] = 1
        return d0, d1

    def sample(self, dataset: np.ndarray, n: int, rng: np.random.Generator | int | None) -> np.ndarray:
        d = np.asarray(dataset)
        if d.ndim != 1 or not np.issubdtype(d.dtype, np.integer) or np.any(d < 0) or np.any(d >= self.k):
            raise UserError(f"randomized_response expects a 1-D integer dataset with values in 0..{self.k - 1}")
        g = _rng(rng)
        n = _check_n(n)
        keep = g.random((n, d.size)) < self.keep_probability
        other = (d[None, :] + g.integers(1, self.k, size=(n, d.size))) % self.k  # uniform over the k-1 others
        dtype = np.int8 if self.k <= 127 else np.int64
        return np.where(keep, d[None, :], other).astype(dtype)

    def score(self, outputs: np.ndarray) -> np.ndarray:
        """Target individual's (index 0) report: +1 if it says 1, -1 if it says 0, 0 otherwise
        (log-likelihood ratio eps, -eps, 0 for the pair value 0 -> 1)."""
        o = np.asarray(outputs)
        r = o[:, 0] if o.ndim == 2 else o.reshape(-1)
        return np.where(r == 1, 1.0, np.where(r == 0, -1.0, 0.0))

    def pair_claim(self) -> PrivacyClaim:
        return RandomizedResponseClaim(self.epsilon, self.k, neighbouring=self.neighbouring,
                                       accountant="exact (randomized-response pair)")

    def params(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "k": self.k, "keep_probability": self.keep_probability,
                "n_records": self.n_records}

    @property
    def description(self) -> str:
        return f"{self.k}-ary randomized response on {self.n_records} individuals, {self.epsilon:g}-DP, replace-one"


# ---------------------------------------------------------------------------------- selection


class _HistogramSelection(Mechanism):
    """Shared parts of selection mechanisms on a histogram of categorical records."""

    output_kind = "categorical"

    def __init__(self, epsilon: float, k: int) -> None:
        self.epsilon = check_epsilon(epsilon, "mechanism epsilon", positive=True)
        if int(k) != k or k < 2:
            raise UserError(f"selection needs k >= 2 candidates (got {k!r})")
        self.k = int(k)
        self._pair_probs: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def sensitivity(self) -> float:
        return 1.0

    def counts(self, dataset: np.ndarray) -> np.ndarray:
        d = np.asarray(dataset)
        if d.ndim != 1 or not np.issubdtype(d.dtype, np.integer) or np.any(d < 0) or np.any(d >= self.k):
            raise UserError(f"{self.name} expects a 1-D integer dataset with categories 0..{self.k - 1}")
        return np.bincount(d, minlength=self.k).astype(np.float64)

    @abc.abstractmethod
    def output_probabilities(self, dataset: np.ndarray) -> np.ndarray:
        """Exact P(output = o) for o = 0..k-1."""

    def _pair(self) -> tuple[np.ndarray, np.ndarray]:
        if self._pair_probs is None:
            d0, d1 = self.neighbouring_pair()
            self._pair_probs = (self.output_probabilities(d0), self.output_probabilities(d1))
        return self._pair_probs

    def score(self, outputs: np.ndarray) -> np.ndarray:
        """Exact log-likelihood ratio ln p1(o)/p0(o) of each output on the neighbouring pair."""
        p0, p1 = self._pair()
        with np.errstate(divide="ignore"):
            llr = np.log(p1) - np.log(p0)
        return llr[np.asarray(outputs, dtype=np.int64).reshape(-1)]

    def pair_claim(self) -> PrivacyClaim:
        p0, p1 = self._pair()
        return DiscretePairClaim(p0, p1, neighbouring=self.neighbouring, label=f"{self.name} neighbouring pair")

    @property
    def claim(self) -> PrivacyClaim:
        return PureDPClaim(self.epsilon, neighbouring=self.neighbouring, accountant=self._theorem)

    _theorem = ""


class ExponentialMechanism(_HistogramSelection):
    """Exponential mechanism with the histogram utility u(D, o) = count of o; replace-one.

    Pair: D0 has n_records records all in category 0; D1 moves one of them to category 1. Then u
    rises by 1 on output 1 and falls by 1 on output 0, and Z0/Z1 -> e^{eps/2} as n_records grows,
    so the privacy loss of output 1 approaches the claimed eps -- but output 1 then becomes rare.
    With ``n_records=None`` the size is chosen (from 1..ceil(40/eps)) to maximise the pair's exact
    epsilon at delta = 1e-3, the most an audit with ~1e5 draws can hope to see.
    """

    name = "exponential"
    neighbouring = Neighbouring.REPLACE
    _theorem = "exponential mechanism theorem (McSherry & Talwar 2007)"

    def __init__(self, epsilon: float = 1.0, k: int = 5, n_records: int | None = None) -> None:
        super().__init__(epsilon, k)
        if n_records is None:
            best = (-1.0, 1)
            for m in range(1, int(math.ceil(40.0 / self.epsilon)) + 1):
                self.n_records = m
                self._pair_probs = None
                best = max(best, (self.pair_claim().epsilon(1e-3), m))
            n_records = best[1]
            self._pair_probs = None
        self.n_records = _check_n(n_records)

    def output_probabilities(self, dataset: np.ndarray) -> np.ndarray:
        logits = self.epsilon * self.counts(dataset) / (2.0 * self.sensitivity)
        w = np.exp(logits - logits.max())
        return w / w.sum()

    def neighbouring_pair(self) -> tuple[np.ndarray, np.ndarray]:
        d0 = np.zeros(self.n_records, dtype=np.int64)
        d1 = d0.copy()
        d1[0] = 1
        return d0, d1

    def sample(self, dataset: np.ndarray, n: int, rng: np.random.Generator | int | None) -> np.ndarray:
        p = self.output_probabilities(dataset)
        return _rng(rng).choice(self.k, size=_check_n(n), p=p)

    def params(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "k": self.k, "sensitivity": self.sensitivity, "n_records": self.n_records}

    @property
    def description(self) -> str:
        return (f"exponential mechanism over {self.k} candidates (histogram utility), "
                f"{self.epsilon:g}-DP, replace-one")


class ReportNoisyMax(_HistogramSelection):
    """argmax_o (count_o + Lap(1/eps)) on a histogram; add/remove; eps-DP for counting queries.

    Pair: D0 has one record in category 0 and none elsewhere; D1 adds a record in category 1.
    Output probabilities are computed exactly by numerical integration of
    P(argmax = j) = int f(x - c_j) prod_{i != j} F(x - c_i) dx (Laplace density f, CDF F).
    """

    name = "report_noisy_max"
    neighbouring = Neighbouring.ADD_REMOVE
    _theorem = "report-noisy-max theorem (Dwork & Roth 2014, Claim 3.9)"

    def __init__(self, epsilon: float = 1.0, k: int = 5) -> None:
        super().__init__(epsilon, k)

    @property
    def scale(self) -> float:
        return self.sensitivity / self.epsilon

    def neighbouring_pair(self) -> tuple[np.ndarray, np.ndarray]:
        d0 = np.array([0], dtype=np.int64)
        return d0, np.array([0, 1], dtype=np.int64)

    def output_probabilities(self, dataset: np.ndarray) -> np.ndarray:
        c = self.counts(dataset)
        b = self.scale
        x = np.linspace(c.min() - 45.0 * b, c.max() + 45.0 * b, 400_001)
        z = (x[None, :] - c[:, None]) / b
        log_cdf = np.where(z < 0, np.log(0.5) + np.minimum(z, 0.0), np.log1p(-0.5 * np.exp(-np.maximum(z, 0.0))))
        log_pdf = -np.abs(z) - math.log(2.0 * b)
        total = log_cdf.sum(axis=0)
        probs = np.array([_trapezoid(np.exp(log_pdf[j] + total - log_cdf[j]), x) for j in range(self.k)])
        return probs / probs.sum()

    def sample(self, dataset: np.ndarray, n: int, rng: np.random.Generator | int | None) -> np.ndarray:
        c = self.counts(dataset)
        n = _check_n(n)
        g = _rng(rng)
        out = np.empty(n, dtype=np.int64)
        step = max(1, 2_000_000 // self.k)
        for s in range(0, n, step):
            m = min(step, n - s)
            out[s:s + m] = np.argmax(c[None, :] + g.laplace(0.0, self.scale, size=(m, self.k)), axis=1)
        return out

    def params(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "k": self.k, "sensitivity": self.sensitivity, "scale": self.scale}

    @property
    def description(self) -> str:
        return f"report-noisy-max over {self.k} counts, Lap(1/{self.epsilon:g}) noise, {self.epsilon:g}-DP, add/remove"


# ---------------------------------------------------------------------------------- registry


MECHANISMS: dict[str, tuple[str, Callable[..., Mechanism]]] = {
    "laplace_count": ("Laplace counting query, eps = 1", lambda epsilon=1.0, delta=None: LaplaceCount(epsilon)),
    "laplace_mean": ("Laplace bounded mean of 100 values in [0, 1], eps = 1",
                     lambda epsilon=1.0, delta=None: LaplaceMean(epsilon)),
    "gaussian_classic": ("Gaussian counting query, classic calibration, (0.5, 1e-5)",
                         lambda epsilon=0.5, delta=1e-5: GaussianCount(epsilon, delta, "classic")),
    "gaussian_analytic": ("Gaussian counting query, analytic calibration (Balle & Wang), (1, 1e-5)",
                          lambda epsilon=1.0, delta=1e-5: GaussianCount(epsilon, delta, "analytic")),
    "randomized_response": ("binary randomized response on 20 individuals, eps = 1",
                            lambda epsilon=1.0, delta=None: RandomizedResponse(epsilon)),
    "exponential": ("exponential mechanism, 5 candidates, eps = 1",
                    lambda epsilon=1.0, delta=None: ExponentialMechanism(epsilon)),
    "report_noisy_max": ("report-noisy-max over 5 counts, eps = 1",
                         lambda epsilon=1.0, delta=None: ReportNoisyMax(epsilon)),
}


def make_mechanism(name: str, epsilon: float | None = None, delta: float | None = None) -> Mechanism:
    """Build a registered mechanism, optionally overriding its epsilon (and delta for Gaussians)."""
    if name not in MECHANISMS:
        raise UserError(f"unknown mechanism {name!r}; choose one of {', '.join(MECHANISMS)}")
    factory = MECHANISMS[name][1]
    kwargs: dict[str, float] = {}
    if epsilon is not None:
        kwargs["epsilon"] = epsilon
    if delta is not None:
        if not name.startswith("gaussian"):
            raise UserError(f"mechanism {name} is pure DP; --delta applies only to the Gaussian mechanisms")
        kwargs["delta"] = delta
    return factory(**kwargs)
