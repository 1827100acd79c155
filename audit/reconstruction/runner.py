"""``run reconstruction``: the n-candidate reconstruction game against the ReRo bound of the claim.

The record to reconstruct is drawn uniformly among ``n`` candidates (``kappa = 1/n``); the informed
adversary knows every other record and the training algorithm, sees the threat's observation and picks
the most likely candidate. Its success over the runs, with Clopper–Pearson intervals (Bonferroni over the
candidate counts), is set against the claim's ReRo bound ``1 - f(kappa)`` [Hayes, Mahloujifar, Balle,
NeurIPS 2023; docs/references.md, "Reconstruction robustness"], beside a non-private twin.
Adapters: :mod:`audit.reconstruction.dpsgd` (built-in DP-SGD targets: ``updates``, ``white-box``) and
:mod:`audit.reconstruction.dperm` (DP-ERM: the released parameters, ``white-box``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from audit.errors import UserError
from audit.executors import CachedExecutor
from audit.reconstruction.detail import ReconstructionDetail
from audit.reconstruction.dperm import dperm_games
from audit.reconstruction.dpsgd import GamePlan, dpsgd_games
from audit.reconstruction.game import bound_meaning, parse_candidate_counts, reconstruction_section, verdict
from audit.results_header import ResultsHeader, accountant
from audit.run_context import RunContext
from audit.run_options import CommonRunOptions
from audit.run_results import RunResults, Unbounded
from audit.stats.outcome import Figure, Outcome, Reconstruction, Table
from audit.theory.checks import check_confidence
from audit.theory.rero import rero_bound
from reports.reconstruction_plots import rero_success_plot
from targets.catalogue import dperm_release, is_plugin, lookup, trained_target
from targets.datasets import load_dataset
from targets.dperm import DPERM

FIGURE = "reconstruction.png"
THREATS = ("updates", "white-box")
#: Rounds per candidate count by preset.
RUNS = {"default": 400, "quick": 100}


@dataclass(frozen=True)
class ReconstructionOptions(CommonRunOptions):
    """Everything that determines a reconstruction run (stored in config.json)."""

    candidates: tuple[int, ...] = (10, 100, 1000)
    threat: str | None = None
    runs: int | None = None
    twin: bool = True


def _dpsgd(opts: ReconstructionOptions, counts: tuple[int, ...], runs: int, threat: str, ctx: RunContext):
    target = trained_target(opts.target).with_privacy(opts.epsilon, opts.delta)
    if not target.private:
        raise UserError(f"target {target.name} is not private: every DP-SGD target's run reconstruction trains its "
                        f"non-private twin beside it (e.g. --target dpgd_logreg_digits)")
    if target.momentum:
        raise UserError(f"target {target.name} uses momentum; the reconstruction game needs plain DP-SGD")
    data = load_dataset(target.dataset, opts.data_dir)
    train_index = np.random.default_rng([opts.seed, 5]).permutation(len(data))[:target.n_train]
    sigma = target.noise_multiplier()
    config = target.train_config(sigma)
    with opts.make_executor() as executor:  # cached chunks of runs on the run's executor (audit.executors)
        train = CachedExecutor(executor=executor, cache_dir=ctx.cache_dir, log=ctx.say).candidate_runs
        plan = GamePlan(counts=counts, runs=runs, threat=threat, seed=opts.seed, twin=opts.twin)
        games, info = dpsgd_games(data, train_index, config, plan, ctx.device, progress=not opts.quiet, train=train)
    return games, info, target.claim(sigma), target.description, data.name, target.params(sigma) | {
        "claimed_epsilon": target.epsilon, "delta": target.delta}


def _dperm(opts: ReconstructionOptions, counts: tuple[int, ...], runs: int, threat: str):
    if threat != "white-box":
        raise UserError(f"DP-ERM releases only its parameters: use --threat white-box (got {threat})")
    spec = dperm_release(opts.target)
    eps = spec["epsilon"] if opts.epsilon is None else opts.epsilon
    delta = spec["delta"] if opts.delta is None else opts.delta
    games, info, erm = dperm_games(opts.target, lambda n: DPERM(eps, delta, spec["l2_reg"], n), counts, runs,
                                   opts.seed, twin=opts.twin)
    return games, info, erm.claim, spec["description"], spec["dataset"], erm.params()


def run_reconstruction(opts: ReconstructionOptions) -> tuple[Path, Outcome]:
    """Run the reconstruction audit described by ``opts``; returns (run directory, results)."""
    check_confidence(opts.confidence)
    counts = parse_candidate_counts(opts.candidates)
    if is_plugin(opts.target):
        raise UserError("a trainer plugin is a black box (train(X, y, seed) -> predict_proba): it gives neither "
                        "updates nor parameters; run reconstruction takes the built-in DP-SGD and DP-ERM targets")
    dperm = dperm_release(opts.target) is not None
    entry = lookup(opts.target)
    if not dperm and (entry is None or entry.family != "trained"):
        raise UserError(f"run reconstruction takes the built-in DP-SGD and DP-ERM targets (got {opts.target})")
    threat = opts.threat or ("white-box" if dperm else "updates")
    if threat not in THREATS:
        raise UserError(f"unknown threat {threat!r}; choose one of {', '.join(THREATS)}")
    runs = opts.runs or RUNS["quick" if opts.quick else "default"]
    ctx = RunContext(opts.out, "reconstruction", opts.target, seed=opts.seed, quiet=opts.quiet, device=opts.device)
    ctx.say(f"run directory: {ctx.run_dir}")
    with ctx:
        with ctx.stage("games"):
            if dperm:
                games, info, claim, description, dataset, params = _dperm(opts, counts, runs, threat)
            else:
                games, info, claim, description, dataset, params = _dpsgd(opts, counts, runs, threat, ctx)
        section = reconstruction_section(games, claim, opts.confidence, threat) | info
        section["meaning"] = bound_meaning(section, claim, opts.target)
        grid = np.logspace(np.log10(min(1.0 / c for c in counts)) - 0.3, 0, 120)
        curve = {"kappa": grid, "bound": np.asarray(rero_bound(claim, grid))} if claim is not None else None
        rero_success_plot(section["points"], curve, ctx.run_dir / FIGURE,
                          f"Reconstruction of one record among n candidates: {opts.target} ({threat})")
        rows = [[p["n_candidates"], p["kappa"], p["successes"], p["runs"], p["success"],
                 p["success_ci"], p["rero_bound"],
                 p.get("twin_success", "")] for p in section["points"]]
        header = ResultsHeader(
            description=description, dataset=dataset, neighbouring=claim.neighbouring if claim is not None else None,
            confidence=opts.confidence, accountant=accountant(claim), params=params, delta=params["delta"],
            epsilon_theory=claim.epsilon(params["delta"]) if claim is not None else None)
        figure = Figure(file=FIGURE, title="Reconstruction success against the ReRo bound",
                        caption=f"{section['meaning']} Candidates: {info['candidates']}. Adversary sees: "
                                f"{info['observation']}. Intervals: two-sided Clopper–Pearson, "
                                f"{section['family']}, {opts.confidence:.0%} together.")
        table = Table(title="Success at each candidate count",
                      columns=["candidates n", "kappa", "successes", "runs", "success", "interval", "ReRo bound",
                               "non-private twin"], rows=rows,
                      caption="ReRo bound: 1 - f(kappa), f the claim's tradeoff curve (Hayes, Mahloujifar & "
                              "Balle 2023).")
        results = RunResults(
            header=header, judgement=Unbounded(verdict=verdict(section, claim)),
            detail=ReconstructionDetail(reconstruction=Reconstruction.from_dict(section, strict=True)),
            figures=(figure,), tables=(table,), quick=opts.quick)
        outcome = ctx.finish(results, {"command": "run reconstruction", "options": asdict(opts)})
        return ctx.run_dir, outcome


def summary_lines(run_dir: Path, outcome: Outcome) -> list[str]:
    """Summary printed after a reconstruction run.

    Args:
        run_dir: the run's directory.
        outcome: the run's outcome.

    Returns:
        The lines.
    """
    sec = outcome.detail.reconstruction
    lines = [f"report:    {run_dir / 'report.html'}", f"threat:    {sec.threat}; {sec.family}"]
    for p in sec.points:
        bound = "no claim" if p.rero_bound is None else f"ReRo bound {p.rero_bound:.3f}"
        twin = f", non-private twin {p.twin_success:.3f}" if p.twin_success is not None else ""
        lines.append(f"kappa 1/{p.n_candidates}: success {p.success:.3f} [{p.success_ci[0]:.3f}, "
                     f"{p.success_ci[1]:.3f}] over {p.runs} runs, {bound}{twin}")
    lines.append(f"verdict:   {outcome.verdict.status}: {outcome.verdict.text}")
    return lines
