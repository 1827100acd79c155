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

import hashlib
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable

import numpy as np

from attacks.extraction import (
    ROUNDED_MAX_FACTOR,
    FeatureMap,
    PredictionAPI,
    agreement,
    canonical,
    equation_solving,
    label_only_retraining,
    linear_features,
    relative_error,
    rounded_extraction,
    softmax,
    tv_distance,
    uniform_inputs,
)
from audit.cache import cached_models
from audit.errors import UserError
from audit.run_context import RunContext, RunPaths
from audit.run_options import CommonRunOptions
from audit.theory.checks import check_confidence
from targets.datasets import Dataset, load_dataset
from targets.registry import TARGETS, TrainedTarget
from targets.training import TrainConfig, resolve_device, train_models

#: Uniform random inputs used for 1 - R_unif (Tramèr et al. 2016 use 10,000).
N_UNIFORM = 10_000
#: Roundings compared when --round is not given (--quick: the middle one only).
COMPARISON_ROUNDS = (2, 3, 4)


@dataclass(frozen=True)
class ExtractionOptions(CommonRunOptions):
    """Everything that determines an extraction run (stored in config.json)."""

    round: int | None = None
    queries: int | None = None
    label_queries: int | None = None


@dataclass
class Victim:
    """A model behind an API: served canonical-able parameters ``theta`` (K, p) over ``feature_map``,
    or, for a user's trainer plugin, its ``predict_proba`` (``api``; ``theta`` None: not visible)."""

    name: str
    description: str
    dataset: Dataset
    theta: np.ndarray | None
    feature_map: FeatureMap
    test_X: np.ndarray
    test_y: np.ndarray
    test_label: str
    private: bool
    theta_nonprivate: np.ndarray | None
    nonprivate_label: str | None
    epsilon_theory: float | None
    delta: float | None
    accountant: str | None
    neighbouring: str
    params: dict = field(default_factory=dict)
    config: dict = field(default_factory=dict)
    api: Callable[[np.ndarray], np.ndarray] | None = None

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        return self.api(X) if self.api is not None else softmax(self.feature_map(X) @ self.theta.T)


def member_split(n: int, n_train: int, seed: int) -> np.ndarray:
    """A seeded permutation of range(n); its first ``n_train`` entries are the target's members."""
    if n_train >= n:
        raise UserError(f"the target needs {n_train} training records but the dataset has only {n}; "
                        f"use a larger dataset (--data-dir) or a smaller target")
    return np.random.default_rng([int(seed), 7919]).permutation(n)


def train_cached(paths: RunPaths, data: Dataset, mask: np.ndarray, config: TrainConfig, seed: int, device,
                 quiet: bool, desc: str):
    """Train one model on ``data[mask]`` (or reuse the cached one keyed by everything that determines it)."""
    payload = {"dataset": data.name, "source": data.source, "config": config.to_dict(), "seeds": [int(seed)],
               "masks": hashlib.sha256(np.packbits(mask[None]).tobytes()).hexdigest(),
               "labels": hashlib.sha256(data.y.tobytes()).hexdigest(), "device": device.type}

    def train():
        return train_models(data, mask[None], config, [int(seed)], device=device, progress=not quiet, desc=desc)

    params, hit = cached_models(paths.cache_dir, payload, train)
    paths.log(f"{desc}: {'reused cached model' if hit else 'trained'} ({config.steps} steps)")
    return params


def resolve_trained(name: str, epsilon: float | None, delta: float | None, quick: bool) -> TrainedTarget:
    """The registry target with the requested privacy, shrunk by --quick (as the membership run does)."""
    from audit.run_membership import quick_target
    from targets.registry import get_target

    target = get_target(name).with_privacy(epsilon, delta)
    return quick_target(target) if quick else target


def _linear_target(opts: ExtractionOptions) -> TrainedTarget:
    target = resolve_trained(opts.target, opts.epsilon, opts.delta, opts.quick)
    if target.arch != "logreg":
        linear = ", ".join(t for t, v in TARGETS.items() if v.arch == "logreg")
        raise UserError(f"extraction by equation solving needs a logistic-regression target; {target.name} is a "
                        f"{target.arch}; choose one of {linear} or a DP-ERM target")
    return target


