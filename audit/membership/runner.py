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

A model that already exists (a plugin returning ``{"kind": "model"}``, :mod:`targets.trained_model`) plays no
game: :func:`run_trained_membership` checks the split blind first, queries the model on all its members and
non-members (:mod:`audit.membership.trained`), runs the attacks that need no retraining of it, and gives a
one-run bound only when :func:`bound_allowed`. Defaults by target: the one-run preset (6,000 sparse
canaries) for a target that claims DP; mislabelled canaries with more reference models for a non-private
one (:data:`GAME_SIZES`, :func:`game_preset`).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
from scipy import stats

from attacks.lira import lira_offline_scores, logit_confidence, resolve_variance
from attacks.membership import AttackInputs, confidence_scores, loss_scores, run_attacks
from attacks.names import ATTACKS, LIRA_ATTACKS, REFERENCE_ATTACKS, RMIA_ATTACKS, check_references, expand_attacks
from attacks.rmia import label_probability, rmia_scores
from audit.choices import DEFAULT_MEMBERSHIP_CANARY, NONPRIVATE_MEMBERSHIP_CANARY
from audit.errors import UserError
from audit.executors import TrainingCall
from audit.membership.game import build_canary_game
from audit.membership.subjects import membership_subject
from audit.membership.trained import (
    TrainedQueries,
    check_trained_references,
    default_references,
    query_trained,
    trained_attacks,
)
from audit.run_context import RunContext
from audit.run_options import CommonRunOptions
from audit.stats.lower_bound import SECONDARY, VERDICT, LowerBound
from audit.stats.metrics import attack_metrics, dp_advantage_bound
from audit.stats.one_run import one_run_bound
from audit.stats.one_run_fdp import fdp_one_run_bound
from audit.stats.rates import rate_point
from audit.stats.split_check import SplitCheck, auc_score_interval
from audit.stats.verdict import Family, compare_with_claim
from audit.theory.checks import check_confidence
from targets.plugins import ModelPlugin, is_plugin_spec, load_plugin
from targets.registry import get_target
from targets.threads import thread_limit
from targets.trained_model import TrainedModel, load_trained_model

#: One-run methods tried on the calibration games (audit.stats.one_run, audit.stats.one_run_fdp).
ONE_RUN_METHODS = ("one-run", "one-run-fdp")
#: Fractions of the m canaries tried as the number of "in" guesses k+ (k- is 0 or k+).
GUESS_FRACTIONS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5)
#: The alpha (FPR) grid of the tradeoff curves written to results.json.
ALPHA_GRID = np.unique(np.concatenate([np.logspace(-5, 0, 181), [1e-3, 1e-2, 0.1, 0.5]]))


@dataclass(frozen=True)
class MembershipOptions(CommonRunOptions):
    """Everything that determines a membership run (stored in config.json)."""

    canary: str | None = None
    canaries: int | None = None
    shadows: int | None = None
    attacks: tuple[str, ...] = tuple(ATTACKS)
    references: int | None = None
    lira_variance: str = "auto"
    rmia_a: float | None = None
    max_memory: str | None = None


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
    private = plugin is not None or get_target(opts.target).with_privacy(opts.epsilon, opts.delta).private
    canary = opts.canary or (DEFAULT_MEMBERSHIP_CANARY if private else NONPRIVATE_MEMBERSHIP_CANARY)
    preset = "quick" if opts.quick else "plugin" if plugin is not None else "default" if private else "nonprivate"
    return canary, preset


def one_run(method: str, scores: np.ndarray, members: np.ndarray, k_pos: int, k_neg: int, delta: float,
            confidence: float, claim_tradeoff=None, role: str = "") -> LowerBound:
    """The one-run bound of ``method``: ``one-run`` (Steinke et al. 2023, k+ "in" and k- "out"
    guesses) or ``one-run-fdp`` (Mahloujifar et al. 2025, k+ one-sided guesses; with the claim's
    tradeoff curve it also tests the claim itself)."""
    if method == "one-run-fdp":
        return fdp_one_run_bound(scores, members, k_pos, delta, confidence, claim_tradeoff, role)
    return one_run_bound(scores, members, k_pos, k_neg, delta, confidence, role)


