"""The theoretical privacy of any named target, whatever its family.

Targets are trained models (:mod:`targets.registry`, DP-SGD or non-private), textbook mechanisms
(:mod:`targets.mechanisms`), DP-ERM output perturbation (:mod:`targets.dperm`), broken controls and
plugins, all named through :mod:`targets.catalogue`. :func:`theory_for` resolves a name to a
:class:`TargetTheory` — its claim
(a :class:`audit.theory.claims.PrivacyClaim`), the delta at which epsilon is reported, and its
parameters under the names ``results.json`` uses — so ``python -m audit bound`` and every runner
compare against the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from audit.errors import UserError
from audit.theory.checks import check_delta, check_epsilon
from audit.theory.claims import PURE_DP_DELTA, Neighbouring, PrivacyClaim
from audit.theory.rero import rero_bound
from audit.theory.tradeoff import default_alpha_grid, implied_gdp_mu
from targets.catalogue import TargetEntry, is_language_model, resolve

#: FPR values every reported tradeoff curve contains exactly.
REQUIRED_ALPHAS = (1e-3, 1e-2, 0.1)
#: Baselines kappa (1/n for n = 1000, 100, 10, 2 candidates) every reported ReRo curve contains exactly.
REQUIRED_KAPPAS = (1e-3, 1e-2, 0.1, 0.5)


@dataclass(frozen=True, kw_only=True)
class TargetTheory:
    """What a target claims. ``claim`` is None for a non-private target."""

    name: str
    family: str
    description: str
    claim: PrivacyClaim | None
    delta: float
    params: dict[str, Any] = field(default_factory=dict)
    neighbouring: str | None = None

    @property
    def epsilon(self) -> float | None:
        """Epsilon at ``delta`` (None for a non-private target)."""
        return None if self.claim is None else float(self.claim.epsilon(self.delta))

    def tradeoff_pairs(self, alpha: np.ndarray | None = None) -> list[list[float]]:
        """``[[alpha, beta], ...]`` of the claim's f-DP curve on a grid holding ``REQUIRED_ALPHAS``."""
        if self.claim is None:
            return []
        a = tradeoff_alphas() if alpha is None else np.asarray(alpha, dtype=np.float64)
        beta = np.asarray(self.claim.tradeoff(a), dtype=np.float64)
        return [[float(x), float(y)] for x, y in zip(a, beta, strict=True)]

    def rero_pairs(self, kappa: np.ndarray | None = None) -> list[list[float]]:
        """``[[kappa, 1 - f(kappa)], ...]``: the ReRo bound of the claim (:func:`audit.theory.rero.rero_bound`;
        Hayes, Mahloujifar, Balle 2023; docs/references.md, "Reconstruction robustness") on a grid holding
        ``REQUIRED_KAPPAS``."""
        if self.claim is None:
            return []
        k = rero_kappas() if kappa is None else np.asarray(kappa, dtype=np.float64)
        bound = np.asarray(rero_bound(self.claim, k), dtype=np.float64)
        return [[float(x), float(y)] for x, y in zip(k, bound, strict=True)]

    def gdp_summary(self) -> tuple[float, str] | None:
        """(mu, how it was obtained) of a Gaussian-DP summary of the claim, or None (see :func:`gdp_summary`)."""
        return None if self.claim is None else gdp_summary(self.claim)


#: How :func:`gdp_summary` obtained mu, for claims that are not Gaussian-shaped themselves.
IMPLIED_MU = "tightest mu-GDP implied by the claim"


def gdp_summary(claim: PrivacyClaim) -> tuple[float, str]:
    """(mu, how it was obtained) of a Gaussian-DP summary of ``claim``.

    DP-SGD claims use the central-limit mu of Dong, Roth, Su 2019 (Cor. 5.4) — an approximation,
    not a bound; Gaussian claims their exact mu; any other claim the tightest mu-GDP it implies
    (:func:`audit.theory.tradeoff.implied_gdp_mu`, ``IMPLIED_MU``): a rigorous upper bound on the mu
    any test can demonstrate.
    """
    mu = claim.gdp_mu()
    if mu is not None:
        exact = type(claim).__name__ == "GaussianClaim"
        return float(mu), "exact" if exact else "central-limit approximation"
    return float(implied_gdp_mu(claim)), IMPLIED_MU


