"""Deliberately broken DP mechanisms: controls that an audit must flag.

Each control claims the guarantee of the correct mechanism it imitates but violates it, the way
real implementations do. ``python -m audit run mechanism --target NAME`` audits them like any
mechanism; the test-suite asserts each is flagged (lower bound above the claim at 95% confidence)
while the correct mechanisms are not.

* ``broken_laplace_half_scale``: a counting query with Lap(1/(2 eps)) noise claimed eps-DP —
  half the scale the Laplace mechanism needs [Dwork & Roth 2014, Thm. 3.6]; it is really 2 eps-DP.
* ``broken_noisy_max_with_value``: report-noisy-max over k counting queries with Lap(1/eps) noise
  that also releases the noisy maximum value. The index alone is eps-DP even when one record
  changes every count by one [Dwork & Roth 2014, Claim 3.9], but the value is not: when one record
  satisfies all k predicates the maximum of k shifted Laplace variables has privacy loss up to
  k eps in its left tail (density ratio g(m-1)/g(m) = e^{-eps} (F(m-1)/F(m))^{k-1} = e^{-k eps} for
  m below every count). The audit pair is exactly that record.
* ``broken_gaussian_classic_eps20``: the classic calibration sigma = sqrt(2 ln(1.25/delta))/eps
  [Dwork & Roth 2014, Thm. A.1], proven only for eps < 1, used at eps = 20, delta = 1e-5 and
  claimed (20, 1e-5)-DP. Its output is N(count, sigma^2), exactly mu-GDP with mu = 1/sigma = 4.13,
  whose true epsilon at delta = 1e-5 is 25.4. Whether an audit can see it: below eps ~ 9 it
  cannot, since there the classic sigma is in fact private enough (true epsilon 0.75 at claimed 1,
  4.5 at claimed 5); at eps = 20 the excess lies at privacy losses above 20, and a
  Clopper–Pearson bound from N draws per world can never exceed about ln(N) (about 11.5 for
  10^5 draws) — so the CP audit cannot flag it. The Gaussian-DP estimator can: the output is
  Gaussian with known variance, so the pair's tradeoff is exactly G_mu and the rigorous lower
  bound on mu converts into a valid epsilon lower bound (see ``gaussian_output``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from audit.errors import UserError
from audit.theory.claims import ApproxDPClaim, GaussianClaim, LaplaceClaim, Neighbouring, PrivacyClaim
from targets.mechanisms import GaussianCount, LaplaceCount, Mechanism, ReportNoisyMax


class HalfScaleLaplace(LaplaceCount):
    """Laplace counting query with half the required noise scale, claimed eps-DP."""

    name = "broken_laplace_half_scale"

    @property
    def scale(self) -> float:
        return self.sensitivity / (2.0 * self.epsilon)

    def pair_claim(self) -> PrivacyClaim:
        return LaplaceClaim(2.0 * self.epsilon, neighbouring=self.neighbouring, accountant="exact (the real scale)")

    @property
    def description(self) -> str:
        return f"BROKEN control: counting query + Lap(1/(2*{self.epsilon:g})) claimed {self.epsilon:g}-DP"


class NoisyMaxWithValue(ReportNoisyMax):
    """Report-noisy-max that releases (argmax, noisy max value); claimed eps-DP.

    Datasets are 0/1 matrices (records x k predicates); count j = number of records satisfying
    predicate j. D1 adds one record satisfying every predicate to D0.
    """

    name = "broken_noisy_max_with_value"
    output_kind = "vector"

    def counts(self, dataset: np.ndarray) -> np.ndarray:
        d = np.asarray(dataset)
        if d.ndim != 2 or d.shape[1] != self.k or not np.all((d == 0) | (d == 1)):
            raise UserError(f"{self.name} expects a 0/1 matrix with {self.k} columns (records x predicates)")
        return d.sum(axis=0).astype(np.float64)

    def neighbouring_pair(self) -> tuple[np.ndarray, np.ndarray]:
        d0 = np.zeros((3, self.k), dtype=np.int64)
        return d0, np.vstack([d0, np.ones((1, self.k), dtype=np.int64)])

    def sample(self, dataset: np.ndarray, n: int, rng: np.random.Generator | int | None) -> np.ndarray:
        g = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        noisy = self.counts(dataset)[None, :] + g.laplace(0.0, self.scale, size=(int(n), self.k))
        return np.stack([noisy.argmax(axis=1).astype(np.float64), noisy.max(axis=1)], axis=1)

    def score(self, outputs: np.ndarray) -> np.ndarray:
        """The released value: the pair's likelihood ratio increases with it (module docstring)."""
        return np.asarray(outputs, dtype=np.float64)[:, 1]

    def pair_claim(self) -> PrivacyClaim | None:
        return None  # no closed form; the privacy loss reaches k eps

    def params(self) -> dict[str, Any]:
        return super().params() | {"releases": "argmax and noisy max value"}

    @property
    def description(self) -> str:
        return (f"BROKEN control: report-noisy-max over {self.k} counts that also releases the noisy max value, "
                f"claimed {self.epsilon:g}-DP")


class ClassicGaussianLargeEps(GaussianCount):
    """The classic Gaussian calibration used outside its proven range, claimed (eps, delta)-DP."""

    name = "broken_gaussian_classic_eps20"

    def __init__(self, epsilon: float = 20.0, delta: float = 1e-5) -> None:
        super().__init__(0.5, delta, "classic")
        self.name = "broken_gaussian_classic_eps20"
        self.epsilon = float(epsilon)
        self.sigma = self.sensitivity * math.sqrt(2.0 * math.log(1.25 / self.delta)) / self.epsilon

    @property
    def claim(self) -> PrivacyClaim:
        return ApproxDPClaim(self.epsilon, self.delta, neighbouring=Neighbouring.ADD_REMOVE,
                             accountant="classic Gaussian calibration, outside its proven range eps < 1")

    def pair_claim(self) -> PrivacyClaim:
        return GaussianClaim(self.mu, neighbouring=Neighbouring.ADD_REMOVE, accountant="exact (Gaussian pair)")

    @property
    def description(self) -> str:
        return (f"BROKEN control: classic Gaussian sigma={self.sigma:.4g} claimed ({self.epsilon:g}, "
                f"{self.delta:g})-DP (really {self.mu:.3g}-GDP)")


#: name -> (description, factory)
BROKEN_MECHANISMS: dict[str, tuple[str, Callable[[], Mechanism]]] = {
    "broken_laplace_half_scale": ("control: Laplace count with half the noise scale, claimed eps = 1",
                                  lambda: HalfScaleLaplace(1.0)),
    "broken_noisy_max_with_value": ("control: report-noisy-max that also releases the noisy value, claimed eps = 1",
                                    lambda: NoisyMaxWithValue(1.0, k=5)),
    "broken_gaussian_classic_eps20": ("control: classic Gaussian calibration at eps = 20 (proven only for eps < 1)",
                                      lambda: ClassicGaussianLargeEps(20.0, 1e-5)),
}


def make_broken(name: str) -> Mechanism:
    """Build a registered broken control."""
    if name not in BROKEN_MECHANISMS:
        raise UserError(f"unknown control {name!r}; choose one of {', '.join(BROKEN_MECHANISMS)}")
    return BROKEN_MECHANISMS[name][1]()
