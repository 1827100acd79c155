"""The flagship audit: membership inference on a trained target with the one-run game.

Steps: split the data and toss the canary coins (:mod:`audit.membership.game`); train the target once, the
shadow models, and the reference models of LiRA and RMIA (vectorised, in cached chunks on the run's
executor, :mod:`audit.executors`; each of the three cached on its own, so that a run with another
attack reuses them and never retrains); score every canary with each
attack (:func:`attacks.membership.run_attacks`: shadow, LiRA and RMIA online/offline, loss,
confidence); report each attack's AUC, TPR at low FPR and membership advantage against the DP
bound on it (:mod:`audit.stats.metrics`); turn
each attack's guesses into a one-run epsilon lower bound [Steinke, Nasr, Jagielski 2023] and
compare it with the target's theoretical epsilon (PLD accountant); write results.json,
config.json and the HTML report.

Validity of the bound: the one-run bound needs the numbers of "in" / "out" guesses (k+, k-) to be
fixed without looking at the target's canary labels. We choose them on calibration games that
never involve the target — the shadow games (shadow models play the same game on disjoint data)
for loss, confidence and shadow, and leave-one-reference-out games for LiRA and RMIA — by maximising the
mean one-run bound over those games, and then apply them unchanged to the target. The shadow
attack's own shadow scores are leave-one-shadow-out so the choice is not biased by scoring a
shadow with a classifier trained on it.

A model that already exists plays no game: :func:`run_trained_membership` audits it without retraining it,
on its records (a plugin returning ``{"kind": "model"}``; what is particular to them,
:mod:`audit.membership.trained`) or on its texts (a language model: a built-in LM target, or a plugin returning
``{"kind": "lm"}``; :mod:`audit.membership.texts`), the blind split check first, then the attacks and an epsilon
bound only when the coins and the check allow it (:mod:`audit.membership.trained_results`). Defaults
by target: the one-run preset (6,000 sparse canaries) for a target that claims DP; mislabelled canaries
with more reference models for a non-private one (:data:`GAME_SIZES`, :func:`game_preset`).
"""

from __future__ import annotations

import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from attacks.lira import resolve_variance
from attacks.membership import AttackInputs, AttackScores, run_attacks
from attacks.names import ATTACK_SPECS, ATTACKS, LIRA_ATTACKS, REFERENCE_ATTACKS, check_references, expand_attacks
from audit.choices import CRAFTED_CANARIES, DEFAULT_MEMBERSHIP_CANARY, NONPRIVATE_MEMBERSHIP_CANARY
from audit.executors import TrainingCall
from audit.membership.bounds import ALPHA_GRID, Guesses, choose_guesses, empirical_points, one_run
from audit.membership.crafted import canary_crafter
from audit.membership.game import CanaryGame, build_canary_game, check_canary_game
from audit.membership.options import MembershipOptions
from audit.membership.subjects import MembershipSubject, membership_subject
from audit.membership.texts import TextAudit, text_audit
from audit.membership.trained import RecordAudit, record_audit
from audit.membership.trained_results import (
    NO_CLAIM_DELTA,
    TrainedFindings,
    bound_allowed,
    trained_bounds,
    trained_judgement,
    trained_summary_lines,
)
from audit.results_header import ADD_REMOVE_RECORD, ResultsHeader, accountant
from audit.run_context import RunContext
from audit.run_results import RunResults
from audit.stats.judgement import judge
from audit.stats.lower_bound import SECONDARY, VERDICT
from audit.stats.metrics import attack_metrics, dp_advantage_bound
from audit.stats.one_run.design import CanaryMechanism
from audit.stats.one_run.final_model import last_iterate_expectation
from audit.stats.outcome import AttackMetrics, Bound, LastIterate, Outcome, Table
from audit.stats.split_check import SplitCheck, blind_split_check
from audit.stats.text_split_check import text_split_check
from audit.stats.verdict import Family, percent
from audit.theory.checks import check_confidence
from targets.catalogue import is_language_model, is_plugin, trained_target
from targets.plugins.loading import ModelPlugin, load_plugin
from targets.threads import thread_limit
from targets.trained_model import TrainedSubject