def tradeoff_alphas() -> np.ndarray:
    """The alpha grid of reported tradeoff curves (log-spaced low FPR, linear above)."""
    return np.unique(np.concatenate([default_alpha_grid(201), REQUIRED_ALPHAS]))


def rero_kappas() -> np.ndarray:
    """The kappa grid of reported ReRo curves: log-spaced from 1e-4 to 1 and linear above 0.02, holding
    ``REQUIRED_KAPPAS``."""
    return np.unique(np.concatenate([np.logspace(-4, 0, 81), np.linspace(0.02, 1, 50), REQUIRED_KAPPAS]))


def check_privacy_args(epsilon: float | None, delta: float | None) -> None:
    """A requested epsilon must be positive and finite, a delta in (0, 1); else a one-line error."""
    if epsilon is not None:
        check_epsilon(epsilon, "--epsilon", positive=True, limited=True)
    if delta is not None:
        check_delta(delta, "--delta", positive=True, limited=True)


def theory_for(name: str, epsilon: float | None = None, delta: float | None = None) -> TargetTheory:
    """The claim of target ``name``, optionally at another claimed ``epsilon`` (recalibrating the
    noise) and reported at another ``delta``.

    For trained DP-SGD targets both ``epsilon`` and ``delta`` define the calibration (sigma from the
    PLD accountant). For mechanisms and DP-ERM, ``epsilon`` (and ``delta`` for the Gaussian ones)
    set the mechanism's parameters; for pure-DP mechanisms ``delta`` only changes where epsilon is
    read off the exact privacy profile (default ``PURE_DP_DELTA``).
    """
    check_privacy_args(epsilon, delta)
    entry = resolve(name)
    if entry.family == "plugin":
        if epsilon is not None:
            raise UserError("--epsilon does not apply to a plugin: its factory states the claim")
        plugin = entry.factory()
        if is_language_model(plugin) and not plugin.lm.claimed:  # a non-private LM trainer
            return TargetTheory(name=name, family="plugin", description=plugin.description, claim=None,
                                delta=delta or plugin.delta, params=plugin.params, neighbouring=None)
        if plugin.claim is None:
            raise UserError(f"plugin {name} claims what Opacus's accountant reports after training ('claim': "
                            f"'opacus'); audit it with `python -m audit run dp --target {name}` to see that claim")
        report_delta = delta if delta is not None else (plugin.delta or PURE_DP_DELTA)
        return TargetTheory(name=name, family="plugin", description=plugin.description, claim=plugin.claim,
                            delta=report_delta, params=plugin.params, neighbouring=plugin.neighbouring)
    if entry.family == "trained":
        target = entry.factory().with_privacy(epsilon, delta)
        sigma = target.noise_multiplier()
        return TargetTheory(name=name, family=entry.family, description=target.description, claim=target.claim(sigma),
                            delta=target.delta, params=target.params(sigma),
                            neighbouring=Neighbouring.ADD_REMOVE if target.private else None)
    mech, report_delta = build_mechanism(entry, epsilon, delta)
    return TargetTheory(name=name, family=entry.family, description=mech.description, claim=mech.claim,
                        delta=report_delta, params=mech.params(), neighbouring=mech.neighbouring)


def build_mechanism(entry: TargetEntry, epsilon: float | None, delta: float | None) -> tuple[Any, float]:
    """The mechanism of a mechanism-like target (family "mechanism", "dp-erm" or "control") and the
    delta at which it is reported and audited.

    ``epsilon`` (and ``delta`` for the Gaussian mechanisms and DP-ERM) set its parameters; a
    pure-DP mechanism is read at ``delta`` or ``PURE_DP_DELTA``; a broken control has a fixed
    claim (no ``epsilon``) and is read at ``delta`` or its own delta.
    """
    if entry.family == "mechanism":
        if entry.name.startswith("gaussian"):
            mech = entry.factory(epsilon, delta)
            return mech, float(mech.delta)
        return entry.factory(epsilon), float(delta) if delta is not None else PURE_DP_DELTA
    if entry.family == "control":
        if epsilon is not None:
            raise UserError("--epsilon does not apply to the broken controls: each has a fixed claim")
        mech = entry.factory()
        return mech, float(delta) if delta is not None else float(getattr(mech, "delta", PURE_DP_DELTA))
    mech = entry.factory(epsilon, delta)
    return mech, float(mech.erm.delta)
