"""The one place the bounds of an audit become the typed verdict block of ``results.json``: the competing
bounds with their roles and statements, the best valid bound of the family, the ceiling, the claim's and the
best bound's tradeoff curves, the verdict, the best estimate and the family (:class:`Judgement`, built by
:func:`judge` and nothing else). Every runner (dp many-run and one-run, a plugin's one-run, mechanism,
membership, a trained model) calls :func:`judge` and writes :meth:`Judgement.blocks` into its outcome.

The verdict, the roles and the family's confidence split are those of :mod:`audit.stats.verdict`
(``docs/references.md``, "Verdicts").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from audit.stats.lower_bound import VERDICT
from audit.stats.outcome import BestBound, Bound, Ceiling, Curve, Family, Verdict
from audit.stats.verdict import audit_ceiling, best_valid_bound, claim_verdict, epsilon_value
from audit.theory.claims import ApproxDPClaim, PrivacyClaim

__all__ = ["Judgement", "judge"]


@dataclass(frozen=True, kw_only=True)
class Judgement:
    """The verdict block of an outcome, typed (the ``results.json`` keys of the same names).

    Attributes:
        epsilon_theory: the claim's epsilon at the audit's delta (None without a claim).
        tradeoff: the claim's tradeoff curve (None without a claim).
        lower_bounds: every bound, with its role and statement.
        best_lower_bound: the best valid bound of the verdict's family (None when none competed).
        lower_bound_tradeoff: the best bound's (epsilon, delta) tradeoff curve.
        ceiling: what a perfect attack in the same game could certify.
        verdict: the verdict.
        best_estimate: the largest bound of all roles (an estimate included), labelled as such.
        family: the bounds that competed and their confidence.
    """

    epsilon_theory: float | None
    tradeoff: Curve | None
    lower_bounds: tuple[Bound, ...]
    best_lower_bound: BestBound | None
    lower_bound_tradeoff: Curve | None
    ceiling: Ceiling | None
    verdict: Verdict
    best_estimate: Bound | None
    family: Family

    def for_attack(self, attack: str) -> Judgement:
        """The same judgement with every bound (and the best) read from the scores of ``attack``.

        Args:
            attack: the attack's name (``threat/canary``).

        Returns:
            The judgement.
        """
        return replace(self, lower_bounds=tuple(replace(b, attack=attack) for b in self.lower_bounds),
                       best_lower_bound=(None if self.best_lower_bound is None else
                                         replace(self.best_lower_bound, attack=attack)))

    def with_verdict(self, verdict: Verdict) -> Judgement:
        """The same judgement with another verdict (a runner's flag or a combined check).

        Args:
            verdict: the verdict.

        Returns:
            The judgement.
        """
        return replace(self, verdict=verdict)

    def blocks(self, *, estimate: bool = False, family: bool = False) -> dict[str, Any]:
        """The outcome's entries of this judgement (the objects ``results.json`` holds).

        Args:
            estimate: include ``best_estimate`` (the dp kind reports it).
            family: include ``family`` (the one-run dp audits report it).

        Returns:
            ``epsilon_theory``, ``tradeoff``, ``lower_bounds``, ``best_lower_bound``, ``lower_bound_tradeoff``,
            ``ceiling``, ``verdict`` (None where absent), and the optional two.
        """
        def block(value):
            return None if value is None else value.to_dict()
        out = {"epsilon_theory": self.epsilon_theory, "tradeoff": block(self.tradeoff),
               "lower_bounds": [b.to_dict() for b in self.lower_bounds],
               "best_lower_bound": block(self.best_lower_bound),
               "lower_bound_tradeoff": block(self.lower_bound_tradeoff), "ceiling": block(self.ceiling),
               "verdict": self.verdict.to_dict()}
        if estimate:
            out["best_estimate"] = block(self.best_estimate)
        if family:
            out["family"] = self.family.to_dict()
        return out


def judge(bounds: Sequence[Bound], *, claim: PrivacyClaim | None, delta: float, alpha: np.ndarray,
          family: Family) -> Judgement:
    """The judgement of an audit's bounds against its claim: the best valid bound of the family
    (:func:`audit.stats.verdict.best_valid_bound`), the ceiling (what a perfect attack in the same game could
    certify, :func:`audit.stats.verdict.audit_ceiling`), the verdict (:func:`audit.stats.verdict.claim_verdict`;
    a competing test that rejected the claim's own tradeoff curve makes it a violation), the claim's and the
    best bound's tradeoff curves on the FPR grid ``alpha``, and the best estimate (the largest bound of every
    role, labelled). For a non-private target (``claim`` None) the verdict is ``no-claim`` and states how much
    leakage the audit proved.

    Args:
        bounds: every bound (:meth:`audit.stats.lower_bound.LowerBound.block`, with ``attack`` where known).
        claim: the claim (None: a non-private target).
        delta: the delta the epsilons are read at.
        alpha: the FPR grid of the tradeoff curves.
        family: the bounds that compete for the verdict (size and family-wise confidence).

    Returns:
        The typed judgement.
    """
    bounds = tuple(bounds)
    best = best_valid_bound(bounds, family)
    certified = epsilon_value(best.epsilon) if best else 0.0
    ceiling = audit_ceiling(bounds)
    rejecting = next((b for b in bounds if b.role == VERDICT and (b.details or {}).get("claim_rejected")), None)
    theory = None if claim is None else float(claim.epsilon(delta))
    among = [b for b in bounds if b.epsilon is not None]
    return Judgement(
        epsilon_theory=theory, tradeoff=None if claim is None else Curve(alpha=alpha, beta=claim.tradeoff(alpha)),
        lower_bounds=bounds, best_lower_bound=best,
        lower_bound_tradeoff=(Curve(epsilon=certified, delta=delta, alpha=alpha,
                                    beta=ApproxDPClaim(certified, delta).tradeoff(alpha))
                              if claim is not None and best and 0 < certified < math.inf else None),
        ceiling=None if ceiling is None else Ceiling(
            epsilon=ceiling, text=f"ceiling (every guess right: a perfect attack in this game, same observations, "
                                  f"same confidence): epsilon >= {ceiling:.3g}; this audit certified {certified:.3g}"),
        verdict=claim_verdict(best, theory, delta, ceiling, rejecting),
        best_estimate=max(among, key=lambda b: epsilon_value(b.epsilon), default=None),
        family=family)