#: Default and --quick game sizes: (canaries m, shadow models K, LiRA/RMIA reference models R); a user's
#: trainer plugin (training sets of at most audit.membership.subjects.MAX_TRAIN records) plays
#: with fewer canaries by default. "default" is the one-run preset of a DP target; "nonprivate" answers
#: "how much does this model leak" (with NONPRIVATE_MEMBERSHIP_CANARY): measured on nonprivate_mnist
#: (seed 0), 500 mislabelled canaries with 8 reference models give LiRA online TPR 0.209 at 0.1% FPR (4
#: references: 0.063, RMIA offline 0.150; 1,000 canaries: 0.031, the model cannot memorise as many; 1,000
#: natural records with 8 references: 0.015).
GAME_SIZES = {"default": (6000, 2, 4), "nonprivate": (500, 2, 8), "quick": (200, 3, 4), "plugin": (500, 2, 4)}


def game_preset(opts: MembershipOptions, plugin: object) -> tuple[str, str]:
    """(canary kind, :data:`GAME_SIZES` key) of a run: the one-run preset for a target that claims DP
    (and for trainer plugins), mislabelled canaries and the "nonprivate" sizes for a non-private registry
    target; ``--canary`` and ``--quick`` override."""
    private = plugin is not None or trained_target(opts.target).with_privacy(opts.epsilon, opts.delta).private
    canary = opts.canary or (DEFAULT_MEMBERSHIP_CANARY if private else NONPRIVATE_MEMBERSHIP_CANARY)
    preset = "quick" if opts.quick else "plugin" if plugin is not None else "default" if private else "nonprivate"
    return canary, preset


class TrainedModels(NamedTuple):
    """The models of one membership game: the target, the shadow models and (LiRA, RMIA) the
    reference models (None without a reference attack)."""

    target: Any
    shadows: Any
    references: Any


def _accuracy(log_probs: np.ndarray, y: np.ndarray) -> float:
    """The fraction of records whose most probable class is their label (NaN without records)."""
    return float((log_probs.argmax(axis=-1) == y).mean()) if y.size else float("nan")


def game_sizes(opts: MembershipOptions, attack_names: list[str], preset: str) -> tuple[int, int, int]:
    """(canaries m, shadow models, reference models) of the game: the options over ``preset`` of
    :data:`GAME_SIZES`; no reference models unless an attack needs them."""
    m_default, k_default, r_default = GAME_SIZES[preset]
    use_references = any(name in REFERENCE_ATTACKS for name in attack_names)
    references = (opts.references or r_default) if use_references else 0
    check_references(attack_names, references)
    return opts.canaries or m_default, opts.shadows or k_default, references


def run_membership(opts: MembershipOptions) -> tuple[Path, Outcome]:
    """Run the membership audit described by ``opts``; returns (run directory, outcome). A model that exists
    (a plugin whose factory returns ``{"kind": "model", ...}`` or ``{"kind": "lm", ...}``) and a built-in
    language model are audited without a game (:func:`run_trained_membership`)."""
    attack_names = expand_attacks(tuple(opts.attacks))
    resolve_variance(opts.lira_variance, 0)  # validates the name
    check_confidence(opts.confidence)
    if is_language_model(opts.target):  # a built-in language model, audited on its texts
        return run_trained_membership(opts)
    plugin = load_plugin(opts.target) if is_plugin(opts.target) else None
    if isinstance(plugin, ModelPlugin):
        return run_trained_membership(opts, plugin)
    canary, preset = game_preset(opts, plugin)
    opts = replace(opts, canary=canary)
    m, shadows, references = game_sizes(opts, attack_names, preset)
    t0 = time.perf_counter()
    target = membership_subject(opts, m, plugin)
    calibration_s = time.perf_counter() - t0
    check_canary_game(target.data, target.n_train, m, shadows, opts.canary, references=references)
    ctx = RunContext(opts.out, "membership", target.name, seed=opts.seed, quiet=opts.quiet, device=opts.device)
    ctx.say(f"run directory: {ctx.run_dir}")
    with ctx:
        ctx.timing["calibration_s"] = calibration_s
        if target.theory_line is not None:
            ctx.say(target.theory_line)
        with ctx.stage("canaries"):  # crafted canaries: designed on a public model before any coin is tossed
            crafter = canary_crafter(target, ctx.paths, opts.seed, ctx.say) if opts.canary in CRAFTED_CANARIES else None
            game = build_canary_game(target.data, target.n_train, m, shadows, opts.canary, opts.seed,
                                     references=references, crafter=crafter)
        # seeds: target, then shadows, then reference models (a prefix of the same stream, so adding
        # reference models leaves the target's and the shadows' seeds unchanged)
        seeds = np.random.SeedSequence(opts.seed).generate_state(1 + shadows + references).tolist()
        with ctx.stage("training"):
            models = train_game_models(ctx, target, game, seeds, shadows, references)
        with ctx.stage("attacks"):
            inputs, model_info = attack_inputs(target, game, models, attack_names)
            scored = run_attacks(attack_names, inputs, opts.lira_variance, opts.rmia_a)
        results = membership_results(opts, target, game, model_info, attack_names, scored, references)
        config_json = {"command": "run membership", "options": asdict(opts), "seeds": seeds} | target.config
        outcome = ctx.finish(results, config_json)
    return ctx.run_dir, outcome


