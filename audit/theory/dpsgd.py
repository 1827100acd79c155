"""DP-SGD accounting [Abadi et al. 2016]: the Poisson-subsampled Gaussian mechanism composed over
T steps, by PLD (default), RDP or the GDP central-limit approximation, and noise calibration.
Sources: docs/references.md, "DP-SGD accounting".

Noise calibration (:func:`calibrate_noise_multiplier`): 1. Upper bracket from the RDP accountant
(cheap): RDP epsilons upper-bound the true ones, so the RDP-calibrated sigma is private enough.
2. Lower bracket by shrinking it until a coarse PLD (discretisation 1e-3) exceeds the target (very
small sigma is never tried: its PLD is huge). 3. Brent search on the coarse PLD (dp-accounting's
calibrate_dp_mechanism). 4. The result is checked with the PLD at ``value_discretization_interval``
(what DPSGDClaim uses), nudged up until that claim meets the target, and tightened by bisection on
the fine PLD to ``tol``. The result is remembered on disk (:mod:`audit.theory.disk_cache`): the next process
asking the same question with the same code reads it instead of searching again.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize

from audit.errors import UserError
from audit.theory import dp_accounting_adapter as backend
from audit.theory.checks import check_delta, check_epsilon
from audit.theory.claims import GaussianClaim, Neighbouring, PrivacyClaim
from audit.theory.disk_cache import remembered
from audit.theory.pld import PLDClaim
from audit.theory.rdp import RDPClaim, rdp_to_dp_epsilon

__all__ = ["dpsgd_gdp_mu", "DPSGD_ACCOUNTANTS", "DPSGDClaim", "calibrate_noise_multiplier", "most_steps_within"]


def dpsgd_gdp_mu(noise_multiplier: float, sample_rate: float, steps: int) -> float:
    """CLT approximation of DP-SGD: mu = q sqrt(T (e^{1/sigma^2} - 1)) [Dong, Roth, Su 2019,
    Cor. 5.4 / Bu et al. 2020]; full batch (q = 1) is exactly T-fold composition of G_{1/sigma}:
    mu = sqrt(T)/sigma (ibid. Cor. 3.3).

    Args:
        noise_multiplier: sigma, the noise standard deviation over the clipping norm.
        sample_rate: q, the Poisson sampling rate, in (0, 1].
        steps: T, the number of steps.

    Returns:
        mu of the (approximate, for q < 1) Gaussian-DP guarantee.
    """
    if sample_rate >= 1.0:
        return math.sqrt(steps) / noise_multiplier
    x = 1.0 / noise_multiplier ** 2
    if x > 700:
        return math.inf
    return sample_rate * math.sqrt(steps * math.expm1(x))


DPSGD_ACCOUNTANTS = ("pld", "rdp", "gdp")


class DPSGDClaim(PrivacyClaim):
    """DP-SGD [Abadi et al. 2016]: Poisson subsampling with rate q, Gaussian noise with multiplier
    sigma, composed over T steps; add/remove neighbours, or with ``neighbouring=Neighbouring.REPLACE`` the same
    mechanism's guarantee for replace-one pairs (PLD accountant only: dp-accounting's
    ``REPLACE_ONE`` dominating pair of the subsampled Gaussian, Zhu, Dong, Wang 2022) — what a
    correct implementation promises a replace-one canary pair.

    accountant ``"pld"`` (default; tightest; dp-accounting PLDAccountant with pessimistic
    discretisation ``value_discretization_interval``), ``"rdp"`` (dp-accounting RdpAccountant, default
    orders, Canonne-Kamath-Steinke conversion), or ``"gdp"`` (CLT mu-GDP approximation: not a
    rigorous bound). The PLD / RDP computation is cached per parameter set.

    Args:
        noise_multiplier: sigma, positive and finite.
        sample_rate: q, the Poisson sampling rate, in (0, 1].
        steps: T, a positive integer.
        accountant: ``"pld"``, ``"rdp"`` or ``"gdp"`` (above).
        value_discretization_interval: the PLD's pessimistic discretisation, in (0, 0.1].
        neighbouring: add/remove (default) or replace-one (PLD accountant only).

    Raises:
        UserError: a parameter out of its range, an unknown accountant, or replace-one neighbours with an
            accountant other than PLD.
    """

    kind = "dpsgd"

    def __init__(self, noise_multiplier: float, sample_rate: float, steps: int, accountant: str = "pld",
                 value_discretization_interval: float = 1e-4,
                 neighbouring: Neighbouring | str = Neighbouring.ADD_REMOVE) -> None:
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
        neighbouring = Neighbouring.of(neighbouring)
        if neighbouring is Neighbouring.REPLACE and accountant != "pld":
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
                pld = backend.dpsgd_pld(self.noise_multiplier, self.sample_rate, self.steps,
                                        self.value_discretization_interval,
                                        self.neighbouring is Neighbouring.REPLACE)
                self._inner = PLDClaim(pld)
            elif self.accountant == "rdp":
                orders, rdp = backend.dpsgd_rdp(self.noise_multiplier, self.sample_rate, self.steps)
                self._inner = RDPClaim(orders, rdp)
            else:
                self._inner = GaussianClaim(self.gdp_mu(), accountant="GDP CLT approximation")
        return self._inner

    @property
    def pld(self) -> Any:
        """The composed dp_accounting PrivacyLossDistribution (PLD accountant only).

        Returns:
            The composed ``dp_accounting`` PrivacyLossDistribution of the T steps.

        Raises:
            UserError: the claim does not use the PLD accountant.
        """
        if self.accountant != "pld":
            raise UserError("this DP-SGD claim does not use the PLD accountant; construct it with accountant='pld'")
        return self._impl().pld  # type: ignore[attr-defined]

    def delta_array(self, eps: np.ndarray) -> np.ndarray:
        return self._impl().delta_array(eps)

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

    Args:
        epsilon: the target epsilon.
        delta: the target delta.
        sample_rate: q, in (0, 1].
        steps: T, a positive integer.
        value_discretization_interval: the discretisation of the final PLD check (as DPSGDClaim's).
        tol: the tolerance of the returned sigma.

    Returns:
        sigma (searched as the module docstring says); always DPSGDClaim(sigma, q, T).epsilon(delta) <= epsilon.

    Raises:
        UserError: q or T out of range, or no sigma below 1e6 reaches the target.

    Cached in memory and on disk (:func:`audit.theory.disk_cache.remembered`): a later process asking the same
    question with the same code reads the figure this search returned.
    """
    epsilon = check_epsilon(epsilon, positive=True, limited=True)
    delta = check_delta(delta, positive=True, limited=True)
    if not (0.0 < sample_rate <= 1.0) or int(steps) != steps or steps < 1:
        raise UserError("calibration needs 0 < sample_rate <= 1 and a positive integer number of steps")
    arguments = {"epsilon": float(epsilon), "delta": float(delta), "sample_rate": float(sample_rate),
                 "steps": int(steps), "value_discretization_interval": float(value_discretization_interval),
                 "tol": float(tol)}
    return remembered("dpsgd_noise_multiplier", arguments, lambda: _search_noise_multiplier(**arguments))