def _trained_victim(opts: ExtractionOptions, target: TrainedTarget, paths: RunPaths, device) -> Victim:
    data = load_dataset(target.dataset, opts.data_dir)
    data = replace(data, X=data.X.reshape(len(data), -1), shape=(int(np.prod(data.shape)),))
    perm = member_split(len(data), target.n_train, opts.seed)
    mask = np.zeros(len(data), dtype=bool)
    mask[perm[:target.n_train]] = True
    sigma = target.noise_multiplier()
    config = target.train_config(sigma)
    seed = int(np.random.SeedSequence(opts.seed).generate_state(1)[0])
    params = train_cached(paths, data, mask, config, seed, device, opts.quiet, "target model")
    theta = np.hstack([params["weight"][0].double().numpy(), params["bias"][0].double().numpy()[:, None]])
    theta_np, np_label, claim = None, None, None
    if target.private:
        claim = target.claim(sigma)
        np_config = replace(config, clip_norm=None, noise_multiplier=0.0)
        np_params = train_cached(paths, data, mask, np_config, seed, device, opts.quiet, "non-private comparison model")
        theta_np = np.hstack([np_params["weight"][0].double().numpy(), np_params["bias"][0].double().numpy()[:, None]])
        np_label = "the same members trained by non-private SGD with the same seed"
    test = ~mask
    return Victim(target.name, target.description, data, theta, linear_features, data.X[test], data.y[test],
                  f"{int(test.sum())} held-out records", target.private, theta_np, np_label,
                  claim.epsilon(target.delta) if claim else None, target.delta if claim else None,
                  claim.description if claim else None, "add/remove one record",
                  {"noise_multiplier": sigma, "clip_norm": target.clip_norm, "sample_rate": target.sample_rate,
                   "steps": target.steps, "epochs": target.epochs, "lr": target.lr, "n_train": target.n_train},
                  {"target": asdict(target), "train_config": config.to_dict(), "seed": seed})


def _dperm_victim(opts: ExtractionOptions) -> Victim:
    from targets.dperm import DPERM, DPERM_TARGETS, binary_labels, prepare_features

    spec = DPERM_TARGETS[opts.target]
    data = load_dataset(spec["dataset"], opts.data_dir)
    y = binary_labels(spec["dataset"], data.y)
    erm = DPERM(spec["epsilon"] if opts.epsilon is None else opts.epsilon,
                spec["delta"] if opts.delta is None else opts.delta, spec["l2_reg"], n=len(data))
    rng = np.random.default_rng([int(opts.seed), 104729])
    released = erm.release(data.X, y, rng)
    optimum = erm.minimiser(data.X, y)
    zeros = np.zeros_like(released)
    # Binary LR as a two-class softmax: class 0 is label -1, class 1 is label +1, theta_0 = 0.
    return Victim(opts.target, spec["description"], data, np.vstack([zeros, released]), prepare_features,
                  data.X, (y > 0).astype(np.int64), f"all {len(data)} records (DP-ERM trains on the full set)",
                  True, np.vstack([zeros, optimum]), "the exact non-private DP-ERM minimiser (no noise)",
                  erm.claim.epsilon(erm.delta), erm.delta, erm.claim.description, "replace one record",
                  erm.params(), {"dperm": spec | {"epsilon": erm.epsilon, "delta": erm.delta}})


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
    from targets.dperm import DPERM_TARGETS

    check_confidence(opts.confidence)
    if opts.queries is not None and opts.queries < 1:
        raise UserError(f"--queries must be >= 1, got {opts.queries}")
    is_dperm = opts.target in DPERM_TARGETS
    from targets.plugins import is_plugin_spec, load_plugin

    plugin = is_plugin_spec(opts.target)
    if not is_dperm and not plugin and opts.target not in TARGETS:
        raise UserError(f"unknown target {opts.target!r}; run `python -m audit list` to see the targets")
    target = None if is_dperm or plugin else _linear_target(opts)
    device = resolve_device(opts.device)
    name = load_plugin(opts.target).name if plugin else opts.target  # a plugin is named by its dict
    ctx = RunContext(opts.out, "extraction", name, seed=opts.seed, quiet=opts.quiet, device=opts.device)
    with ctx:
        return ctx.run_dir, _extract(ctx, opts, target, is_dperm, device)


def _extract(ctx: RunContext, opts: ExtractionOptions, target: TrainedTarget | None, is_dperm: bool, device) -> dict:
    paths, say, timing = ctx.paths, ctx.say, ctx.timing
    say(f"run directory: {paths.run_dir}")
    t0 = time.perf_counter()
    if target is None and not is_dperm:  # a trainer plugin exposing probabilities
        from audit.plugin_victims import extraction_victim

        victim = extraction_victim(opts, paths)
    else:
        victim = _dperm_victim(opts) if is_dperm else _trained_victim(opts, target, paths, device)
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