def choose_guesses(shadow_scores: np.ndarray, shadow_in: np.ndarray, delta: float, confidence: float) -> dict:
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
                eps = [one_run(method, s, i, k_pos, k_neg, delta, confidence).epsilon
                       for s, i in zip(shadow_scores, shadow_in, strict=True)]
                mean = float(np.mean(eps))
                if best is None or mean > best["shadow_mean_epsilon"]:
                    best = {"method": method, "k_pos": k_pos, "k_neg": k_neg, "shadow_mean_epsilon": mean}
    return best


def empirical_points(scores: np.ndarray, member: np.ndarray, k_pos: int, confidence: float) -> list[dict]:
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
        points.append({"label": label, "threshold": float(threshold), "fpr": fpr, "fnr": fnr,
                       "fpr_ci": fpr_ci, "fnr_ci": fnr_ci})
    return points


def _accuracy(log_probs: np.ndarray, y: np.ndarray) -> float:
    return float((log_probs.argmax(axis=-1) == y).mean()) if y.size else float("nan")


def run_membership(opts: MembershipOptions) -> tuple[Path, dict]:
    """Run the membership audit described by ``opts``; returns (run directory, results). A plugin whose
    factory returns ``{"kind": "model", ...}`` is a trained model, audited without retraining it
    (:func:`run_trained_membership`)."""
    attack_names = expand_attacks(tuple(opts.attacks))
    resolve_variance(opts.lira_variance, 0)  # validates the name
    check_confidence(opts.confidence)
    plugin = load_plugin(opts.target) if is_plugin_spec(opts.target) else None
    if isinstance(plugin, ModelPlugin):
        return run_trained_membership(opts, plugin)
    canary, preset = game_preset(opts, plugin)
    opts = replace(opts, canary=canary)
    m_default, k_default, r_default = GAME_SIZES[preset]
    m = opts.canaries or m_default
    shadows = opts.shadows or k_default
    use_references = any(name in REFERENCE_ATTACKS for name in attack_names)
    references = (opts.references or r_default) if use_references else 0
    check_references(attack_names, references)
    t0 = time.perf_counter()
    target = membership_subject(opts, m, plugin)
    calibration_s = time.perf_counter() - t0
    data = target.data
    game = build_canary_game(data, target.n_train, m, shadows, opts.canary, opts.seed, references=references)
    ctx = RunContext(opts.out, "membership", target.name, seed=opts.seed, quiet=opts.quiet, device=opts.device)
    paths, say, timing = ctx.paths, ctx.say, ctx.timing
    say(f"run directory: {paths.run_dir}")
    with ctx:
        claim = target.claim
        timing["calibration_s"] = calibration_s
        if target.theory_line is not None:
            say(target.theory_line)

        # seeds: target, then shadows, then reference models (a prefix of the same stream, so adding
        # reference models leaves the target's and the shadows' seeds unchanged)
        seeds = np.random.SeedSequence(opts.seed).generate_state(1 + shadows + references).tolist()
        t0 = time.perf_counter()
        calls = [TrainingCall("target model", game.target_mask[None], seeds[:1]),
                 TrainingCall(f"{shadows} shadow models", game.shadow_masks, seeds[1:1 + shadows])]
        if references:
            calls.append(TrainingCall(f"{references} reference models", game.reference_masks, seeds[1 + shadows:]))
        # one training call each: adding an attack (and its reference models) reuses the others' cache entries
        target_params, shadow_params, *rest = target.fit(paths, game, calls)
        reference_params = rest[0] if references else None
        timing["training_s"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        y = game.data.y
        tc, sc = game.target_canaries, game.shadow_canaries
        target_lp = target.log_probs(target_params, game.data.X[tc])[0]
        shadow_lp = target.log_probs(shadow_params, game.data.X[sc])
        reference_lp = target.log_probs(reference_params, game.data.X[tc]) if references else None
        population = {}
        if any(name in RMIA_ATTACKS for name in attack_names):  # RMIA's population: like the canaries, never trained
            pop_X = game.data.X[game.population]
            population = {"population_labels": y[game.population],
                          "population_lp": target.log_probs(target_params, pop_X)[0],
                          "reference_population_lp": target.log_probs(reference_params, pop_X),
                          "shadow_population_lp": target.log_probs(shadow_params, pop_X)}
        natural = np.flatnonzero(game.target_mask & ~np.isin(np.arange(len(y)), tc))
        eval_index = np.concatenate([game.test_index, natural])
        eval_lp = target.log_probs(target_params, data.X[eval_index])[0]
        n_test = game.test_index.shape[0]
        model_info = {
            "arch": target.model,
            "test_accuracy": _accuracy(eval_lp[:n_test], data.y[game.test_index]),
            "train_accuracy": _accuracy(eval_lp[n_test:], data.y[eval_index[n_test:]]),
            "canaries_fitted": (float((target_lp.argmax(1) == y[tc])[game.target_in].mean())
                                if game.target_in.any() else None),
        }

        inputs = AttackInputs(n_classes=data.n_classes, labels=y[tc], target_lp=target_lp, shadow_labels=y[sc],
                              shadow_lp=shadow_lp, shadow_in=game.shadow_in, reference_lp=reference_lp,
                              reference_in=game.reference_in, **population)
        scored = run_attacks(attack_names, inputs, opts.lira_variance, opts.rmia_a)
        timing["attacks_s"] = time.perf_counter() - t0

        delta = target.delta
        epsilon_claim = claim.epsilon(delta) if claim is not None else None
        adv_bound = dp_advantage_bound(epsilon_claim, delta) if claim is not None else None
        # the guess counts of every attack, and which attack is primary, are chosen on the calibration
        # games (never on the target's canary coins), so the primary bound alone decides the verdict
        guesses = {name: choose_guesses(scored[name].calibration, scored[name].calibration_in, delta, opts.confidence)
                   for name in attack_names}
        primary = max(attack_names, key=lambda name: guesses[name]["shadow_mean_epsilon"])
        family = Family(1, opts.confidence)
        attacks_out, bounds = {}, []
        for name in attack_names:
            sc_ = scored[name]
            chosen = guesses[name]
            bound = one_run(chosen["method"], sc_.target, game.target_in, chosen["k_pos"], chosen["k_neg"], delta,
                            opts.confidence, None if claim is None else claim.tradeoff,
                            VERDICT if name == primary else SECONDARY)
            entry = bound.to_dict() | {"attack": name}
            entry["details"] |= {"guesses_chosen_on": f"{sc_.calibrated_on} (mean bound "
                                                      f"{chosen['shadow_mean_epsilon']:.3f})"}
            bounds.append(entry)
            metrics = attack_metrics(sc_.target, game.target_in, opts.confidence)
            metrics["empirical_points"] = empirical_points(sc_.target, game.target_in, chosen["k_pos"], opts.confidence)
            metrics["description"] = ATTACKS[name]
            metrics["calibrated_on"] = sc_.calibrated_on
            metrics["primary"] = name == primary
            metrics["advantage_dp_bound"] = adv_bound
            metrics["advantage_ci_low_vs_dp_bound"] = (None if adv_bound is None else
                                                       "below" if metrics["advantage_ci"][0] <= adv_bound else "above")
            if name in LIRA_ATTACKS:
                metrics["lira_variance"] = resolve_variance(opts.lira_variance, references)
            if name in REFERENCE_ATTACKS:
                metrics["reference_models"] = references
            metrics |= sc_.parameters
            attacks_out[name] = metrics

        comparison = compare_with_claim(bounds, claim, delta, ALPHA_GRID, family)
        params = target.params
        advantage_table = {
            "title": "Membership advantage against the DP bound",
            "columns": ["attack", "AUC", "TPR at 0.1% FPR", "TPR at 1% FPR", "advantage", "advantage interval",
                        "DP bound on advantage", "interval's lower end vs bound (descriptive)"],
            "rows": [[name, a["auc"], a["tpr_at_fpr"]["0.001"], a["tpr_at_fpr"]["0.01"], a["advantage"],
                      a["advantage_ci"],
                      "none (non-private)" if adv_bound is None else adv_bound,
                      "n/a" if adv_bound is None else a["advantage_ci_low_vs_dp_bound"]]
                     for name, a in attacks_out.items()],
            "caption": "Advantage = max over thresholds of TPR - FPR (Yeom et al. 2018). An (eps, delta)-DP target "
                       "allows at most (e^eps - 1 + 2 delta)/(e^eps + 1). Descriptive, not a test: the interval "
                       "(DKW bands, simultaneous over thresholds) assumes independent scores, but the canaries of "
                       "this one-run game share one trained model, and it is not corrected for the number of "
                       "attacks; only the primary attack's one-run bound decides the verdict.",
        }
        results = {
            "target_description": target.description,
            "dataset": data.name,
            "dataset_source": data.source,
            "model": model_info,
            "neighbouring": "add/remove one record",
            "delta": delta,
            "confidence": opts.confidence,
            "primary_attack": primary,
            "epsilon_theory": comparison["epsilon_theory"],
            "accountant": claim.description if claim is not None else None,
            "params": params,
            "tradeoff": comparison["tradeoff"],
            "lower_bounds": bounds,
            "best_lower_bound": comparison["best_lower_bound"],
            "lower_bound_tradeoff": comparison["lower_bound_tradeoff"],
            "ceiling": comparison["ceiling"],
            "attacks": attacks_out,
            "tables": [advantage_table],
            "verdict": comparison["verdict"],
            "game": game.summary(),
            "quick": opts.quick,
        }
        config_json = {"command": "run membership", "options": asdict(opts), "seeds": seeds} | target.config
        results = ctx.finish(results, config_json)
    return ctx.run_dir, results


#: Guess fractions k+/m of the one-run bound on a trained model (fixed before any score is seen: a trained
#: model has no calibration games to choose them on, so every (attack, fraction) competes, Bonferroni-corrected).
TRAINED_GUESS_FRACTIONS = (0.01, 0.05, 0.2)
#: delta of the one-run bound on a trained model that makes no claim (as the registry's non-private targets).
NO_CLAIM_DELTA = 1e-5
#: RMIA offline parameter on a trained model unless --rmia-a is given: a = 1, p(x) = the mean p_OUT(x) of the
#: reference models (all of which are OUT); no calibration game exists to choose a on.
TRAINED_RMIA_A = 1.0
#: Smallest two-sided binomial p-value of the member count under fair coins below which a stated
#: "independent-coins" membership is taken as contradicted by the counts (no epsilon bound then).
COIN_P_VALUE = 1e-3


def trained_scores(names: tuple[str, ...], q: TrainedQueries, lira_variance: str,
                   rmia_a: float | None) -> dict[str, np.ndarray]:
    """Each attack's scores (n,) on the audited records (higher = member): loss [Yeom et al. 2018],
    confidence [Salem et al. 2019], LiRA offline [Carlini et al. 2022, Eq. 4 and Sec. IV-C] against the
    reference models' OUT Gaussian, RMIA offline [Zarifzadeh et al. 2024, Eq. 5] with every reference
    model OUT (:mod:`audit.membership.trained`)."""
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


def bound_allowed(model: TrainedModel, split: SplitCheck) -> tuple[bool, str]:
    """Whether an epsilon lower bound may be printed for ``model``, and why (not).

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
    family = Family(len(scores) * len(TRAINED_GUESS_FRACTIONS), confidence)
    bounds = []
    for name, s in scores.items():
        for frac in TRAINED_GUESS_FRACTIONS:
            bound = one_run_bound(s, member, max(1, int(round(frac * m))), 0, delta, family.member_confidence, VERDICT)
            bounds.append(bound.to_dict() | {"attack": name})
    return bounds, family


def _trained_attack_entries(scores: dict[str, np.ndarray], q: TrainedQueries, split: SplitCheck, opts,
                            references: int) -> dict[str, dict]:
    attacks_out = {}
    n1, n0 = int(q.member.sum()), int((~q.member).sum())
    z = float(stats.norm.ppf(0.5 + opts.confidence / 2))
    for name, s in scores.items():
        metrics = attack_metrics(s, q.member, opts.confidence)
        # Hanley–McNeil score interval (descriptive: records scored by one model, taken as independent draws)
        metrics["auc_ci"] = list(auc_score_interval(metrics["auc"], n1, n0, z))
        metrics["empirical_points"] = empirical_points(s, q.member, max(1, len(s) // 100), opts.confidence)
        metrics["description"] = ATTACKS[name]
        metrics["blind_auc"] = split.blind_auc
        metrics["blind_auc_ci"] = list(split.blind_auc_ci)
        if name in REFERENCE_ATTACKS:
            metrics["reference_models"] = references
        if name == "lira_offline":
            metrics["lira_variance"] = resolve_variance(opts.lira_variance, references)
        if name == "rmia_offline":
            metrics["a"] = TRAINED_RMIA_A if opts.rmia_a is None else opts.rmia_a
        attacks_out[name] = metrics
    return attacks_out


def _trained_tables(attacks_out: dict, split: SplitCheck) -> list[dict]:
    lo, hi = split.blind_auc_ci
    return [{
        "title": "Attack AUC beside the blind classifier's",
        "columns": ["attack", "AUC", "AUC interval", "blind AUC (never sees the model)", "blind AUC interval",
                    "TPR at 0.1% FPR", "TPR at 1% FPR"],
        "rows": [[name, a["auc"], a.get("auc_ci"), split.blind_auc, [lo, hi], a["tpr_at_fpr"]["0.001"],
                  a["tpr_at_fpr"]["0.01"]] for name, a in attacks_out.items()],
        "caption": "An attack measures the model only by what it adds to the blind classifier, which sees the records "
                   "(features and labels) and never the model. When the blind interval excludes 0.5 the split "
                   "itself separates members from non-members, and an attack's AUC mixes that with the model's "
                   "leakage.",
    }]


def _meaning(model: TrainedModel, split: SplitCheck, attacks_out: dict, best: dict | None, delta: float) -> str:
    """One sentence on what the numbers mean for this model."""
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
    if best is not None:
        text += (f" With the stated fair coins, the model is not (epsilon, {delta:g})-DP for any epsilon below "
                 f"{float(best['epsilon']):.3g} (one-run bound, {float(best['family_confidence']):.0%} confidence).")
    return text


def run_trained_membership(opts: MembershipOptions, plugin: ModelPlugin) -> tuple[Path, dict]:
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
        scores = trained_scores(names, q, opts.lira_variance, opts.rmia_a)
        attacks_out = _trained_attack_entries(scores, q, split, opts, references)
        allowed, why = bound_allowed(model, split)
        delta = model.delta if model.claim is not None else NO_CLAIM_DELTA
        bounds, family = trained_bounds(scores, q.member, delta, opts.confidence) if allowed else ([], Family(
            1, opts.confidence))
        comparison = compare_with_claim(bounds, model.claim, delta, ALPHA_GRID, family)
        if not bounds:  # attack metrics only: say why, rather than "leaks at least epsilon = 0"
            comparison["ceiling"] = {"epsilon": None, "text": f"no epsilon bound: {why}"}
            comparison["verdict"] = dict(comparison["verdict"]) | {"text": f"no epsilon bound ({why}); attack "
                                                                           f"metrics only"}
        primary = comparison["best_lower_bound"]["attack"] if comparison["best_lower_bound"] else None
        results = {
            "target_description": model.description,
            "dataset": model.members.name,
            "dataset_source": model.members.source,
            "model": {"arch": model.model_kind, "member_accuracy": q.accuracy["members"],
                      "nonmember_accuracy": q.accuracy["nonmembers"]},
            "neighbouring": "add/remove one record",
            "delta": delta,
            "confidence": opts.confidence,
            "primary_attack": primary,
            "accountant": model.claim.description if model.claim is not None else None,
            "params": model.params,
            "lower_bounds": bounds,
            "epsilon_bound": {"allowed": allowed, "reason": why},
            "attacks": attacks_out,
            "attacks_not_run": skipped,
            "tables": _trained_tables(attacks_out, split),
            "split_check": split.to_dict(),
            "trained_model": model.to_dict(),
            "game": {"kind": "trained model", "members": len(model.members), "nonmembers": len(model.nonmembers),
                     "records": f"the {len(model.members)} members and {len(model.nonmembers)} non-members the user "
                                f"gave ({model.members.source}; {model.nonmembers.source})",
                     "membership": model.membership, "membership_note": model.membership_note,
                     "reference_models": references, "reference_records": q.reference_records},
            "meaning": _meaning(model, split, attacks_out, comparison["best_lower_bound"], delta),
            "quick": opts.quick,
        } | comparison
        config_json = {"command": "run membership", "options": asdict(opts), "target": model.to_dict()}
        results = ctx.finish(results, config_json)
    return ctx.run_dir, results


def trained_summary_lines(run_dir: Path, results: dict) -> list[str]:
    """The summary of a trained-model audit: the split check first (its warning when it failed)."""
    split = results["split_check"]
    lo, hi = split["blind_auc_ci"]
    head = (f"split:     blind AUC {split['blind_auc']:.3f} [{lo:.3f}, {hi:.3f}] -> "
            + ("passed (consistent with a random split)" if split["passed"] else
               "FAILED: members and non-members differ as records; attack AUCs below measure the split, not "
               "the model, and no epsilon bound is given"))
    game = results["game"]
    best = results["best_lower_bound"]
    if best is None:
        line2 = f"empirical: no epsilon bound ({results['epsilon_bound']['reason']})"
    else:
        d = best["details"]
        line2 = (f"empirical: epsilon >= {float(best['epsilon']):.3f} (one-run bound, attack {best['attack']}, "
                 f"{float(best['family_confidence']):.0%} confidence over {best['family_size']} bounds, "
                 f"{d['v']}/{d.get('r', d.get('k'))} correct guesses on {best['n']} records)")
    parts = [f"{name} AUC {a['auc']:.3f} (blind {a['blind_auc']:.3f}), TPR@0.1%FPR {a['tpr_at_fpr']['0.001']:.3f}"
             for name, a in results["attacks"].items()]
    return [head if not split["passed"] else f"report:    {run_dir / 'report.html'}",
            f"report:    {run_dir / 'report.html'}" if not split["passed"] else head,
            f"records:   {game['members']} members, {game['nonmembers']} non-members; {game['reference_records']}",
            line2, "attacks:   " + "; ".join(parts), f"meaning:   {results['meaning']}"]


def summary_lines(run_dir: Path, results: dict) -> list[str]:
    """The three-line summary printed after a run, plus where the report is."""
    if "split_check" in results:
        return trained_summary_lines(run_dir, results)
    theory = results["epsilon_theory"]
    p = results["params"]
    if theory is None:
        line1 = "theory:    none (non-private target)"
    elif "noise_multiplier" not in p:  # a plugin's claim
        line1 = f"theory:    epsilon = {theory:.3f} at delta = {results['delta']:g} ({results['accountant']})"
    else:
        line1 = (f"theory:    epsilon = {theory:.3f} at delta = {results['delta']:g} "
                 f"(PLD accountant; sigma = {p['noise_multiplier']:.3f}, q = {p['sample_rate']:.4f}, T = {p['steps']})")
    best = results["best_lower_bound"]
    if best is None:
        line2 = "empirical: no valid lower bound"
    else:
        d = best["details"]
        line2 = (f"empirical: epsilon >= {float(best['epsilon']):.3f} ({best['method']} bound, primary attack "
                 f"{best['attack']}, {float(best['family_confidence']):.0%} confidence, "
                 f"{d['v']}/{d.get('r', d.get('k'))} correct guesses on {best['n']} canaries; a perfect attack "
                 f"could certify {results['ceiling']['epsilon']:.3g}) -> {results['verdict']['status']}")
    parts = [f"{name} AUC {a['auc']:.3f}, TPR@1%FPR {a['tpr_at_fpr']['0.01']:.3f}, "
             f"TPR@0.1%FPR {a['tpr_at_fpr']['0.001']:.3f}" for name, a in results["attacks"].items()]
    line3 = "attacks:   " + "; ".join(parts)
    return [f"report:    {run_dir / 'report.html'}", line1, line2, line3]