def run_trained_membership(opts: MembershipOptions, plugin: ModelPlugin | None = None) -> tuple[Path, Outcome]:
    """The membership audit of a model that exists (or that a built-in LM target trains once), on its records or
    its texts: ``plugin`` a factory's ``{"kind": "model"}`` or ``{"kind": "lm"}`` dict, or None for the built-in
    language model ``opts.target``. What is particular to records or texts is their audit
    (:func:`audit.membership.trained.record_audit`, :func:`audit.membership.texts.text_audit`). The blind split
    check first (:func:`split_check`), then the model's preparation (a built-in LM's fine-tuning), the attacks
    that need no retraining of it, and an epsilon lower bound only when
    :func:`audit.membership.trained_results.bound_allowed`; returns (run directory, outcome)."""
    audit: RecordAudit | TextAudit = (text_audit(opts, plugin) if plugin is None or is_language_model(plugin)
                                      else record_audit(opts, plugin))
    subject = audit.subject
    ctx = RunContext(opts.out, "membership", subject.name, seed=opts.seed, quiet=opts.quiet, device=opts.device,
                     stages=audit.stages)
    with ctx:
        ctx.say(f"run directory: {ctx.paths.run_dir}")
        with ctx.stage("split_check", audit.split_line()), thread_limit(1):  # one thread: sklearn's pool is slow
            split = split_check(subject, opts.confidence, opts.seed)
        ctx.say(split.summary)
        audit.prepare(ctx)
        scored = audit.score(ctx, split, opts)
        allowed, why = bound_allowed(subject, split)
        delta = subject.delta if subject.claim is not None else NO_CLAIM_DELTA
        bounds, family = (trained_bounds(scored.scores, scored.member, delta, opts.confidence) if allowed
                          else ([], Family(size=1, confidence=opts.confidence)))
        judgement = trained_judgement(bounds, family, subject.claim, delta, why)
        found = TrainedFindings(split=split, attacks=scored.attacks, skipped=scored.skipped,
                                references=audit.references, judgement=judgement, allowed=allowed, why=why, delta=delta)
        results = audit.results(opts, scored, found)
        config_json = {"command": "run membership", "options": asdict(opts), "target": subject.to_dict()}
        outcome = ctx.finish(results, config_json)
    return ctx.run_dir, outcome


def split_check(subject: TrainedSubject, confidence: float, seed: int) -> SplitCheck:
    """The blind split check of ``subject``'s members against its non-members, on what the target supplies
    (docs/references.md, "Blind split check"): labelled records, features and labels
    (:func:`audit.stats.split_check.blind_split_check`), or texts
    (:func:`audit.stats.text_split_check.text_split_check`)."""
    members, nonmembers = subject.members, subject.nonmembers
    if subject.records == "texts":
        return text_split_check(members, nonmembers, confidence=confidence, seed=seed)
    return blind_split_check(members.X, nonmembers.X, members.y, nonmembers.y, confidence=confidence, seed=seed)


