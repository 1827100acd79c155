"""``sweep dp``: the audit of a target at each claimed epsilon, for each threat model, with one
verdict over the family of audits."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from audit.dp.detail import SweepDetail
from audit.dp.options import DPOptions, SweepOptions
from audit.dp.runner import PlayOptions, play
from audit.dp.setup import build_setup
from audit.results_header import ResultsHeader
from audit.run_context import RunContext
from audit.run_results import RunResults, Unbounded
from audit.stats.outcome import Outcome, SweepPoint, SweepRow, Table, Verdict
from audit.stats.verdict import Family
from audit.target_defaults import target_use
from audit.theory.checks import check_confidence
from targets.catalogue import resolve


def sweep_family(opts: SweepOptions) -> Family:
    """The sweep's verdict is "violation" if any of its audits is one, so its audits form one family:
    each audit's verdict is computed at the family's member confidence (Bonferroni over the audits)."""
    threats, _ = _sweep_grid(opts)
    return Family(size=len(threats) * len(opts.epsilons), confidence=opts.confidence)


def _sweep_grid(opts: SweepOptions) -> tuple[tuple[str, ...], str]:

    is_dperm = resolve(opts.target).family == "dp-erm"
    threats = opts.threats or (("white-box",) if is_dperm else ("updates", "white-box"))
    return threats, opts.canary or target_use(opts.target).default_canary


def sweep_rows(opts: SweepOptions, sub_out: Path, timing: dict[str, float]) -> list[SweepRow]:
    """One row per (threat, epsilon) with the plotted figure (the largest bound, labelled by method)
    and the largest statistically valid bound; each audit also writes its own run directory and
    holds at the sweep family's member confidence (:func:`sweep_family`). Each audit's wall time goes
    into ``timing`` under :func:`audit_timing_key` (wall times vary between identical runs: volatile, not
    in the rows)."""
    threats, canary = _sweep_grid(opts)
    confidence = sweep_family(opts).member_confidence
    rows = []
    for threat in threats:
        for eps in opts.epsilons:
            run_opts = DPOptions(target=opts.target, out=str(sub_out), seed=opts.seed, device=opts.device,
                                 quick=opts.quick, epsilon=eps, delta=opts.delta, data_dir=opts.data_dir,
                                 quiet=opts.quiet, runs=opts.runs, canary=canary, threat=threat,
                                 confidence=confidence, workers=opts.workers, executor=opts.executor,
                                 ray_address=opts.ray_address, init=opts.init,
                                 calibration_runs=opts.calibration_runs)
            started = time.perf_counter()
            setup = build_setup(run_opts)
            runs = opts.runs or setup.default_runs
            run_dir, res = play(setup, runs, opts.seed, confidence, PlayOptions(
                out=sub_out, quiet=opts.quiet, config_extra={"options": asdict(run_opts)},
                run_name=f"{threat}-epsilon-{eps:g}"))
            timing[audit_timing_key(run_dir.name)] = time.perf_counter() - started
            est, valid = res.judged.best_estimate, res.best_lower_bound
            valid_method = valid.method if valid else None
            rows.append(SweepRow(
                target=opts.target, series=threat, threat=threat, canary=canary, epsilon_claimed=eps,
                epsilon_theory=res.epsilon_theory, epsilon_lb=float(est.epsilon) if est else 0.0,
                method=est.method if est else None, epsilon_lb_valid=float(valid.epsilon) if valid else 0.0,
                valid_method=valid_method, verdict=res.verdict.status, verdict_text=res.verdict.text, runs=runs,
                models=runs + opts.calibration_runs, init=opts.init, run_dir=run_dir.name,
                bounds={b.method: b.epsilon for b in res.lower_bounds},
                details=dict(est.details or {}) if est else {},
                nulls=frozenset(key for key, value in (("valid_method", valid_method), ("init", opts.init))
                                if value is None)))
    return rows


def run_sweep(opts: SweepOptions) -> tuple[Path, Outcome]:
    """Run the sweep and write its run directory (the audits' directories inside it, without reports; the sweep's
    report, drawn by the command, plots epsilon_lb against epsilon_theory); returns (run directory, outcome)."""
    check_confidence(opts.confidence)
    family = sweep_family(opts)
    ctx = RunContext(opts.out, "sweep", opts.target, seed=opts.seed, quiet=opts.quiet)
    with ctx:
        return ctx.run_dir, _sweep(ctx, opts, family)


def audit_timing_key(run_dir: str) -> str:
    """The ``timing`` key of one audit of a sweep (its wall time in seconds), by the audit's directory name."""
    return f"audit_{run_dir}_s"


