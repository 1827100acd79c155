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
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from attacks.lira import resolve_variance
from attacks.membership import AttackInputs, run_attacks
from attacks.names import ATTACKS, LIRA_ATTACKS, REFERENCE_ATTACKS, RMIA_ATTACKS, check_references, expand_attacks
from audit.choices import DEFAULT_MEMBERSHIP_CANARY
from audit.executors import TrainingCall
from audit.membership.game import build_canary_game
from audit.membership.subjects import membership_subject
from audit.run_context import RunContext
from audit.run_options import CommonRunOptions
from audit.stats.lower_bound import SECONDARY, VERDICT, LowerBound
from audit.stats.metrics import attack_metrics, dp_advantage_bound
from audit.stats.one_run import one_run_bound
from audit.stats.one_run_fdp import fdp_one_run_bound
from audit.stats.rates import rate_point
from audit.stats.verdict import Family, compare_with_claim
from audit.theory.checks import check_confidence
from targets.catalogue import resolve

#: One-run methods tried on the calibration games (audit.stats.one_run, audit.stats.one_run_fdp).
ONE_RUN_METHODS = ("one-run", "one-run-fdp")
#: Fractions of the m canaries tried as the number of "in" guesses k+ (k- is 0 or k+).
GUESS_FRACTIONS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5)
#: The alpha (FPR) grid of the tradeoff curves written to results.json.
ALPHA_GRID = np.unique(np.concatenate([np.logspace(-5, 0, 181), [1e-3, 1e-2, 0.1, 0.5]]))


@dataclass(frozen=True, kw_only=True)
class MembershipOptions(CommonRunOptions):
    """Everything that determines a membership run (stored in config.json)."""

    canary: str = DEFAULT_MEMBERSHIP_CANARY
    canaries: int | None = None
    shadows: int | None = None
    attacks: tuple[str, ...] = tuple(ATTACKS)
    references: int | None = None
    lira_variance: str = "auto"
    rmia_a: float | None = None
    max_memory: str | None = None


#: Default and --quick game sizes: (canaries m, shadow models K, LiRA/RMIA reference models R); a user's
#: trainer plugin (training sets of at most audit.membership.subjects.MAX_TRAIN records) plays
#: with fewer canaries by default.
GAME_SIZES = {"default": (6000, 2, 4), "quick": (200, 3, 4), "plugin": (500, 2, 4)}


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
                       for s, i in zip(shadow_scores, shadow_in)]
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
    """Run the membership audit described by ``opts``; returns (run directory, results)."""
    attack_names = expand_attacks(tuple(opts.attacks))
    resolve_variance(opts.lira_variance, 0)  # validates the name
    check_confidence(opts.confidence)
    preset = "quick" if opts.quick else "plugin" if resolve(opts.target).family == "plugin" else "default"
    m_default, k_default, r_default = GAME_SIZES[preset]
    m = opts.canaries or m_default
    shadows = opts.shadows or k_default
    use_references = any(name in REFERENCE_ATTACKS for name in attack_names)
    references = (opts.references or r_default) if use_references else 0
    check_references(attack_names, references)
    t0 = time.perf_counter()
    target = membership_subject(opts, m)
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


def summary_lines(run_dir: Path, results: dict) -> list[str]:
    """The three-line summary printed after a run, plus where the report is."""
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
