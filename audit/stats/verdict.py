"""The verdict: the best statistically valid bound of an audit against its claim, at the
confidence the audit prints.

Family-wise confidence. An audit often produces several valid bounds (one per attack, or several
methods); reporting the largest of k bounds that each hold at 1 - alpha would hold only at
1 - k alpha. Every runner therefore fixes, before it looks at the target's data, the *family* of
bounds that compete for the reported best one (:class:`Family`: its size k and the confidence c
the user asked for), computes each competing bound at ``1 - (1 - c)/k`` (Bonferroni), and marks
it with role ``verdict``; the largest of them then holds at c. Bounds derived from one
simultaneous confidence event (e.g. the Clopper–Pearson and GDP rows of one threshold family,
:mod:`audit.stats.thresholds`) count once. Rows with role ``secondary`` (valid alone, outside the
family) and ``estimate`` (assumption-based) are reported and never decide the verdict.

A best bound above the theoretical epsilon is then evidence, at confidence c, that the
implementation or its accounting is broken [Jagielski, Ullman, Oprea 2020, Sec. 4]; a bound below
it proves nothing about the model being safe. Sources: docs/references.md, "Verdicts".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from audit.stats.lower_bound import VERDICT
from audit.stats.outcome import BestBound, Bound, Family, Verdict  # the family is the results block (one class)

__all__ = ["Family", "best_valid_bound", "audit_ceiling", "claim_verdict", "epsilon_value"]

#: Relative slack when comparing a bound with the theory (numerical noise of accountants).
TOLERANCE = 1e-9


def percent(confidence: float) -> str:
    """A confidence as printed: ``95%``, ``97.5%`` (never rounded to a level it does not hold at)."""
    return f"{100 * float(confidence):.4g}%"


def epsilon_value(x: Any) -> float:
    """A bound's epsilon as a float (``"inf"`` strings from JSON and None -> -inf for None)."""
    if x is None:
        return -math.inf
    return float(x)


def _competing(bounds: Sequence[Bound]) -> list[Bound]:
    return [b for b in bounds if b.role == VERDICT]


def best_valid_bound(bounds: Sequence[Bound], family: Family) -> BestBound | None:
    """The largest bound with role ``verdict``, with the family's size and confidence.

    Args:
        bounds: every bound (:meth:`audit.stats.lower_bound.LowerBound.block`).
        family: the bounds that compete.

    Returns:
        The best bound, or None when none competed.

    Raises:
        ValueError: a competing bound was not computed at the family's member confidence (a runner bug that
            would make the printed confidence false).
    """
    competing = _competing(bounds)
    for b in competing:
        if abs(float(b.confidence) - family.member_confidence) > 1e-12:
            raise ValueError(f"{b.method} bound computed at confidence {b.confidence}, but the family of "
                             f"{family.size} needs {family.member_confidence}")
    if not competing:
        return None
    best = max(competing, key=lambda b: epsilon_value(b.epsilon))
    return BestBound.of(best, family)


def audit_ceiling(bounds: Sequence[Bound]) -> float | None:
    """What a perfect attack could certify in the game of the verdict's bounds: the largest
    ``details["ceiling"]`` of the competing bounds, each computed with that bound's own method (e.g. all
    one-run guesses right, or every run separated, at the bound's confidence), so it is never below
    a competing bound. None when a competing bound with an epsilon states no ceiling."""
    ceilings = [(b.details or {}).get("ceiling") for b in _competing(bounds) if b.epsilon is not None]
    if not ceilings or any(c is None for c in ceilings):
        return None
    return max(float(c) for c in ceilings)


def claim_verdict(best: BestBound | None, theory: float | None, delta: float, ceiling: float | None = None,
                  claim_rejected: Bound | None = None) -> Verdict:
    """``results["verdict"]``: ``violation`` when the best valid bound ``best`` exceeds the theoretical
    epsilon ``theory`` (up to accountant noise) or a competing test rejected the claim's own tradeoff
    curve (``claim_rejected``: that bound), ``consistent`` otherwise, ``no-claim`` without a claim."""
    lb = epsilon_value(best.epsilon) if best else 0.0
    confidence = (f"{percent(best.family_confidence)} confidence, family of {best.family_size}"
                  if best else "")
    possible = f" of a possible {ceiling:.3g}" if ceiling is not None else ""
    if theory is None:
        found = (f"the audit proves it leaks at least epsilon = {lb:.3f}{possible}" if lb > 0 else
                 f"the attacks certify no leakage (epsilon >= 0{possible}; weak attacks, not a proof of privacy)")
        return Verdict(status="no-claim",
                       text=f"non-private target: {found} (delta = {delta:g}{', ' + confidence if best else ''}) "
                            f"about the audited records")
    if claim_rejected is not None and not (best and lb > theory * (1 + TOLERANCE) + TOLERANCE):
        return Verdict(status="violation",
                       text=f"the {claim_rejected.method} test rejects the claim's own tradeoff curve ({confidence}; "
                            f"empirical lower bound {lb:.3f}{possible}, theoretical epsilon {theory:.3f}): the "
                            f"implementation or its privacy accounting is broken")
    if best and lb > theory * (1 + TOLERANCE) + TOLERANCE:
        return Verdict(status="violation",
                       text=f"empirical lower bound {lb:.3f}{possible} exceeds the theoretical epsilon {theory:.3f} "
                            f"({best.method}, {confidence}): the implementation or its privacy accounting "
                            f"is broken")
    return Verdict(status="consistent",
                   text=f"empirical lower bound {lb:.3f}{possible} <= theoretical epsilon {theory:.3f}: no violation "
                        f"found (a low bound does not prove the target leaks less than claimed)")