def train_game_models(ctx: RunContext, target: MembershipSubject, game: CanaryGame, seeds: list[int], shadows: int,
                      references: int) -> TrainedModels:
    """Train (or reuse from the cache) the target, the shadow models and the reference models of the
    game, one training call each, so that adding an attack (and its reference models) reuses the
    others' cache entries."""
    calls = [TrainingCall("target model", game.target_mask[None], seeds[:1]),
             TrainingCall(f"{shadows} shadow models", game.shadow_masks, seeds[1:1 + shadows])]
    if references:
        calls.append(TrainingCall(f"{references} reference models", game.reference_masks, seeds[1 + shadows:]))
    target_params, shadow_params, *rest = target.fit(ctx.paths, game.data, calls, game.appended_rows)
    return TrainedModels(target_params, shadow_params, rest[0] if references else None)


def attack_inputs(target: MembershipSubject, game: CanaryGame, models: TrainedModels,
                  attack_names: list[str]) -> tuple[AttackInputs, dict]:
    """What the attacks see — every model's log-probabilities on its canaries (and, for RMIA, on a
    population no model trained on) — and the target model's accuracies for results.json."""
    y, X = game.data.y, game.data.X
    tc, sc = game.target_canaries, game.shadow_canaries
    target_lp = target.log_probs(models.target, X[tc])[0]
    shadow_lp = target.log_probs(models.shadows, X[sc])
    reference_lp = target.log_probs(models.references, X[tc]) if models.references is not None else None
    population = {}
    if any(ATTACK_SPECS[name].population for name in attack_names):  # like the canaries, never trained
        pop_X = X[game.population]
        population = {"population_labels": y[game.population],
                      "population_lp": target.log_probs(models.target, pop_X)[0],
                      "reference_population_lp": target.log_probs(models.references, pop_X),
                      "shadow_population_lp": target.log_probs(models.shadows, pop_X)}
    model_info = target_model_info(target, game, models.target, target_lp)
    inputs = AttackInputs(n_classes=target.data.n_classes, labels=y[tc], target_lp=target_lp, shadow_labels=y[sc],
                          shadow_lp=shadow_lp, shadow_in=game.shadow_in, reference_lp=reference_lp,
                          reference_in=game.reference_in, **population)
    return inputs, model_info


def target_model_info(target: MembershipSubject, game: CanaryGame, target_params, target_lp: np.ndarray) -> dict:
    """results.json's ``model``: the architecture, the target's accuracy on the test records and on
    its natural (non-canary) training records, and the fraction of its member canaries it fits."""
    data, y, tc = target.data, game.data.y, game.target_canaries
    natural = np.flatnonzero(game.target_mask & ~np.isin(np.arange(len(y)), tc))
    eval_index = np.concatenate([game.test_index, natural])
    eval_lp = target.log_probs(target_params, data.X[eval_index])[0]
    n_test = game.test_index.shape[0]
    return {
        "arch": target.model,
        "test_accuracy": _accuracy(eval_lp[:n_test], data.y[game.test_index]),
        "train_accuracy": _accuracy(eval_lp[n_test:], data.y[eval_index[n_test:]]),
        "canaries_fitted": (float((target_lp.argmax(1) == y[tc])[game.target_in].mean())
                            if game.target_in.any() else None),
    }


