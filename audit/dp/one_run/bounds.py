"""The statistics of a one-run DP-SGD audit: M canaries of one training run, each in by its own fair
coin, one score each -> the results.json blocks of ``run dp --one-run`` (built-in targets,
:mod:`audit.dp.one_run.game`, and trainer plugins alike).

Rows, fixed before the scores are seen (the guess counts come from :class:`audit.stats.one_run.design.
OneRunDesign`, chosen by simulating the claimed mechanism, never from the audited coins or scores):

* ``one-run-fdp`` (role verdict, the family's one member, so it is computed at the family's
  confidence): Mahloujifar, Melis, Chaudhuri 2025's f-DP test of the guesses "in" for the ``k_pos``
  highest scores and "out" for the ``k_neg`` lowest (``k_neg = 0`` unless the design found two-sided
  guesses stronger; valid for the symmetric nulls tested, :mod:`audit.stats.one_run.fdp`), read as
  the largest rejected (eps, delta) — a valid bound; the same guesses test
  the claim's own tradeoff curve (``claim_rejected``: a valid violation at the same confidence, and
  implied by the bound exceeding the claim's epsilon, so the verdict's event is one test).
* ``one-run`` (role secondary): Steinke, Nasr, Jagielski 2023's p-value of the same guesses, valid
  at its own confidence. Kept outside the family: on the same one-sided guesses the two tests are
  within a few percent of each other (Steinke's ahead by up to ~1% at small M, the f-DP test ahead
  at large M, where Steinke's ``2 m delta`` term bites), so a family of two (each at 97.5%) costs
  more than its second member can win: on 20 games simulated under the claimed DP-SGD of
  dpsgd_logreg_mnist (q 0.1707, T 88) the f-DP row alone at 95% averaged 0.83/1.89/3.73 at eps
  2/4/8 (M 7,850/7,850/20,000) against 0.74/1.80/3.60 for the better of the two at 97.5%, and was
  at least as large in every game.
* ``one-run-fdp-gdp`` (estimate): the largest mu-GDP null the guesses reject (mu rigorous), its
  epsilon at delta read off a Gaussian tradeoff.

Sources: docs/references.md, "One-run auditing".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from audit.dp.game import ALPHA_GRID
from audit.errors import UserError
from audit.stats.judgement import Judgement, judge
from audit.stats.lower_bound import ESTIMATE, SECONDARY, VERDICT, LowerBound
from audit.stats.one_run.design import OneRunDesign
from audit.stats.one_run.fdp import FDP_GDP_ASSUMPTION, fdp_one_run_bound
from audit.stats.one_run.steinke import one_run_bound
from audit.stats.outcome import ExpectedPerfect, OneRun
from audit.stats.rates import as_scores_members
from audit.stats.verdict import Family
from audit.theory.checks import check_confidence, check_delta
from audit.theory.claims import PrivacyClaim

__all__ = ["OneRunResults", "one_run_results", "one_run_rows"]


def one_run_rows(scores: np.ndarray, included: np.ndarray, claim: PrivacyClaim | None, delta: float,
                 family: Family, design: OneRunDesign) -> list[LowerBound]:
    """The three rows of the module docstring (f-DP verdict row at the family's member confidence)."""
    fdp = fdp_one_run_bound(scores, included, design.k_pos, delta, family.member_confidence,
                            None if claim is None else claim.tradeoff, VERDICT, k_neg=design.k_neg)
    steinke = one_run_bound(scores, included, design.k_pos, design.k_neg, delta, family.confidence, SECONDARY)
    gdp = LowerBound(method="one-run-fdp-gdp", epsilon=fdp.details["epsilon_gdp"],
                     confidence=family.member_confidence, n=fdp.n, valid=False,
                     details={"mu_lb": fdp.details["mu_lb"], "k": fdp.details["k"], "v": fdp.details["v"],
                      "assumption": FDP_GDP_ASSUMPTION},
                     role=ESTIMATE)
    return [fdp, steinke, gdp]


def _check(scores: np.ndarray, included: np.ndarray, delta: float, confidence: float,
           design: OneRunDesign) -> tuple[np.ndarray, np.ndarray]:
    s, inc = as_scores_members(scores, included)
    check_delta(delta)
    check_confidence(confidence)
    if design.method != "fdp":
        raise UserError(f"the one-run verdict is the f-DP (eps, delta) test; the design is for {design.method}: "
                        "choose it with method='fdp'")
    if s.size != design.canaries:
        raise UserError(f"the design is for {design.canaries} canaries but {s.size} scores were given")
    if not np.all(np.isfinite(s)):
        raise UserError("one-run canary scores must be finite numbers")
    return s, inc


@dataclass(frozen=True, kw_only=True)
class OneRunResults:
    """What :func:`one_run_results` returns.

    Attributes:
        judgement: the bounds, the verdict and the family (:func:`audit.stats.judgement.judge`; its
            :meth:`~audit.stats.judgement.Judgement.blocks` are the results.json entries).
        one_run: the ``one_run`` block.
    """

    judgement: Judgement
    one_run: OneRun


def _one_run_block(s: np.ndarray, inc: np.ndarray, fdp: dict[str, Any], design: OneRunDesign) -> OneRun:
    """The ``one_run`` block (:func:`one_run_results`); ``claim_rejected`` null when no claim was tested."""
    expected = ExpectedPerfect(
        mean=design.expected_epsilon, sd=design.epsilon_sd, median=design.epsilon_median,
        range_5_95=list(design.epsilon_range), games=design.evaluations,
        text=(f"perfect-attack expectation: a perfect attack (the likelihood ratio of the claimed mechanism) with "
              f"these {s.size} canaries and {design.guesses} reaches epsilon >= {design.expected_epsilon:.3g} on "
              f"average (sd {design.epsilon_sd:.2g}, over {design.evaluations} games simulated under the claim)"))
    rejected = fdp.get("claim_rejected")
    return OneRun(canaries=int(s.size), included=int(inc.sum()), k_pos=design.k_pos, k_neg=design.k_neg,
                  correct=int(fdp["v"]), claim_rejected=rejected, design=design.to_dict(), expected_perfect=expected,
                  ceiling=float(fdp["ceiling"]),
                  ceiling_text=(f"all {design.k_pos + design.k_neg} guesses right would certify epsilon >= "
                                f"{float(fdp['ceiling']):.3g}"),
                  nulls=frozenset({"claim_rejected"} if rejected is None else ()))


def one_run_results(scores: np.ndarray, included: np.ndarray, claim: PrivacyClaim | None, delta: float,
                    confidence: float, design: OneRunDesign) -> OneRunResults:
    """The judgement of a one-run audit (the results.json blocks ``lower_bounds``, ``best_lower_bound``,
    ``ceiling``, ``verdict``, ``epsilon_theory``, ``tradeoff``, ``lower_bound_tradeoff``, ``family`` and
    ``best_estimate``: :func:`audit.stats.judgement.judge`) and its ``one_run`` block.

    ``scores`` (M,): one score per canary, higher = "in" (any fixed function of what the threat
    model shows); ``included`` (M,): the canaries' fair coins; ``claim``: the claimed mechanism
    (None: no claim); ``confidence``: family-wise, of the verdict (one member: the f-DP row);
    ``design``: the guess counts, fixed before the training by simulating the claim
    (:func:`audit.stats.one_run.design.choose_one_run_design`, ``method="fdp"``).

    ``one_run``: canaries, included, k_pos, k_neg, correct (right guesses of both kinds), design (how the
    guess counts were chosen), expected_perfect (mean, sd, median, 5%-95% range of the f-DP bound a
    perfect LLR attack reaches with this M under the claim, from the design's simulations) and the
    ceiling (every guess right) with its ``ceiling_text``. Sources: docs/references.md, "One-run auditing".
    """
    s, inc = _check(scores, included, delta, confidence, design)
    family = Family(size=1, confidence=confidence)
    rows = one_run_rows(s, inc, claim, delta, family, design)
    judgement = judge([b.block() for b in rows], claim=claim, delta=delta, alpha=ALPHA_GRID, family=family)
    return OneRunResults(judgement=judgement, one_run=_one_run_block(s, inc, rows[0].details, design))
