"""``run membership`` of a model that already exists (a plugin returning ``{"kind": "model"}``,
:mod:`targets.trained_model`): no game is played. The split is checked blind first
(:func:`audit.stats.split_check.blind_split_check`), the model is queried on all its members and
non-members (:mod:`audit.membership.trained`), the attacks that need no retraining of it run, and a
one-run bound is given only when :func:`bound_allowed`. Sources: docs/references.md, "Blind split
check" and "One-run auditing".
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
from scipy import stats

from attacks.lira import lira_offline_scores, logit_confidence, resolve_variance
from attacks.membership import confidence_scores, loss_scores
from attacks.names import ATTACKS, REFERENCE_ATTACKS, expand_attacks
from attacks.rmia import A_GRID, choose_offline_a, label_probability, rmia_scores
from audit.errors import UserError
from audit.membership.bounds import ALPHA_GRID, empirical_points
from audit.membership.detail import MembershipDetail
from audit.membership.options import MembershipOptions
from audit.membership.trained import (
    TrainedQueries,
    check_trained_references,
    default_references,
    query_trained,
    trained_attacks,
)
from audit.results_header import ADD_REMOVE_RECORD, ResultsHeader, accountant
from audit.run_context import RunContext
from audit.stats.judgement import Judgement, judge
from audit.stats.lower_bound import VERDICT
from audit.stats.metrics import attack_metrics
from audit.stats.one_run.steinke import one_run_bound
from audit.stats.outcome import Ceiling, EpsilonBound, Outcome
from audit.stats.split_check import SplitCheck, auc_score_interval
from audit.stats.verdict import Family, percent
from audit.theory.last_iterate import last_iterate_reference
from targets.lm.contract import TrainedLM
from targets.plugins.loading import ModelPlugin
from targets.threads import thread_limit
from targets.trained_model import TrainedModel, load_trained_model

#: Guess fractions k+/m of the one-run bound on a trained model (fixed before any score is seen: a trained
#: model has no calibration games to choose them on, so every (attack, fraction) competes, Bonferroni-corrected).
TRAINED_GUESS_FRACTIONS = (0.01, 0.05, 0.2)
#: delta of the one-run bound on a trained model that makes no claim (as the registry's non-private targets).
NO_CLAIM_DELTA = 1e-5
#: RMIA offline parameter on a trained model with one reference model (no calibration game to choose it on)
#: unless --rmia-a is given: a = 1, p(x) = p_OUT(x) of the reference model.
TRAINED_RMIA_A = 1.0
#: Smallest two-sided binomial p-value of the member count under fair coins below which a stated
#: "independent-coins" membership is taken as contradicted by the counts (no epsilon bound then).
COIN_P_VALUE = 1e-3


def trained_rmia_a(q: TrainedQueries, given: float | None) -> tuple[float, str]:
    """RMIA's offline ``a`` on a trained model and where it comes from: ``--rmia-a`` when given; with 2 or more
    reference models, chosen on their calibration games (each reference model the target of the others, on
    pool records; :func:`attacks.rmia.choose_offline_a` over the records another model left out), never on
    the audited records; with one, :data:`TRAINED_RMIA_A`."""
    if given is not None:
        return float(given), "given"
    if q.reference_calibration_lp is None:
        return TRAINED_RMIA_A, "fixed (one reference model: no calibration game)"
    logp = label_probability(q.reference_calibration_lp, q.calibration_labels)
    pop = label_probability(q.reference_population_lp, q.population_labels)
    R, c = q.calibration_in.shape
    try:
        a, _ = choose_offline_a(logp, q.calibration_in, pop, with_out_only=True)
    except UserError:  # too few pool records for a game of each reference model
        return TRAINED_RMIA_A, f"fixed: the {c} pool records leave a calibration game without members or non-members"
    return a, (f"{R} reference games on {c} pool records (each reference model the target of the others), "
               f"largest mean AUC over a = {A_GRID[0]:g}, {A_GRID[1]:g}, ..., {A_GRID[-1]:g}")


def trained_scores(names: tuple[str, ...], q: TrainedQueries, lira_variance: str,
                   rmia_a: float | None) -> dict[str, np.ndarray]:
    """Each attack's scores (n,) on the audited records (higher = member): loss [Yeom et al. 2018],
    confidence [Salem et al. 2019], LiRA offline [Carlini et al. 2022, Eq. 4 and Sec. IV-C] against the
    reference models' OUT Gaussian, RMIA offline [Zarifzadeh et al. 2024, Eq. 5] with every reference
    model OUT and offline parameter ``rmia_a`` (None: :data:`TRAINED_RMIA_A`; :func:`trained_rmia_a`)
    (:mod:`audit.membership.trained`)."""
    out = {}
    ref_out = None if q.reference_lp is None else np.zeros(q.reference_lp.shape[:2], dtype=bool)
    for name in names:
        if name == "loss":
            out[name] = loss_scores(q.target_lp, q.labels)
        elif name == "confidence":
            out[name] = confidence_scores(q.target_lp)
        elif name == "lira_offline":
            out[name] = lira_offline_scores(logit_confidence(q.target_lp, q.labels),
                                            logit_confidence(q.reference_lp, q.labels), lira_variance)
        elif name == "rmia_offline":
            a = TRAINED_RMIA_A if rmia_a is None else rmia_a
            out[name] = rmia_scores(label_probability(q.target_lp, q.labels),
                                    label_probability(q.reference_lp, q.labels), ref_out,
                                    label_probability(q.population_lp, q.population_labels),
                                    label_probability(q.reference_population_lp, q.population_labels), a)
    return out


def bound_allowed(model: TrainedModel | TrainedLM, split: SplitCheck) -> tuple[bool, str]:
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
                   confidence: float) -> tuple[list[dict], Family]:
    """One-run bounds of every attack at every fraction of :data:`TRAINED_GUESS_FRACTIONS` ("in" guesses only),
    each at the Bonferroni-corrected confidence of their family (:class:`audit.stats.verdict.Family`)."""
    m = member.shape[0]
    family = Family(size=len(scores) * len(TRAINED_GUESS_FRACTIONS), confidence=confidence)
    bounds = []
    for name, s in scores.items():
        for frac in TRAINED_GUESS_FRACTIONS:
            bound = one_run_bound(s, member, max(1, int(round(frac * m))), 0, delta, family.member_confidence, VERDICT)
            bounds.append(bound.to_dict() | {"attack": name})
    return bounds, family


def attack_entry(scores: np.ndarray, member: np.ndarray, split: SplitCheck, confidence: float,
                 description: str) -> dict:
    """One attack's results.json entry on a trained model (classifier or language model): its metrics
    (:func:`audit.stats.metrics.attack_metrics`), a descriptive Hanley–McNeil interval of its AUC (records scored
    by one model, taken as independent draws), its empirical points, and the blind AUC beside it."""
    n1, n0 = int(member.sum()), int((~member).sum())
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    metrics = attack_metrics(scores, member, confidence)
    metrics["auc_ci"] = list(auc_score_interval(metrics["auc"], n1, n0, z))
    metrics["empirical_points"] = empirical_points(scores, member, max(1, len(scores) // 100), confidence)
    metrics["description"] = description
    metrics["blind_auc"] = split.blind_auc
    metrics["blind_auc_ci"] = list(split.blind_auc_ci)
    return metrics


def _trained_attack_entries(scores: dict[str, np.ndarray], q: TrainedQueries, split: SplitCheck, opts,
                            references: int, rmia_a: tuple[float, str] | None) -> dict[str, dict]:
    attacks_out = {}
    for name, s in scores.items():
        metrics = attack_entry(s, q.member, split, opts.confidence, ATTACKS[name])
        if name in REFERENCE_ATTACKS:
            metrics["reference_models"] = references
        if name == "lira_offline":
            metrics["lira_variance"] = resolve_variance(opts.lira_variance, references)
        if name == "rmia_offline":
            metrics["a"], metrics["a_chosen_on"] = rmia_a
        attacks_out[name] = metrics
    return attacks_out


def trained_judgement(bounds: list[dict], family: Family, claim, delta: float, why: str) -> Judgement:
    """The bounds of a trained model judged against its ``claim`` (:func:`audit.stats.judgement.judge`); with no
    bound (not allowed, ``why``), a ceiling and verdict that say why rather than "leaks at least epsilon = 0"."""
    judgement = judge(bounds, claim=claim, delta=delta, alpha=ALPHA_GRID, family=family)
    if bounds:
        return judgement
    return replace(judgement, ceiling=Ceiling(epsilon=None, text=f"no epsilon bound: {why}")).with_verdict(
        judgement.verdict.to_dict() | {"text": f"no epsilon bound ({why}); attack metrics only"})


def trained_tables(attacks_out: dict, split: SplitCheck) -> list[dict]:
    """The table of every attack's AUC beside the blind classifier's (a trained model's audit)."""
    lo, hi = split.blind_auc_ci
    return [{
        "title": "Attack AUC beside the blind classifier's",
        "columns": ["attack", "AUC", "AUC interval", "blind AUC (never sees the model)", "blind AUC interval",
                    "TPR at 0.1% FPR", "TPR at 1% FPR"],
        "rows": [[name, a["auc"], a.get("auc_ci"), split.blind_auc, [lo, hi], a["tpr_at_fpr"]["0.001"],
                  a["tpr_at_fpr"]["0.01"]] for name, a in attacks_out.items()],
        "caption": "An attack measures the model only by what it adds to the blind classifier, which sees the records "
                   "(features and labels, or texts) and never the model. When the blind interval excludes 0.5 the "
                   "split itself separates members from non-members, and an attack's AUC mixes that with the model's "
                   "leakage.",
    }]


def trained_meaning(model: TrainedModel | TrainedLM, split: SplitCheck, attacks_out: dict, best: dict | None,
                    delta: float) -> str:
    """One sentence on what the numbers mean for this model (a trained classifier or language model)."""
    name = max(attacks_out, key=lambda n: (attacks_out[n]["tpr_at_fpr"]["0.001"], attacks_out[n]["auc"]))
    a = attacks_out[name]
    if not split.passed:
        best_auc = max(x["auc"] for x in attacks_out.values())
        return (f"The blind classifier alone reaches AUC {split.blind_auc:.3f}: members and non-members differ as "
                f"records, so the attacks' AUCs (up to {best_auc:.3f}) cannot be read as this model's "
                f"leakage; audit it again on members and non-members drawn at random from one source.")
    tpr = a["tpr_at_fpr"]["0.001"]
    text = (f"The split looks random, so the attacks measure the model: the strongest at low false-positive "
            f"rates, {name}, reaches AUC {a['auc']:.3f} and identifies {tpr:.1%} of the {len(model.members)} "
            f"members at 0.1% false positives (chance: 0.1%).")
    if best is not None and float(best["epsilon"]) > 0:
        text += (f" With the stated fair coins, the model is not (epsilon, {delta:g})-DP for any epsilon below "
                 f"{float(best['epsilon']):.3g} (one-run bound, {percent(best['family_confidence'])} confidence).")
    elif best is not None:
        text += (f" With the stated fair coins the attacks certify no leakage (one-run bound epsilon >= 0 at "
                 f"{percent(best['family_confidence'])} confidence): weak attacks, not a proof of privacy.")
    return text


def run_trained_membership(opts: MembershipOptions, plugin: ModelPlugin) -> tuple[Path, Outcome]:
    """The membership audit of a trained model (``{"kind": "model"}``): blind split check first
    (:func:`audit.stats.split_check.blind_split_check` on members vs non-members, features and labels),
    then the attacks of :func:`trained_scores` on every member and non-member, and an epsilon lower
    bound only when :func:`bound_allowed`; no retraining of the model."""
    if opts.epsilon is not None or opts.delta is not None:
        raise UserError("--epsilon/--delta do not apply to a model target: its factory states the claim")
    if opts.canaries is not None or opts.shadows is not None:
        raise UserError("--canaries/--shadows do not apply to a trained model: it is audited on its own members and "
                        "non-members")
    model = load_trained_model(plugin, opts.data_dir)
    references = default_references(model) if opts.references is None else opts.references
    check_trained_references(model, references)
    names, skipped = trained_attacks(expand_attacks(tuple(opts.attacks)), references)
    ctx = RunContext(opts.out, "membership", model.name, seed=opts.seed, quiet=opts.quiet, device=opts.device)
    ctx.say(f"run directory: {ctx.paths.run_dir}")
    with ctx:
        t0 = time.perf_counter()
        with thread_limit(1):  # scikit-learn's OpenMP pool is far slower than one thread on a busy machine
            split = model.split_check(opts.confidence, opts.seed)
        ctx.timing["split_check_s"] = time.perf_counter() - t0
        ctx.say(split.summary)
        t0 = time.perf_counter()
        q = query_trained(model, references, opts.seed, opts.quiet)
        ctx.timing["queries_s"] = time.perf_counter() - t0
        rmia_a = trained_rmia_a(q, opts.rmia_a) if "rmia_offline" in names else None
        scores = trained_scores(names, q, opts.lira_variance, rmia_a[0] if rmia_a else None)
        attacks_out = _trained_attack_entries(scores, q, split, opts, references, rmia_a)
        allowed, why = bound_allowed(model, split)
        delta = model.delta if model.claim is not None else NO_CLAIM_DELTA
        bounds, family = trained_bounds(scores, q.member, delta, opts.confidence) if allowed else ([], Family(
            size=1, confidence=opts.confidence))
        judgement = trained_judgement(bounds, family, model.claim, delta, why)
        found = TrainedFindings(split=split, attacks=attacks_out, skipped=skipped, references=references,
                                judgement=judgement, allowed=allowed, why=why, delta=delta)
        results = _trained_results(opts, model, q, found)
        config_json = {"command": "run membership", "options": asdict(opts), "target": model.to_dict()}
        outcome = ctx.finish(results, config_json)
    return ctx.run_dir, outcome


@dataclass(frozen=True, kw_only=True)
class TrainedFindings:
    """What the audit of a trained model found (:func:`run_trained_membership`).

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
    attacks: dict
    skipped: dict
    references: int
    judgement: Judgement
    allowed: bool
    why: str
    delta: float


def _trained_results(opts: MembershipOptions, model: TrainedModel, q: TrainedQueries,
                     found: TrainedFindings) -> dict:
    """results.json of a trained-model audit (before the envelope): the common header
    (:func:`audit.results_header.results_header`), then the split check, the attacks, the game and the
    comparison with the claim."""
    split, attacks_out, delta, judged = found.split, found.attacks, found.delta, found.judgement.blocks()
    best = judged["best_lower_bound"]
    header = ResultsHeader(
        description=model.description, dataset=model.members.name, dataset_source=model.members.source,
        model={"arch": model.model_kind, "member_accuracy": q.accuracy["members"],
               "nonmember_accuracy": q.accuracy["nonmembers"]},
        neighbouring=ADD_REMOVE_RECORD, delta=delta, confidence=opts.confidence,
        primary_attack=best["attack"] if best else None, epsilon_theory=judged["epsilon_theory"],
        accountant=accountant(model.claim), params=model.params).to_dict()
    game = {"kind": "trained model", "members": len(model.members), "nonmembers": len(model.nonmembers),
            "records": f"the {len(model.members)} members and {len(model.nonmembers)} non-members the user gave "
                       f"({model.members.source}; {model.nonmembers.source})",
            "membership": model.membership, "membership_note": model.membership_note,
            "reference_models": found.references, "reference_records": q.reference_records}
    reference = last_iterate_reference(model.params, delta, ADD_REMOVE_RECORD, model.claim)
    detail = MembershipDetail(epsilon_bound=EpsilonBound(allowed=found.allowed, reason=found.why),
                              attacks_not_run=found.skipped, split_check=split, trained_model=model.to_dict(),
                              meaning=trained_meaning(model, split, attacks_out, best, delta))
    return header | judged | ({"last_iterate": reference} if reference else {}) | {
        "attacks": attacks_out, "tables": trained_tables(attacks_out, split), "game": game, "detail": detail,
        "quick": opts.quick}


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