def _sweep(ctx: RunContext, opts: SweepOptions, family: Family) -> Outcome:
    rows = sweep_rows(opts, ctx.run_dir / "audits", ctx.timing)
    plotted = [SweepPoint(epsilon_theory=r.epsilon_theory, epsilon_lb=r.epsilon_lb, series=r.series, method=r.method)
               for r in rows]
    plotted += [SweepPoint(epsilon_theory=r.epsilon_theory, epsilon_lb=r.epsilon_lb_valid,
                           series=f"{r.series} (best valid)", method=r.valid_method) for r in rows]
    verdict = sweep_verdict(rows, family)
    header = ResultsHeader(description=f"epsilon sweep of run dp on {opts.target}", delta=opts.delta,
                           confidence=opts.confidence, epsilon_theory=None)
    table = Table(title="Sweep", columns=["threat", "canary", "epsilon theory", "largest figure", "its method",
                                          "best valid lb", "its method", "audit verdict", "runs", "audit (in audits/)"],
                  rows=[[r.threat, r.canary, r.epsilon_theory, r.epsilon_lb, r.method, r.epsilon_lb_valid,
                         r.valid_method, r.verdict, r.runs, r.run_dir] for r in rows],
                  caption="largest figure: the largest bound of each audit, estimates included (GDP / per-step / "
                          "Gaussian-fit figures assume the stated tradeoff shape and never decide); best valid lb: the "
                          "audit's best bound that competed for its verdict; audit verdict: that audit's own verdict, "
                          "which also counts a rejection of the claim's tradeoff curve (a violation even when every "
                          "epsilon bound lies below the claim).")
    judgement = Unbounded(verdict=verdict,
                          family=Family(size=family.size, confidence=family.confidence))
    results = RunResults(header=header, judgement=judgement, tables=(table,),
                         detail=SweepDetail(sweep=tuple(plotted),
                                            rows=tuple(rows)))
    return ctx.finish(results, {"command": "sweep dp", "options": asdict(opts)})


def sweep_verdict(rows: Sequence[SweepRow], family: Family) -> Verdict:
    """The sweep's verdict: ``violation`` when any audit's own verdict is one (a valid bound above its
    claim, or a test that rejects the claim's tradeoff curve), each audit computed at the family's
    member confidence so that the sweep holds at ``family.confidence``. Estimates above the claim are
    counted apart and never decide."""
    family_text = (f"each audit at {family.member_confidence:.4g} confidence, so the sweep's verdict holds at "
                   f"{family.confidence:.0%} (family of {family.size} audits)")
    violations = [r for r in rows if r.verdict == "violation"]
    estimates = [r for r in rows if r.verdict != "violation" and r.epsilon_theory is not None
                 and r.epsilon_lb > r.epsilon_theory + 1e-9]
    flagged = (f"; {len(estimates)} other audit(s) have an assumption-based estimate above the claim (suspicious, "
               "never a violation)") if estimates else ""
    if violations:
        which = ", ".join(f"{r.threat} at epsilon {r.epsilon_claimed:g}" for r in violations)
        return Verdict(status="violation", text=f"{len(violations)} of {len(rows)} audits find a violation "
                                                f"({which}){flagged}; {family_text}")
    return Verdict(status="consistent", text=f"none of the {len(rows)} audits finds a violation{flagged}; "
                                             f"{family_text}")


def sweep_summary(run_dir: Path, outcome: Outcome) -> list[str]:
    """Lines printed after a sweep.

    Args:
        run_dir: the sweep's directory.
        outcome: its outcome (``rows``: one per audit; ``timing``: each audit's wall time).

    Returns:
        The lines.
    """
    lines = [f"report:    {run_dir / 'report.html'}"]
    for r in outcome.detail.rows or ():
        lines.append(f"{r.threat:<10} eps_theory {r.epsilon_theory:.3f}  largest {r.epsilon_lb:.3f} "
                     f"({r.method}), best valid {r.epsilon_lb_valid:.3f} ({r.valid_method}), "
                     f"{r.verdict}, {r.runs} runs, {outcome.stamp.timing[audit_timing_key(r.run_dir)]:.1f} s")
    lines.append(f"verdict:   {outcome.verdict.status}: {outcome.verdict.text}")
    return lines