def membership_results(opts: MembershipOptions, target: MembershipSubject, game: CanaryGame, model_info: dict,
                       attack_names: list[str], scored: dict[str, AttackScores], references: int) -> RunResults:
    """The typed results of a membership run: each attack's one-run bound and metrics
    (in the order of ``attack_names``), the primary attack's verdict against the claim, the advantage
    table and the game."""
    claim, delta, data = target.claim, target.delta, target.data
    adv_bound = dp_advantage_bound(claim.epsilon(delta), delta) if claim is not None else None
    # the guess counts of every attack, and which attack is primary, are chosen on the calibration
    # games (never on the target's canary coins), so the primary bound alone decides the verdict
    guesses = {name: choose_guesses(scored[name].calibration, scored[name].calibration_in, delta, opts.confidence)
               for name in attack_names}
    primary = max(attack_names, key=lambda name: guesses[name].shadow_mean_epsilon)
    attacks_out, bounds = {}, []
    for name in attack_names:
        sc, chosen, is_primary = scored[name], guesses[name], name == primary
        bounds.append(attack_bound(name, sc, game, chosen, claim, delta, opts.confidence, is_primary))
        attacks_out[name] = attack_entry(name, sc, game, chosen, opts, adv_bound, references, is_primary)
    judgement = judge(bounds, claim=claim, delta=delta, alpha=ALPHA_GRID,
                      family=Family(size=1, confidence=opts.confidence))
    header = ResultsHeader(
        description=target.description, dataset=data.name, dataset_source=data.source, model=model_info,
        neighbouring=ADD_REMOVE_RECORD, delta=delta, confidence=opts.confidence, primary_attack=primary,
        epsilon_theory=judgement.epsilon_theory, accountant=accountant(claim), params=target.params)
    reference = final_model_reference(target, game.m, guesses[primary], opts) if claim is not None else None
    return RunResults(
        header=header, judgement=judgement,
        last_iterate=reference,
        attacks=attacks_out, tables=(advantage_table(attacks_out, adv_bound),),
        game=game.summary(), quick=opts.quick)


#: Games simulated for the final-model perfect-attack expectation (about 1 s for 6,000 canaries).
FINAL_MODEL_GAMES = 100


def final_model_reference(target: MembershipSubject, m: int, chosen: Guesses,
                          opts: MembershipOptions) -> LastIterate | None:
    """results.json's ``last_iterate`` of a DP-SGD target: the last-iterate heuristic of its training
    (:meth:`audit.stats.outcome.LastIterate.of`) and, as ``expected_bound``, what a perfect attack
    on a linear model's final iterate expects with this game's M canaries and the primary attack's guesses
    (:func:`audit.stats.one_run.final_model.last_iterate_expectation`); None for other targets."""
    reference = LastIterate.of(target.params, target.delta, ADD_REMOVE_RECORD, target.claim)
    if reference is None:
        return None
    mech = CanaryMechanism(reference.sample_rate, reference.noise_multiplier, reference.steps)
    method = "fdp" if chosen.method == "one-run-fdp" else "steinke"
    expected = last_iterate_expectation(mech, m, (chosen.k_pos, chosen.k_neg), method, target.delta,
                                        opts.confidence, FINAL_MODEL_GAMES, opts.seed)
    return replace(reference, expected_bound=expected | {
        "text": f"a perfect attack on a linear model's final iterate, with these {m} canaries and the primary "
                f"attack's guesses, over {FINAL_MODEL_GAMES} simulated games"})


def attack_bound(name: str, scores: AttackScores, game: CanaryGame, chosen: Guesses, claim, delta: float,
                 confidence: float, primary: bool) -> Bound:
    """The one-run bound of one attack on the target's canaries with the method and guess counts
    chosen on its calibration games; the primary attack's decides the verdict, the others are secondary."""
    bound = one_run(chosen, scores.target, game.target_in, delta,
                    confidence, None if claim is None else claim.tradeoff, VERDICT if primary else SECONDARY)
    entry = bound.block(name)
    return replace(entry, details=dict(entry.details) | {
        "guesses_chosen_on": f"{scores.calibrated_on} (mean bound {chosen.shadow_mean_epsilon:.3f})"})


