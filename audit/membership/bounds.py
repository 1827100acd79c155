"""The one-run statistics of the membership game: the bound of a method at given guess counts
(:func:`one_run`: Steinke, Nasr, Jagielski 2023; Mahloujifar, Melis, Chaudhuri 2025), the method and
guess counts chosen on calibration games that never involve the target (:func:`choose_guesses`), and
the empirical operating points drawn beside the tradeoff curves (:func:`empirical_points`).
docs/references.md, section "One-run auditing"."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from audit.stats.lower_bound import LowerBound
from audit.stats.one_run.fdp import fdp_one_run_bound
from audit.stats.one_run.steinke import one_run_bound
from audit.stats.outcome import ErrorPoint
from audit.stats.rates import rate_point

#: The alpha (FPR) grid of the tradeoff curves written to results.json.
ALPHA_GRID = np.unique(np.concatenate([np.logspace(-5, 0, 181), [1e-3, 1e-2, 0.1, 0.5]]))

#: One-run methods tried on the calibration games (audit.stats.one_run.steinke, audit.stats.one_run.fdp).
ONE_RUN_METHODS = ("one-run", "one-run-fdp")
#: Fractions of the m canaries tried as the number of "in" guesses k+ (k- is 0 or k+).
GUESS_FRACTIONS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5)


@dataclass(frozen=True, kw_only=True)
class Guesses:
    """The one-run method and its guess counts (chosen on calibration games, :func:`choose_guesses`).

    Attributes:
        method: ``one-run`` or ``one-run-fdp``.
        k_pos: "in" guesses.
        k_neg: "out" guesses (0: one-sided).
        shadow_mean_epsilon: the mean bound of these guesses over the calibration games they were chosen on
            (None: not chosen there).
    """

    method: str
    k_pos: int
    k_neg: int
    shadow_mean_epsilon: float | None = None


def one_run(guesses: Guesses, scores: np.ndarray, members: np.ndarray, delta: float, confidence: float,
            claim_tradeoff=None, role: str = "") -> LowerBound:
    """The one-run bound of ``guesses.method``: ``one-run`` (Steinke et al. 2023, k+ "in" and k- "out"
    guesses) or ``one-run-fdp`` (Mahloujifar et al. 2025, the same k+ "in" and k- "out" guesses; with the
    claim's tradeoff curve it also tests the claim itself)."""
    if guesses.method == "one-run-fdp":
        return fdp_one_run_bound(scores, members, guesses.k_pos, delta, confidence, claim_tradeoff, role,
                                 k_neg=guesses.k_neg)
    return one_run_bound(scores, members, guesses.k_pos, guesses.k_neg, delta, confidence, role)


def choose_guesses(shadow_scores: np.ndarray, shadow_in: np.ndarray, delta: float, confidence: float) -> Guesses:
    """The method and guess counts (k+, k-) maximising the mean one-run bound over the calibration
    games (shadow or reference games, never the target's): every method of :data:`ONE_RUN_METHODS`
    at every fraction of :data:`GUESS_FRACTIONS`, two-sided guesses for Steinke et al.'s bound."""
    m = shadow_scores.shape[1]
    best = None
    for method in ONE_RUN_METHODS:
        for frac in GUESS_FRACTIONS:
            k_pos = max(1, int(round(frac * m)))
            for k_neg in ((0, k_pos) if method == "one-run" else (0,)):
                if k_pos + k_neg > m:
                    continue
                eps = [one_run(Guesses(method=method, k_pos=k_pos, k_neg=k_neg), s, i, delta, confidence).epsilon
                       for s, i in zip(shadow_scores, shadow_in, strict=True)]
                mean = float(np.mean(eps))
                if best is None or mean > best.shadow_mean_epsilon:
                    best = Guesses(method=method, k_pos=k_pos, k_neg=k_neg, shadow_mean_epsilon=mean)
    return best


def empirical_points(scores: np.ndarray, member: np.ndarray, k_pos: int,
                     confidence: float) -> tuple[ErrorPoint, ...]:
    """(FPR, FNR) of the rule "score >= t means member" at a few thresholds, with two-sided
    Clopper–Pearson intervals: at the chosen k+ guesses and at the top 10% / 50% of scores."""
    order = np.sort(scores)[::-1]
    points = []
    n_pos, n_neg = int(member.sum()), int((~member).sum())
    for label, k in ((f"top {k_pos} (one-run guesses)", k_pos), ("top 10%", max(1, len(scores) // 10)),
                     ("top 50%", len(scores) // 2)):
        threshold = order[k - 1]
        guess = scores >= threshold
        fpr, fpr_ci = rate_point(int((guess & ~member).sum()), n_neg, confidence)
        fnr, fnr_ci = rate_point(int((~guess & member).sum()), n_pos, confidence)
        points.append(ErrorPoint(label=label, threshold=float(threshold), fpr=fpr, fnr=fnr, fpr_ci=fpr_ci,
                                 fnr_ci=fnr_ci))
    return tuple(points)
