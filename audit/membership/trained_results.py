"""What ``run membership`` concludes of a model that exists, on records or texts
(:func:`audit.membership.runner.run_trained_membership`): whether an epsilon bound is allowed
(:func:`bound_allowed`), the one-run bounds (:func:`trained_bounds`) and their judgement, each attack's entry
beside the blind AUC, the table, the sentence on what it means and the console summary. Sources:
docs/references.md, "Blind split check" and "One-run auditing".
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from scipy import stats

from audit.membership.bounds import ALPHA_GRID, empirical_points
from audit.stats.judgement import Judgement, judge
from audit.stats.lower_bound import VERDICT
from audit.stats.metrics import attack_metrics
from audit.stats.one_run.steinke import one_run_bound
from audit.stats.outcome import AttackMetrics, BestBound, Bound, Ceiling, Outcome, Table
from audit.stats.split_check import SplitCheck, auc_score_interval
from audit.stats.verdict import Family, percent
from targets.trained_model import TrainedSubject

#: Guess fractions k+/m of the one-run bound on a trained model (fixed before any score is seen: a trained
#: model has no calibration games to choose them on, so every (attack, fraction) competes, Bonferroni-corrected).
TRAINED_GUESS_FRACTIONS = (0.01, 0.05, 0.2)
#: delta of the one-run bound on a trained model that makes no claim (as the registry's non-private targets).
NO_CLAIM_DELTA = 1e-5
#: Smallest two-sided binomial p-value of the member count under fair coins below which a stated
#: "independent-coins" membership is taken as contradicted by the counts (no epsilon bound then).
COIN_P_VALUE = 1e-3


def bound_allowed(model: TrainedSubject, split: SplitCheck) -> tuple[bool, str]:
    """Whether an epsilon lower bound may be printed for ``model`` (a trained classifier, or a language model
    with its text blind split check), and why (not).

    The one-run bound [Steinke, Nasr, Jagielski 2023, Thm. 3.1; docs/references.md, "One-run auditing"]
    treats the m = members + non-members records as m independent fair coins tossed before training
    and the model as trained once: exactly a trained model whose members were chosen by independent
    coins, so it applies here with no retraining. Clopper–Pearson on the records' FPR/FNR (as
    :mod:`audit.stats.thresholds` does over independent training runs) would not: the records share one
    model, so they are not independent trials of one test. Without independent coins (a seeded split of
    fixed size, or an unstated choice) the theorem's premise fails and no bound is given. The blind
    check is a precondition too: a split it flags contradicts the stated coins. Validity is unconditional:
    P(bound wrong and check passed) <= P(bound wrong) <= 1 - confidence.
    """
    if not split.passed:
        return False, ("the blind split check tells members from non-members, so the split is not random and no "
                       "epsilon bound is valid")
    if not model.allows_epsilon_bound:
        return False, (f"membership is {model.membership!r}, not 'independent-coins': the one-run bound needs each "
                       f'record included by its own fair coin; state "membership": "independent-coins" if it was')
    n1, n0 = len(model.members), len(model.nonmembers)
    p = stats.binomtest(n1, n1 + n0, 0.5).pvalue
    if p < COIN_P_VALUE:
        return False, (f"{n1} members and {n0} non-members are unlikely under fair coins (binomial p = {p:.2g}); "
                       f"the one-run bound needs fair coins (probability 1/2 each)")
    return True, "membership by independent fair coins (stated) and the blind split check passed"


def trained_bounds(scores: dict[str, np.ndarray], member: np.ndarray, delta: float,
                   confidence: float) -> tuple[list[Bound], Family]:
    """One-run bounds of every attack at every fraction of :data:`TRAINED_GUESS_FRACTIONS` ("in" guesses only),
    each at the Bonferroni-corrected confidence of their family (:class:`audit.stats.verdict.Family`)."""
    m = member.shape[0]
    family = Family(size=len(scores) * len(TRAINED_GUESS_FRACTIONS), confidence=confidence)
    bounds = []
    for name, s in scores.items():
        for frac in TRAINED_GUESS_FRACTIONS:
            bound = one_run_bound(s, member, max(1, int(round(frac * m))), 0, delta, family.member_confidence, VERDICT)
            bounds.append(bound.block(name))
    return bounds, family


def attack_entry(scores: np.ndarray, member: np.ndarray, split: SplitCheck, confidence: float,
                 description: str) -> AttackMetrics:
    """One attack's results.json entry on a trained model (classifier or language model): its metrics
    (:func:`audit.stats.metrics.attack_metrics`), a descriptive Hanley–McNeil interval of its AUC (records scored
    by one model, taken as independent draws), its empirical points, and the blind AUC beside it."""
    n1, n0 = int(member.sum()), int((~member).sum())
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    metrics = attack_metrics(scores, member, confidence)
    return replace(metrics, auc_ci=list(auc_score_interval(metrics.auc, n1, n0, z)),
                   empirical_points=empirical_points(scores, member, max(1, len(scores) // 100), confidence),
                   description=description, blind_auc=split.blind_auc, blind_auc_ci=list(split.blind_auc_ci))


def trained_judgement(bounds: list[Bound], family: Family, claim, delta: float, why: str) -> Judgement:
    """The bounds of a trained model judged against its ``claim`` (:func:`audit.stats.judgement.judge`); with no
    bound (not allowed, ``why``), a ceiling and verdict that say why rather than "leaks at least epsilon = 0"."""
    judgement = judge(bounds, claim=claim, delta=delta, alpha=ALPHA_GRID, family=family)
    if bounds:
        return judgement
    return replace(judgement, ceiling=Ceiling(epsilon=None, text=f"no epsilon bound: {why}")).with_verdict(
        replace(judgement.verdict, text=f"no epsilon bound ({why}); attack metrics only"))


def trained_table(attacks_out: dict[str, AttackMetrics], split: SplitCheck) -> Table:
    """The table of every attack's AUC beside the blind classifier's (a trained model's audit)."""
    lo, hi = split.blind_auc_ci
    return Table(
        title="Attack AUC beside the blind classifier's",
        columns=["attack", "AUC", "AUC interval", "blind AUC (never sees the model)", "blind AUC interval",
                 "TPR at 0.1% FPR", "TPR at 1% FPR"],
        rows=[[name, a.auc, a.auc_ci, split.blind_auc, [lo, hi], a.tpr_at_fpr["0.001"], a.tpr_at_fpr["0.01"]]
              for name, a in attacks_out.items()],
        caption="An attack measures the model only by what it adds to the blind classifier, which sees the records "
                "(features and labels, or texts) and never the model. When the blind interval excludes 0.5 the "
                "split itself separates members from non-members, and an attack's AUC mixes that with the model's "
                "leakage.",
    )


def trained_meaning(model: TrainedSubject, split: SplitCheck, attacks_out: dict[str, AttackMetrics],
                    best: BestBound | None, delta: float) -> str:
    """One sentence on what the numbers mean for this model (a trained classifier or language model)."""
    name = max(attacks_out, key=lambda n: (attacks_out[n].tpr_at_fpr["0.001"], attacks_out[n].auc))
    a = attacks_out[name]
    if not split.passed:
        best_auc = max(x.auc for x in attacks_out.values())
        return (f"The blind classifier alone reaches AUC {split.blind_auc:.3f}: members and non-members differ as "
                f"records, so the attacks' AUCs (up to {best_auc:.3f}) cannot be read as this model's "
                f"leakage; audit it again on members and non-members drawn at random from one source.")
    tpr = a.tpr_at_fpr["0.001"]
    text = (f"The split looks random, so the attacks measure the model: the strongest at low false-positive "
            f"rates, {name}, reaches AUC {a.auc:.3f} and identifies {tpr:.1%} of the {len(model.members)} "
            f"members at 0.1% false positives (chance: 0.1%).")
    if best is not None and float(best.epsilon) > 0:
        text += (f" With the stated fair coins, the model is not (epsilon, {delta:g})-DP for any epsilon below "
                 f"{float(best.epsilon):.3g} (one-run bound, {percent(best.family_confidence)} confidence).")
    elif best is not None:
        text += (f" With the stated fair coins the attacks certify no leakage (one-run bound epsilon >= 0 at "
                 f"{percent(best.family_confidence)} confidence): weak attacks, not a proof of privacy.")
    return text


class Scored(NamedTuple):
    """What the attacks found on a trained model's members and non-members (records or texts): each attack's
    ``scores`` and results.json entry (``attacks``), the membership of the audited records (``member``: members
    first), the attacks not run and why (``skipped``), and what the results read besides (``detail``: a trained
    classifier's :class:`audit.membership.trained.TrainedQueries`, a language model's
    :class:`attacks.lm_membership.TextInputs`)."""

    scores: dict[str, np.ndarray]
    member: np.ndarray
    attacks: dict[str, AttackMetrics]
    skipped: dict[str, str]
    detail: Any


@dataclass(frozen=True, kw_only=True)
class TrainedFindings:
    """What the audit of a trained model found, on records or texts
    (:func:`audit.membership.runner.run_trained_membership`).

    Attributes:
        split: the blind split check.
        attacks: each attack's entry (``attacks``).
        skipped: the attacks not run, and why.
        references: the reference models.
        judgement: the bounds judged against the claim (:func:`audit.stats.judgement.judge`).
        allowed: whether the audit may bound epsilon.
        why: why (not).
        delta: the delta the epsilons are read at.
    """

    split: SplitCheck
    attacks: dict[str, AttackMetrics]
    skipped: dict
    references: int
    judgement: Judgement
    allowed: bool
    why: str
    delta: float


def trained_summary_lines(run_dir: Path, outcome: Outcome) -> list[str]:
    """The summary of a trained-model audit: the split check first (its warning when it failed), the claim's
    ``theory:`` line, the bound, the attacks, what it means and the ``verdict:`` line.

    Args:
        run_dir: the run's directory.
        outcome: the run's outcome (with its ``split_check``).

    Returns:
        The lines.
    """
    split = outcome.detail.split_check
    lo, hi = split.blind_auc_ci
    head = (f"split:     blind AUC {split.blind_auc:.3f} [{lo:.3f}, {hi:.3f}] -> "
            + ("passed (consistent with a random split)" if split.passed else
               "FAILED: members and non-members differ as records; attack AUCs below measure the split, not "
               "the model, and no epsilon bound is given"))
    game = outcome.game
    best = outcome.best_lower_bound
    eps = outcome.epsilon_theory
    theory = ("theory:    no claim (the model states none)" if eps is None else
              f"theory:    epsilon = {eps:.3f} at delta = {outcome.delta:g}; {outcome.audited.accountant}")
    if best is None:
        bound = outcome.detail.epsilon_bound
        line2 = f"empirical: no epsilon bound ({bound.reason if bound else None})"
    else:
        d = best.details or {}
        line2 = (f"empirical: epsilon >= {best.epsilon:.3f} (one-run bound, attack {best.attack}, "
                 f"{percent(best.family_confidence)} confidence over {best.family_size} bounds, "
                 f"{d['v']}/{d.get('r', d.get('k'))} correct guesses on {best.n} records)")
    parts = [f"{name} AUC {a.auc:.3f} (blind {a.blind_auc:.3f}), TPR@0.1%FPR {a.tpr_at_fpr['0.001']:.3f}"
             for name, a in (outcome.attacks or {}).items()]
    report = f"report:    {run_dir / 'report.html'}"
    return [head if not split.passed else report, report if not split.passed else head,
            f"records:   {game.members} members, {game.nonmembers} non-members; {game.reference_records}",
            theory, line2, "attacks:   " + "; ".join(parts), f"meaning:   {outcome.detail.meaning}",
            f"verdict:   {outcome.verdict.status}: {outcome.verdict.text}"]