def attack_entry(name: str, scores: AttackScores, game: CanaryGame, chosen: Guesses, opts: MembershipOptions,
                 adv_bound: float | None, references: int, primary: bool) -> AttackMetrics:
    """results.json's ``attacks[name]``: AUC, ROC, TPR at low FPR and advantage of one attack on the
    target (:func:`audit.stats.metrics.attack_metrics`), its empirical operating points, the DP bound
    on its advantage (written as null without a claim) and its parameters."""
    metrics = attack_metrics(scores.target, game.target_in, opts.confidence)
    return replace(
        metrics, empirical_points=empirical_points(scores.target, game.target_in, chosen.k_pos, opts.confidence),
        description=ATTACKS[name], calibrated_on=scores.calibrated_on, primary=primary,
        advantage_dp_bound=adv_bound,
        advantage_ci_low_vs_dp_bound=(None if adv_bound is None else
                                      "below" if metrics.advantage_ci[0] <= adv_bound else "above"),
        nulls=frozenset({"advantage_dp_bound", "advantage_ci_low_vs_dp_bound"} if adv_bound is None else ()),
        lira_variance=resolve_variance(opts.lira_variance, references) if name in LIRA_ATTACKS else None,
        reference_models=references if name in REFERENCE_ATTACKS else None, **scores.parameters)


def advantage_table(attacks_out: dict[str, AttackMetrics], adv_bound: float | None) -> Table:
    """The table of every attack's membership advantage against the DP bound on it (descriptive)."""
    return Table(
        title="Membership advantage against the DP bound",
        columns=["attack", "AUC", "TPR at 0.1% FPR", "TPR at 1% FPR", "advantage", "advantage interval",
                 "DP bound on advantage", "interval's lower end vs bound (descriptive)"],
        rows=[[name, a.auc, a.tpr_at_fpr["0.001"], a.tpr_at_fpr["0.01"], a.advantage, a.advantage_ci,
               "none (non-private)" if adv_bound is None else adv_bound,
               "n/a" if adv_bound is None else a.advantage_ci_low_vs_dp_bound]
              for name, a in attacks_out.items()],
        caption="Advantage = max over thresholds of TPR - FPR (Yeom et al. 2018). An (eps, delta)-DP target "
                "allows at most (e^eps - 1 + 2 delta)/(e^eps + 1). Descriptive, not a test: the interval "
                "(DKW bands, simultaneous over thresholds) assumes independent scores, but the canaries of "
                "this one-run game share one trained model, and it is not corrected for the number of "
                "attacks; only the primary attack's one-run bound decides the verdict.",
    )


def summary_lines(run_dir: Path, outcome: Outcome) -> list[str]:
    """The three-line summary printed after a run, plus where the report is.

    Args:
        run_dir: the run's directory.
        outcome: the run's outcome.

    Returns:
        The lines.
    """
    if outcome.detail.split_check is not None:
        return trained_summary_lines(run_dir, outcome)
    theory = outcome.epsilon_theory
    p = outcome.audited.params or {}
    if theory is None:
        line1 = "theory:    none (non-private target)"
    elif "noise_multiplier" not in p:  # a plugin's claim
        line1 = f"theory:    epsilon = {theory:.3f} at delta = {outcome.delta:g} ({outcome.audited.accountant})"
    else:
        line1 = (f"theory:    epsilon = {theory:.3f} at delta = {outcome.delta:g} "
                 f"(PLD accountant; sigma = {p['noise_multiplier']:.3f}, q = {p['sample_rate']:.4f}, T = {p['steps']})")
    best = outcome.best_lower_bound
    if best is None:
        line2 = "empirical: no valid lower bound"
    else:
        d = best.details or {}
        ceiling = outcome.judged.ceiling.epsilon if outcome.judged.ceiling else None
        line2 = (f"empirical: epsilon >= {best.epsilon:.3f} ({best.method} bound, primary attack "
                 f"{best.attack}, {percent(best.family_confidence)} confidence, "
                 f"{d['v']}/{d.get('r', d.get('k'))} correct guesses on {best.n} canaries; ceiling (every "
                 f"guess right) {ceiling:.3g}) -> {outcome.verdict.status}")
    parts = [f"{name} AUC {a.auc:.3f}, TPR@1%FPR {a.tpr_at_fpr['0.01']:.3f}, "
             f"TPR@0.1%FPR {a.tpr_at_fpr['0.001']:.3f}" for name, a in (outcome.attacks or {}).items()]
    line3 = "attacks:   " + "; ".join(parts)
    reference = [outcome.judged.last_iterate.console_line()] if outcome.judged.last_iterate is not None else []
    return [f"report:    {run_dir / 'report.html'}", line1, line2, *reference, line3]
