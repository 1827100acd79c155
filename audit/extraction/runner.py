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

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from attacks.extraction import (
    ExtractedModel,
    PredictionAPI,
    equation_solving,
    label_only_retraining,
    rounded_extraction,
)
from audit.errors import UserError
from audit.extraction.detail import ExtractionDetail
from audit.extraction.measures import N_UNIFORM, Domain, measure, post_processing, query_domain
from audit.extraction.plugins.blackbox import extraction_victim
from audit.extraction.presentation import attacks_table, extraction_verdict, post_processing_table, rounded_table
from audit.extraction.victim import Victim, dperm_victim, linear_target, trained_victim
from audit.results_header import ResultsHeader
from audit.run_context import RunContext
from audit.run_options import CommonRunOptions
from audit.run_results import RunResults, Unbounded
from audit.stats.outcome import Extraction, ExtractionMethod, Outcome
from audit.theory.checks import check_confidence
from targets.catalogue import dperm_release, resolve
from targets.registry import TrainedTarget
from targets.training import resolve_device

#: Roundings compared when --round is not given (--quick: the middle one only).
COMPARISON_ROUNDS = (2, 3, 4)
#: The figures of the main attack (the first that succeeded) copied to the top of results.json's ``extraction``.
MAIN_FIGURES = ("queries", "param_rel_error", "agreement_test", "agreement_uniform", "tv_distance",
                "tv_distance_uniform", "round_decimals")


@dataclass(frozen=True, kw_only=True)
class ExtractionOptions(CommonRunOptions):
    """Everything that determines an extraction run (stored in config.json)."""

    round: int | None = None
    queries: int | None = None
    label_queries: int | None = None


def run_extraction(opts: ExtractionOptions) -> tuple[Path, Outcome]:
    """Run the extraction audit described by ``opts``; returns (run directory, results)."""
    check_confidence(opts.confidence)
    if opts.queries is not None and opts.queries < 1:
        raise UserError(f"--queries must be >= 1, got {opts.queries}")
    entry = resolve(opts.target)
    is_dperm = dperm_release(opts.target) is not None  # not its run dp variants: their features have no intercept
    plugin = entry.family == "plugin"
    target = None if is_dperm or plugin else linear_target(opts)
    device = resolve_device(opts.device)
    name = entry.factory().name if plugin else opts.target  # a plugin is named by its dict
    ctx = RunContext(opts.out, "extraction", name, seed=opts.seed, quiet=opts.quiet, device=opts.device)
    with ctx:
        return ctx.run_dir, extract(ctx, opts, target, is_dperm, device)


def extract(ctx: RunContext, opts: ExtractionOptions, target: TrainedTarget | None, is_dperm: bool, device) -> Outcome:
    """The body of an extraction run: serve the victim, steal it by every attack, measure, write the run."""
    ctx.say(f"run directory: {ctx.run_dir}")
    with ctx.stage("target"):
        victim = serve_victim(ctx, opts, target, is_dperm, device)
    domain = query_domain(victim, opts.seed)
    with ctx.stage("attacks"):
        rows, main = steal(ctx, opts, victim, domain)
    extraction = extraction_summary(rows, main, victim, domain)
    return ctx.finish(extraction_results(opts, victim, domain, extraction),
                      {"command": "run extraction", "options": asdict(opts), "victim": victim.config})


def serve_victim(ctx: RunContext, opts: ExtractionOptions, target: TrainedTarget | None, is_dperm: bool,
                 device) -> Victim:
    """The model behind the prediction API: a DP-ERM release, a trained registry target (cached), or a
    trainer plugin exposing probabilities."""
    if target is None and not is_dperm:  # a trainer plugin exposing probabilities
        return extraction_victim(opts, ctx.paths)
    return dperm_victim(opts) if is_dperm else trained_victim(opts, target, ctx.paths, device)


def steal(ctx: RunContext, opts: ExtractionOptions, victim: Victim,
          domain: Domain) -> tuple[list[ExtractionMethod], tuple[ExtractedModel, ExtractionMethod]]:
    """Every attack of the run, in order, on one seeded query generator: equation solving at ``--round``
    (or on exact outputs and at each of :data:`COMPARISON_ROUNDS`), then the label-only baseline.
    Returns the rows of every attack and the first stolen model with its row (the main result)."""
    rng = np.random.default_rng([int(opts.seed), 31337])
    comparison = COMPARISON_ROUNDS[1:2] if opts.quick else COMPARISON_ROUNDS
    settings = [opts.round] if opts.round is not None else [None, *comparison]
    rows, main = [], None
    for decimals in settings:
        row, stolen = equation_attack(ctx, opts, victim, domain, decimals, rng)
        rows.append(row)
        if main is None and stolen is not None:
            main = (stolen, row)
    rows.append(label_only_attack(ctx, opts, victim, domain, rng))
    return rows, main


