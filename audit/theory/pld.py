"""Claims given by a privacy-loss distribution (PLD) of dp-accounting [Koskela et al. 2020;
Doroshenko et al. 2022], evaluated without renormalising the PLD's mass. Sources:
docs/references.md, "Privacy-loss distributions".
"""

from __future__ import annotations

from typing import Any

import numpy as np

from audit.theory import dp_accounting_adapter as backend
from audit.theory.checks import check_delta
from audit.theory.claims import Neighbouring, PrivacyClaim

__all__ = ["PLDClaim"]


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

    Args:
        pld: a ``dp_accounting`` PrivacyLossDistribution.
        neighbouring: the neighbouring relation, a Neighbouring or its string.
        accountant: the name of the accountant the description states.
        label: how the description names the guarantee.
    """

    kind = "pld"

    def __init__(self, pld: Any, neighbouring: Neighbouring | str = Neighbouring.ADD_REMOVE,
                 accountant: str = "PLD (dp-accounting)", label: str = "PLD") -> None:
        self.pld = pld
        self.neighbouring = Neighbouring.of(neighbouring)
        self.accountant = accountant
        self.label = label
        self._profiles: list[_HockeyStick] | None = None

    def _hockey(self) -> list[_HockeyStick]:
        if self._profiles is None:
            self._profiles = [_HockeyStick(*arrays) for arrays in backend.pld_profile_arrays(self.pld)]
        return self._profiles

    def delta_array(self, eps: np.ndarray) -> np.ndarray:
        return np.max(np.stack([h(eps) for h in self._hockey()]), axis=0)

    def epsilon(self, delta: float) -> float:
        delta = check_delta(delta)
        return float(self.pld.get_epsilon_for_delta(delta))

    def params(self) -> dict[str, Any]:
        return {}

    @property
    def description(self) -> str:
        return f"{self.label}, {self.neighbouring} neighbours ({self.accountant})"
