"""Comparing empirical lower bounds with a target's claim: the shared part of every runner's results.

Given the lower bounds an audit produced and the claim it audits, :func:`compare_with_claim` picks
the best statistically valid bound, evaluates the theoretical epsilon at the audit's delta, and
returns the ``results.json`` blocks ``epsilon_theory``, ``tradeoff``, ``best_lower_bound``,
``lower_bound_tradeoff`` and ``verdict``. A lower bound above the theoretical epsilon is evidence —
at the bound's confidence — that the implementation or its accounting is broken [Jagielski,
Ullman, Oprea 2020, Sec. 4]; a bound below it proves nothing about the model being safe.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from audit.accounting import ApproxDPClaim, PrivacyClaim
from audit.bounds import cp_lower, cp_upper

#: Relative slack when comparing a bound with the theory (numerical noise of accountants).
_TOLERANCE = 1e-9


def rate_point(k: int, n: int, confidence: float) -> tuple[float, list[float]]:
    """Empirical rate k/n with its two-sided Clopper–Pearson interval at ``confidence``."""
    alpha = 1 - confidence
    return k / n, [cp_lower(k, n, alpha / 2), cp_upper(k, n, alpha / 2)]


def best_valid_bound(bounds: Sequence[dict]) -> dict | None:
    """The largest statistically valid lower bound (``valid`` true) among ``LowerBound.to_dict()`` rows."""
    valid = [b for b in bounds if b.get("valid")]
    return max(valid, key=lambda b: float(b["epsilon"])) if valid else None


def claim_verdict(best: dict | None, theory: float | None, delta: float) -> dict[str, str]:
    """``results["verdict"]``: ``violation`` when the best valid bound ``best`` exceeds the theoretical
    epsilon ``theory`` (up to accountant noise), ``consistent`` otherwise, ``no-claim`` without a claim."""
    lb = float(best["epsilon"]) if best else 0.0
    if theory is None:
        return {"status": "no-claim",
                "text": f"non-private target: the audit proves it leaks at least epsilon = {lb:.3f} "
                        f"(delta = {delta:g}) about the audited records"}
    if best and lb > theory * (1 + _TOLERANCE) + _TOLERANCE:
        return {"status": "violation",
                "text": f"empirical lower bound {lb:.3f} exceeds the theoretical epsilon {theory:.3f} "
                        f"({best['method']}, {float(best['confidence']):.0%} confidence): the implementation "
                        f"or its privacy accounting is broken"}
    return {"status": "consistent",
            "text": f"empirical lower bound {lb:.3f} <= theoretical epsilon {theory:.3f}: no violation "
                    f"found (a low bound does not prove the target leaks less than claimed)"}


def compare_with_claim(bounds: Sequence[dict], claim: PrivacyClaim | None, delta: float,
                       alpha: np.ndarray) -> dict[str, Any]:
    """The results.json blocks that compare ``bounds`` with ``claim`` at ``delta``.

    ``alpha`` is the FPR grid of the tradeoff curves. For a non-private target (``claim`` None)
    the verdict is ``no-claim`` and states how much leakage the audit proved.
    """
    best = best_valid_bound(bounds)
    if claim is None:
        return {"epsilon_theory": None, "tradeoff": None, "best_lower_bound": best, "lower_bound_tradeoff": None,
                "verdict": claim_verdict(best, None, delta)}
    theory = float(claim.epsilon(delta))
    lb = float(best["epsilon"]) if best else 0.0
    lb_curve = ({"epsilon": lb, "delta": delta, "alpha": alpha, "beta": ApproxDPClaim(lb, delta).tradeoff(alpha)}
                if best and lb > 0 else None)
    return {"epsilon_theory": theory, "tradeoff": {"alpha": alpha, "beta": claim.tradeoff(alpha)},
            "best_lower_bound": best, "lower_bound_tradeoff": lb_curve, "verdict": claim_verdict(best, theory, delta)}