def most_steps_within(noise_multiplier: float, sample_rate: float, epsilon: float, delta: float, upto: int) -> int:
    """The most steps, at most ``upto``, for which DP-SGD at this noise multiplier and rate stays within
    (``epsilon``, ``delta``) by the PLD accountant (:class:`DPSGDClaim`, pessimistic estimate at a discretisation of
    1e-3, an upper bound on epsilon: the steps returned are within it, perhaps a few less than the finest PLD
    allows): a bisection on T, since epsilon grows with the steps composed. 0 when even one step exceeds it.

    Args:
        noise_multiplier: sigma.
        sample_rate: q, in (0, 1].
        epsilon: the epsilon not to exceed.
        delta: its delta.
        upto: the largest T tried (a non-negative integer).

    Returns:
        The largest T in [0, ``upto``] with ``DPSGDClaim(sigma, q, T).epsilon(delta) <= epsilon``. Remembered on disk
        as :func:`calibrate_noise_multiplier` is.
    """
    arguments = {"noise_multiplier": float(noise_multiplier), "sample_rate": float(sample_rate),
                 "epsilon": float(epsilon), "delta": float(delta), "upto": int(upto)}
    return int(remembered("dpsgd_most_steps_within", arguments, lambda: _search_most_steps(**arguments)))


def _search_most_steps(noise_multiplier: float, sample_rate: float, epsilon: float, delta: float, upto: int) -> int:
    def within(steps: int) -> bool:
        return DPSGDClaim(noise_multiplier, sample_rate, steps, value_discretization_interval=1e-3).epsilon(
            delta) <= epsilon

    low, high = 0, int(upto)  # within(low) holds (no step spends nothing); within(high) is what is asked
    if high < 1 or within(high):
        return max(high, 0)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if within(middle) else (low, middle)
    return low


def _search_noise_multiplier(epsilon: float, delta: float, sample_rate: float, steps: int,
                             value_discretization_interval: float, tol: float) -> float:
    """The search of :func:`calibrate_noise_multiplier` (module docstring) on checked arguments."""
    q = float(sample_rate)

    def rdp_gap(log_s: float) -> float:
        orders, rdp = backend.dpsgd_rdp(float(math.exp(log_s)), q, steps)
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
        sigma = backend.calibrate_dpsgd_sigma(q, steps, epsilon, delta, coarse, (s_lo, s_hi), tol / 4)

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
