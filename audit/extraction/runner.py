"""``run extraction``: steal a logistic-regression target through its prediction API and measure it.

Attacks (:mod:`attacks.extraction`, Tramèr et al. 2016): equation solving with d + 1 queries on exact
outputs; on outputs rounded to ``--round K`` decimals, weighted least squares over queries chosen to
avoid saturation, doubled until the solution is stable (when ``--round`` is not given, 2, 3 and 4
decimals are all run as a comparison, 3 only with ``--quick``), with the queries each precision
needed; and the label-only uniform-retraining baseline. Each is measured by the query count, the
relative parameter error (canonical form theta_k - theta_0), label agreement on held-out data and
on 10,000 uniform random inputs (1 - R_test, 1 - R_unif) and the mean total-variation distance
between output distributions.

Targets: the softmax-regression targets of :mod:`targets.registry` (``arch == "logreg"``, trained
on a seeded member set, non-private or DP-SGD) and the binary DP-ERM targets of
:mod:`targets.dperm`. For a DP target the API serves the released noisy model; extraction is
post-processing of that release, so what is stolen is the noisy model — we measure its distance
to the released parameters and to the non-private model (the exact DP-ERM minimiser, or the same
members trained by non-private SGD with the same seed) to show it.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from attacks.extraction import (
    ROUNDED_MAX_FACTOR,
    PredictionAPI,
    agreement,
    canonical,
    equation_solving,
    label_only_retraining,
    relative_error,
    rounded_extraction,
    softmax,
    tv_distance,
    uniform_inputs,
)
from audit.errors import UserError
from audit.extraction.plugin import extraction_victim
from audit.extraction.victim import Victim, dperm_victim, linear_target, trained_victim
from audit.run_context import RunContext
from audit.run_options import CommonRunOptions
from audit.theory.checks import check_confidence
from targets.catalogue import resolve
from targets.dperm import DPERM_TARGETS
from targets.registry import TrainedTarget
from targets.training import resolve_device

#: Uniform random inputs used for 1 - R_unif (Tramèr et al. 2016 use 10,000).
N_UNIFORM = 10_000
#: Roundings compared when --round is not given (--quick: the middle one only).
COMPARISON_ROUNDS = (2, 3, 4)


@dataclass(frozen=True, kw_only=True)
class ExtractionOptions(CommonRunOptions):
    """Everything that determines an extraction run (stored in config.json)."""

    round: int | None = None
    queries: int | None = None
    label_queries: int | None = None


def _row(name: str, model, victim: Victim, round_decimals, test_p, unif_X, unif_p) -> dict:
    stolen_test = model.predict_proba(victim.test_X)
    stolen_unif = model.predict_proba(unif_X)
    return {"method": name, "round_decimals": round_decimals, "queries": model.queries,
            "param_rel_error": None if victim.theta is None else relative_error(model.theta, canonical(victim.theta)),
            "agreement_test": agreement(stolen_test, test_p), "agreement_uniform": agreement(stolen_unif, unif_p),
            "tv_distance": tv_distance(stolen_test, test_p), "tv_distance_uniform": tv_distance(stolen_unif, unif_p),
            "details": model.details}


def run_extraction(opts: ExtractionOptions) -> tuple[Path, dict]:
    """Run the extraction audit described by ``opts``; returns (run directory, results)."""
    check_confidence(opts.confidence)
    if opts.queries is not None and opts.queries < 1:
        raise UserError(f"--queries must be >= 1, got {opts.queries}")
    entry = resolve(opts.target)
    is_dperm = opts.target in DPERM_TARGETS  # not its run dp variants: their features have no intercept
    plugin = entry.family == "plugin"
    target = None if is_dperm or plugin else linear_target(opts)
    device = resolve_device(opts.device)
    name = entry.factory().name if plugin else opts.target  # a plugin is named by its dict
    ctx = RunContext(opts.out, "extraction", name, seed=opts.seed, quiet=opts.quiet, device=opts.device)
    with ctx:
        return ctx.run_dir, _extract(ctx, opts, target, is_dperm, device)


def _extract(ctx: RunContext, opts: ExtractionOptions, target: TrainedTarget | None, is_dperm: bool, device) -> dict:
    paths, say, timing = ctx.paths, ctx.say, ctx.timing
    say(f"run directory: {paths.run_dir}")
    t0 = time.perf_counter()
    if target is None and not is_dperm:  # a trainer plugin exposing probabilities
        victim = extraction_victim(opts, paths)
    else:
        victim = dperm_victim(opts) if is_dperm else trained_victim(opts, target, paths, device)
    timing["target_s"] = time.perf_counter() - t0

    X_all = victim.dataset.X.reshape(len(victim.dataset), -1).astype(np.float64)
    d = X_all.shape[1]
    # The input domain: the box [min, max]^d of all feature values (for images, [0, 1] per pixel). A
    # per-feature box would pin always-blank pixels to 0 and leave their weights unidentifiable.
    low, high = np.full(d, X_all.min()), np.full(d, X_all.max())
    K = victim.dataset.n_classes if victim.theta is None else victim.theta.shape[0]
    p = victim.feature_map(X_all[:1]).shape[1]
    rng = np.random.default_rng([int(opts.seed), 31337])
    unif_X = uniform_inputs(N_UNIFORM, low, high, np.random.default_rng([int(opts.seed), 271828]))
    test_p = victim.predict_proba(victim.test_X)
    unif_p = victim.predict_proba(unif_X)
    label_budget = opts.label_queries or (20 if opts.quick else 50) * p

    t0 = time.perf_counter()
    rows = []
    comparison = COMPARISON_ROUNDS[1:2] if opts.quick else COMPARISON_ROUNDS
    settings = [opts.round] if opts.round is not None else [None, *comparison]
    main = None
    for decimals in settings:
        api = PredictionAPI(victim.predict_proba, d, K, decimals)
        n_q = opts.queries if (decimals == opts.round) else None
        label = "equation solving" + (f" (outputs rounded to {decimals} decimals)" if decimals is not None else
                                      " (exact outputs)")
        attack = equation_solving if decimals is None else rounded_extraction
        try:
            stolen = attack(api, victim.feature_map, low, high, rng, n_q)
        except UserError as exc:
            if decimals == opts.round:
                raise
            rows.append({"method": label, "round_decimals": decimals, "queries": api.queries, "failed": str(exc)})
            say(f"{label}: failed after {api.queries} queries: {exc}")
            continue
        rows.append(_row(label, stolen, victim, decimals, test_p, unif_X, unif_p))
        if main is None:
            main = (stolen, rows[-1])
        error = rows[-1]["param_rel_error"]
        say(f"{label}: {stolen.queries} queries, "
            + ("" if error is None else f"relative parameter error {error:.3g}, ")
            + f"agreement test {rows[-1]['agreement_test']:.4f} / uniform {rows[-1]['agreement_uniform']:.4f}")
    api = PredictionAPI(victim.predict_proba, d, K, None)
    baseline = label_only_retraining(api, victim.feature_map, low, high, rng, label_budget)
    rows.append(_row("label-only retraining (uniform queries)", baseline, victim, None, test_p, unif_X, unif_p))
    say(f"label-only retraining: {baseline.queries} queries, agreement test {rows[-1]['agreement_test']:.4f} / "
        f"uniform {rows[-1]['agreement_uniform']:.4f}")
    timing["attacks_s"] = time.perf_counter() - t0

    stolen, main_row = main
    extraction = {k: main_row[k] for k in ("queries", "param_rel_error", "agreement_test", "agreement_uniform",
                                           "tv_distance", "tv_distance_uniform", "round_decimals")}
    extraction |= {"method": "equation-solving", "d": d, "unknowns": (K - 1) * p, "n_uniform": N_UNIFORM,
                   "test_data": victim.test_label, "methods": rows, "label_only": rows[-1]}
    if victim.private and victim.theta_nonprivate is not None:
        np_canon = canonical(victim.theta_nonprivate)
        released = canonical(victim.theta)
        to_released = relative_error(stolen.theta, released)
        to_np = relative_error(stolen.theta, np_canon)
        np_api_p = softmax(victim.feature_map(victim.test_X) @ victim.theta_nonprivate.T)
        extraction["post_processing"] = {
            "stolen_vs_released_rel_error": to_released,
            "stolen_vs_nonprivate_rel_error": to_np,
            "released_vs_nonprivate_rel_error": relative_error(released, np_canon),
            "agreement_test_stolen_vs_nonprivate": agreement(stolen.predict_proba(victim.test_X), np_api_p),
            "nonprivate_model": victim.nonprivate_label,
            "equals_released": bool(to_released < to_np),
            "text": f"the stolen model is the released noisy model (relative distance {to_released:.2g}), not the "
                    f"non-private one ({victim.nonprivate_label}; relative distance {to_np:.2g}): extraction is "
                    f"post-processing of the DP release and cannot undo its noise",
        }
    if victim.private:
        pp = extraction.get("post_processing", {})
        verdict = {"status": "no-claim",
                   "text": f"DP bounds what the model reveals about its training records, not about itself: the API "
                           f"gave up the model with {extraction['queries']} queries (agreement "
                           f"{extraction['agreement_test']:.4f} on test data). " + pp.get("text", "")}
    else:
        error = extraction["param_rel_error"]
        verdict = {"status": "no-claim",
                   "text": f"non-private target extracted with {extraction['queries']} queries, "
                           + ("" if error is None else f"relative parameter error {error:.2g}, ")
                           + f"agreement {extraction['agreement_test']:.4f} (test) / "
                             f"{extraction['agreement_uniform']:.4f} (uniform)"}
    table_rows = [[r["method"], r["queries"], r.get("param_rel_error", "failed"), r.get("agreement_test"),
                   r.get("agreement_uniform"), r.get("tv_distance"), r.get("tv_distance_uniform")] for r in rows]
    tables = [{"title": "Extraction attacks", "columns": ["method", "queries", "relative parameter error",
                                                          "agreement (test)", "agreement (uniform)", "TV (test)",
                                                          "TV (uniform)"],
               "rows": table_rows,
               "caption": f"Tramèr et al. 2016. Agreement is 1 - R: the fraction of inputs labelled alike by the "
                          f"stolen and the served model, on {victim.test_label} and on {N_UNIFORM} uniform random "
                          f"inputs from the data range; TV is the mean total-variation distance between their "
                          f"output distributions. Parameters are compared in canonical form theta_k - theta_0 "
                          f"({(K - 1) * p} unknowns, d = {d})."}]
    rounded = [r for r in rows if r.get("round_decimals") is not None and "failed" not in r]
    if rounded:
        extraction["rounded"] = [{k: r[k] for k in ("round_decimals", "queries", "param_rel_error", "agreement_test",
                                                   "agreement_uniform")} | {"converged": r["details"]["converged"]}
                                 for r in rounded]
        tables.append({"title": "Rounded outputs: the queries each precision needed",
                       "columns": ["decimals", "queries", "of which box probes", "equation queries (relative change)",
                                   "stable", "relative parameter error", "agreement (test)", "agreement (uniform)"],
                       "rows": [[r["round_decimals"], r["queries"], r["details"]["probe_queries"],
                                 ", ".join(f"{x['queries']}" + ("" if x["relative_change"] is None
                                                                else f" ({x['relative_change']:.2g})")
                                           for x in r["details"]["rounds"]),
                                 "yes" if r["details"]["converged"] else "no (query cap)", r["param_rel_error"],
                                 r["agreement_test"], r["agreement_uniform"]] for r in rounded],
                       "caption": "The thief doubles its equation queries until the solution moves by less than "
                                  f"{rounded[0]['details']['tol']:.0%} (relative), or until the cap of "
                                  f"{ROUNDED_MAX_FACTOR} x (d + 1) queries; the box probes chose queries whose rounded "
                                  "outputs are not saturated. Coarser rounding needs more queries for the same "
                                  "stability."})
    if "post_processing" in extraction:
        pp = extraction["post_processing"]
        tables.append({"title": "Post-processing: what a DP model's thief gets",
                       "columns": ["comparison", "relative parameter distance"],
                       "rows": [["stolen vs released (noisy) model", pp["stolen_vs_released_rel_error"]],
                                ["stolen vs non-private model", pp["stolen_vs_nonprivate_rel_error"]],
                                ["released vs non-private model", pp["released_vs_nonprivate_rel_error"]]],
                       "caption": pp["text"]})
    model_info = {"arch": "logreg" if victim.api is None else f"user trainer {victim.params.get('plugin')}",
                  "classes": K, "features": d,
                  "test_accuracy": float((test_p.argmax(1) == victim.test_y).mean())}
    results = {
        "target": victim.name, "target_description": victim.description, "dataset": victim.dataset.name,
        "dataset_source": victim.dataset.source, "model": model_info, "neighbouring": victim.neighbouring,
        "delta": victim.delta, "confidence": opts.confidence, "epsilon_theory": victim.epsilon_theory,
        "accountant": victim.accountant, "params": victim.params, "tradeoff": None, "lower_bounds": [],
        "best_lower_bound": None, "lower_bound_tradeoff": None, "attacks": {}, "verdict": verdict,
        "extraction": extraction, "tables": tables, "quick": opts.quick,
    }
    return ctx.finish(results, {"command": "run extraction", "options": asdict(opts), "victim": victim.config})


def summary_lines(run_dir: Path, results: dict) -> list[str]:
    """Summary printed after an extraction run."""
    e = results["extraction"]
    lines = [f"report:     {run_dir / 'report.html'}"]
    for r in e["methods"]:
        if "failed" in r:
            lines.append(f"{r['method']}: failed after {r['queries']} queries ({r['failed']})")
            continue
        error = "" if r["param_rel_error"] is None else f", param error {r['param_rel_error']:.3g}"
        stable = ("" if r.get("round_decimals") is None else
                  ", stable" if r["details"]["converged"] else ", not stable at the query cap")
        lines.append(f"{r['method']}: {r['queries']} queries{stable}{error}, agreement test "
                     f"{r['agreement_test']:.4f} / uniform {r['agreement_uniform']:.4f}, TV {r['tv_distance']:.3g}")
    if "post_processing" in e:
        lines.append("post-processing: " + e["post_processing"]["text"])
    return lines
