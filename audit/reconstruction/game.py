"""The n-candidate reconstruction game's statistics: success rates, Clopper–Pearson intervals family-wise
over the candidate counts, and the ReRo bound ``1 - f(1/n)`` of the claim [Hayes, Mahloujifar, Balle,
NeurIPS 2023; docs/references.md, "Reconstruction robustness" and "Clopper–Pearson bounds"]."""

from __future__ import annotations

from dataclasses import dataclass

from audit.errors import UserError
from audit.stats.outcome import Verdict
from audit.stats.rates import cp_lower, cp_upper
from audit.theory.claims import PrivacyClaim
from audit.theory.rero import rero_bound, uniform_prior_kappa


@dataclass
class GameResult:
    """One candidate count's outcome: ``successes`` out of ``runs`` rounds (each round: a target drawn
    uniformly among ``n`` candidates, one training run, the adversary's guess); ``twin_successes`` the same
    rounds against the non-private twin (None when not run); ``record_error_median`` and
    ``twin_record_error_median``: the median error of the reconstructed record, and the twin's, where the
    adapter measures it (None otherwise)."""

    n: int
    successes: int
    runs: int
    twin_successes: int | None = None
    record_error_median: float | None = None
    twin_record_error_median: float | None = None


def parse_candidate_counts(counts) -> tuple[int, ...]:
    """Distinct candidate counts, each >= 2, in increasing order."""
    values = sorted({int(c) for c in counts})
    if not values or values[0] < 2:
        raise UserError("--candidates needs counts of at least 2 (e.g. 10,100,1000): kappa = 1/n")
    return tuple(values)


def interval(successes: int, runs: int, alpha: float) -> tuple[float, float]:
    """Two-sided Clopper–Pearson interval at level ``1 - alpha`` (``alpha/2`` per side)."""
    return cp_lower(successes, runs, alpha / 2.0), cp_upper(successes, runs, alpha / 2.0)


def reconstruction_section(games: list[GameResult], claim: PrivacyClaim | None, confidence: float,
                           threat: str) -> dict:
    """``results["reconstruction"]``: per candidate count ``kappa = 1/n``, the success rate, its two-sided
    Clopper–Pearson interval with Bonferroni over the ``K`` counts (each at ``1 - (1 - confidence)/K``, so
    the ``K`` intervals hold together at ``confidence``), the ReRo bound of the claim, and the twin's rate."""
    alpha = (1.0 - confidence) / len(games)
    rows = []
    for g in games:
        kappa = uniform_prior_kappa(g.n)
        row = {"n_candidates": g.n, "kappa": kappa, "runs": g.runs, "successes": g.successes,
               "success": g.successes / g.runs, "success_ci": list(interval(g.successes, g.runs, alpha)),
               "rero_bound": float(rero_bound(claim, kappa)) if claim is not None else None}
        if g.twin_successes is not None:
            row["twin_success"] = g.twin_successes / g.runs
            row["twin_success_ci"] = list(interval(g.twin_successes, g.runs, alpha))
        errors = {"record_error_median": g.record_error_median, "twin_record_error_median": g.twin_record_error_median}
        rows.append(row | {key: value for key, value in errors.items() if value is not None})
    return {"threat": threat, "confidence": confidence, "family": f"Bonferroni over {len(games)} candidate counts",
            "points": rows}


def verdict(section: dict, claim: PrivacyClaim | None) -> Verdict:
    """``violation`` when a lower confidence limit exceeds the ReRo bound (the claim cannot hold: the family
    of intervals is valid at the run's confidence), else ``consistent``; ``no-claim`` without a claim."""
    points = section["points"]
    if claim is None:
        best = max(points, key=lambda p: p["success"])
        return Verdict(status="no-claim", text=f"no privacy claim; the attack reconstructs the record "
                                               f"{best['success']:.0%} of the time at kappa = 1/{best['n_candidates']}")
    above = [p for p in points if p["success_ci"][0] > p["rero_bound"]]
    if above:
        p = above[0]
        return Verdict(status="violation",
                       text=f"at kappa = 1/{p['n_candidates']} the attack succeeds {p['success']:.3f} of the time "
                            f"(lower limit {p['success_ci'][0]:.3f}) but the claim's ReRo bound is "
                            f"{p['rero_bound']:.3f}: the claim cannot hold")
    gaps = ", ".join(f"1/{p['n_candidates']}: {p['success']:.3f} vs {p['rero_bound']:.3f}" for p in points)
    return Verdict(status="consistent",
                   text=f"every success rate lies within the ReRo bound of the claim at {section['confidence']:.0%} "
                        f"family-wise confidence (success vs bound at kappa {gaps})")


def bound_meaning(section: dict, claim: PrivacyClaim | None, name: str) -> str:
    """One sentence on what the ReRo bound means for this target."""
    if claim is None:
        return f"{name} makes no privacy claim, so nothing bounds how often a record can be reconstructed."
    p = section["points"][0]
    return (f"Whatever an informed adversary does, it identifies a training record among {p['n_candidates']} "
            f"equally likely candidates at most {p['rero_bound']:.1%} of the time under this claim (chance "
            f"{p['kappa']:.1%}); the attack here reaches {p['success']:.1%}.")