def equation_attack(ctx: RunContext, opts: ExtractionOptions, victim: Victim, domain: Domain, decimals: int | None,
                    rng: np.random.Generator) -> tuple[ExtractionMethod, ExtractedModel | None]:
    """Equation solving on exact outputs (``decimals`` None) or on outputs rounded to ``decimals``; returns
    its row and the stolen model. A comparison rounding that fails gives a ``failed`` row and no model;
    the rounding the user asked for raises."""
    api = PredictionAPI(victim.predict_proba, domain.d, domain.K, decimals)
    n_q = opts.queries if (decimals == opts.round) else None
    label = "equation solving" + (f" (outputs rounded to {decimals} decimals)" if decimals is not None else
                                  " (exact outputs)")
    attack = equation_solving if decimals is None else rounded_extraction
    try:
        stolen = attack(api, victim.feature_map, domain.low, domain.high, rng, n_q)
    except UserError as exc:
        if decimals == opts.round:
            raise
        ctx.say(f"{label}: failed after {api.queries} queries: {exc}")
        return ExtractionMethod(method=label, round_decimals=decimals, queries=api.queries, failed=str(exc),
                                nulls=frozenset({"round_decimals"} if decimals is None else ())), None
    row = measure(label, stolen, victim, decimals, domain)
    error = row.param_rel_error
    ctx.say(f"{label}: {stolen.queries} queries, "
            + ("" if error is None else f"relative parameter error {error:.3g}, ")
            + f"agreement test {row.agreement_test:.4f} / uniform {row.agreement_uniform:.4f}")
    return row, stolen


def label_only_attack(ctx: RunContext, opts: ExtractionOptions, victim: Victim, domain: Domain,
                      rng: np.random.Generator) -> ExtractionMethod:
    """The label-only baseline: retraining on uniform queries labelled by the API (``--label-queries``,
    by default 20 (quick) or 50 queries per feature); returns its row."""
    label_budget = opts.label_queries or (20 if opts.quick else 50) * domain.p
    api = PredictionAPI(victim.predict_proba, domain.d, domain.K, None)
    baseline = label_only_retraining(api, victim.feature_map, domain.low, domain.high, rng, label_budget)
    row = measure("label-only retraining (uniform queries)", baseline, victim, None, domain)
    ctx.say(f"label-only retraining: {baseline.queries} queries, agreement test {row.agreement_test:.4f} / "
            f"uniform {row.agreement_uniform:.4f}")
    return row


def rounded_rows(rows: list[ExtractionMethod]) -> list[ExtractionMethod]:
    """The rows of the attacks on rounded outputs that succeeded."""
    return [r for r in rows if r.round_decimals is not None and r.failed is None]


def extraction_summary(rows: list[ExtractionMethod], main: tuple[ExtractedModel, ExtractionMethod], victim: Victim,
                       domain: Domain) -> Extraction:
    """results.json's ``extraction``: the main attack's figures, every attack's row, the label-only
    baseline, the post-processing comparison of a DP target and the rounded attacks' queries."""
    stolen, main_row = main
    rounded = [{k: getattr(r, k) for k in ("round_decimals", "queries", "param_rel_error", "agreement_test",
                                           "agreement_uniform")} | {"converged": r.details["converged"]}
               for r in rounded_rows(rows)]
    return Extraction(**{k: getattr(main_row, k) for k in MAIN_FIGURES}, method="equation-solving", d=domain.d,
                      unknowns=domain.unknowns, n_uniform=N_UNIFORM, test_data=victim.test_label, methods=tuple(rows),
                      label_only=rows[-1].to_dict(),
                      post_processing=(post_processing(victim, stolen)
                                       if victim.private and victim.theta_nonprivate is not None else None),
                      rounded=rounded or None,
                      nulls=frozenset({"round_decimals"} if main_row.round_decimals is None else ()))


def extraction_results(opts: ExtractionOptions, victim: Victim, domain: Domain,
                       extraction: Extraction) -> RunResults:
    """The typed results of an extraction run: the header, no bounds, the verdict, the extraction figures
    and the tables."""
    tables = [attacks_table(extraction.methods, victim, domain)]
    rounded = rounded_rows(list(extraction.methods))
    if rounded:
        tables.append(rounded_table(rounded))
    if extraction.post_processing is not None:
        tables.append(post_processing_table(extraction.post_processing))
    model_info = {"arch": "logreg" if victim.api is None else f"user trainer {victim.params.get('plugin')}",
                  "classes": domain.K, "features": domain.d,
                  "test_accuracy": float((domain.test_p.argmax(1) == victim.test_y).mean())}
    header = ResultsHeader(
        description=victim.description, dataset=victim.dataset.name, dataset_source=victim.dataset.source,
        model=model_info, neighbouring=victim.neighbouring, delta=victim.delta, confidence=opts.confidence,
        epsilon_theory=victim.epsilon_theory, accountant=victim.accountant, params=victim.params)
    return RunResults(header=header, judgement=Unbounded(verdict=extraction_verdict(victim, extraction),
                                                          null_curves=True), attacks={}, tables=tuple(tables),
                      detail=ExtractionDetail(extraction=extraction),
                      quick=opts.quick, target=victim.name)


def summary_lines(run_dir: Path, outcome: Outcome) -> list[str]:
    """Summary printed after an extraction run.

    Args:
        run_dir: the run's directory.
        outcome: the run's outcome.

    Returns:
        The lines.
    """
    e = outcome.detail.extraction
    lines = [f"report:     {run_dir / 'report.html'}"]
    for r in e.methods:
        if r.failed is not None:
            lines.append(f"{r.method}: failed after {r.queries} queries ({r.failed})")
            continue
        error = "" if r.param_rel_error is None else f", param error {r.param_rel_error:.3g}"
        stable = ("" if r.round_decimals is None else
                  ", stable" if r.details["converged"] else ", not stable at the query cap")
        lines.append(f"{r.method}: {r.queries} queries{stable}{error}, agreement test "
                     f"{r.agreement_test:.4f} / uniform {r.agreement_uniform:.4f}, TV {r.tv_distance:.3g}")
    if e.post_processing is not None:
        lines.append("post-processing: " + e.post_processing["text"])
    return lines
