"""``run dp``: multi-run audits of DP training (DP-SGD, full-batch DP-GD) and DP-ERM.

Two layers, so that other trainers can be plugged in:

* :class:`DPAuditSetup` says *how a run is trained and observed*: ``observe(included, seed)``
  trains ``len(included)`` runs (run r with the canary iff ``included[r]``) and returns an
  :class:`Observation` (one score per run, higher = canary in; optionally per-step observations).
  Builders here: :func:`dpsgd_setup` (registry targets, gradient or input canaries, threat models
  black-box / white-box / updates) and :func:`dperm_setup` (DP-ERM output perturbation, white-box).
* :func:`play` runs the game for any setup: fair coins (:func:`audit.dp.game.fair_coins`),
  ``observe``, statistics (:func:`audit.dp.game.audit_runs`), results.json and config.json (the report is
  the command's step, :func:`audit.report_step.write_report`). :func:`run_dp` = build the setup from the options
  + :func:`play`.

A plugin target (e.g. a black-box ``train(X, y, seed) -> predict_proba``) only needs to construct a
:class:`DPAuditSetup` with its claim and an ``observe`` function and call :func:`play` (then
:func:`audit.report_step.write_report` for its report).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from audit.dp.game import ScoreModel, audit_runs, fair_coins
from audit.dp.one_run.game import run_one_run
from audit.dp.options import DPOptions
from audit.dp.plugins.config import run_check_config
from audit.dp.plugins.one_run import plugin_one_run_summary, run_plugin_one_run
from audit.dp.setup import build_setup
from audit.dp.setup_types import DPAuditSetup
from audit.errors import UserError
from audit.plugins.accounting import check_lines
from audit.quiet import quiet_libraries
from audit.results_header import ResultsHeader, accountant
from audit.run_context import RunContext
from audit.run_results import RunResults
from audit.stats.outcome import Game, LastIterate, Outcome, Table
from targets.catalogue import is_language_model, is_plugin, resolve
from targets.plugins.loading import TrainerPlugin, load_plugin
from targets.plugins.rng import reproducibility_lines


@dataclass(frozen=True, kw_only=True)
class PlayOptions:
    """Where and how :func:`play` writes a run.

    Attributes:
        out: the folder of runs.
        quiet: print nothing while the audit runs.
        config_extra: more keys for config.json (e.g. the options, so that ``rerun`` repeats the run).
        run_name: the run directory's name instead of ``<utc-time>-dp-<target>`` (the audits of a sweep).
    """

    out: str | Path = "runs"
    quiet: bool = False
    config_extra: dict | None = None
    run_name: str | None = None


def play(setup: DPAuditSetup, runs: int, seed: int, confidence: float,
         options: PlayOptions = PlayOptions()) -> tuple[Path, Outcome]:
    """Toss the coins, observe the runs, bound epsilon, write results.json and config.json; returns (run dir,
    outcome) (:func:`audit.report_step.write_report` renders the report).

    ``confidence`` is the family-wise confidence of the verdict; ``options`` says where the run goes
    (:class:`PlayOptions`). An exception from ``observe`` (the target's code, or the workbench) leaves as
    :class:`audit.errors.AuditIncomplete` with its traceback in the run's log.txt."""
    included = fair_coins(runs, seed)  # checks runs before anything is written
    ctx = RunContext(options.out, "dp", setup.name, seed=seed, quiet=options.quiet, name=options.run_name)
    with ctx:
        return _play(ctx, setup, included, confidence, options)


def _play(ctx: RunContext, setup: DPAuditSetup, included: np.ndarray, confidence: float,
          options: PlayOptions) -> tuple[Path, Outcome]:
    seed, runs = ctx.seed, int(included.size)
    ctx.say(f"{setup.name}: {runs} runs ({int(included.sum())} with the canary), canary {setup.canary.get('kind')}, "
            f"threat {setup.threat}")
    with ctx.stage("observe"):
        obs = setup.observe(included, seed)
    t0 = time.perf_counter()
    model = ScoreModel(step_scores=obs.step_scores, sample_rate=obs.sample_rate, steps=obs.steps,
                       gaussian_pair=obs.gaussian, gaussian_fit=obs.gaussian_fit, design_sigma=obs.design_sigma,
                       strategy=obs.threshold_strategy)
    game = audit_runs(obs.scores, included, setup.claim, setup.delta, confidence, np.random.default_rng([seed, 3]),
                      model)
    ctx.timing["statistics_s"] = time.perf_counter() - t0
    attack = f"{setup.threat}/{setup.canary.get('kind')}"
    judgement = game.judgement.for_attack(attack)
    rows = [[b.method, b.epsilon, b.role, b.confidence, b.details.get("mu_lb", b.details.get("mu_step_lb")), b.n]
            for b in judgement.lower_bounds]
    header = ResultsHeader(description=setup.description, dataset=setup.dataset, model=setup.model,
                           neighbouring=setup.neighbouring, delta=setup.delta, confidence=confidence,
                           epsilon_theory=game.judgement.epsilon_theory, accountant=accountant(setup.claim),
                           params=setup.params)
    table = Table(title="Epsilon lower bounds of this audit",
                  columns=["method", "epsilon", "role", "confidence", "mu bound", "observations"], rows=rows,
                  caption="role verdict = statistically valid and competing for the best bound (each at the "
                          "family's per-member confidence); estimate = rests on the stated assumption "
                          "(GDP of a non-Gaussian pair, per-step model, Gaussian fit), never decides the verdict.")
    reference = (LastIterate.of(setup.params, setup.delta, setup.neighbouring, setup.claim)
                 if setup.threat == "black-box" else None)  # the adversary sees the final model only
    check = obs.reproducibility  # a plugin's
    results = RunResults(
        header=header, judgement=judgement, estimate=True,
        attacks={attack: game.attack_metrics},
        game=Game(runs=runs, canary_kind=setup.canary.get("kind"), canary=setup.canary, threat=setup.threat,
                  threshold_strategy=game.threshold_strategy, observation=obs.info,
                  included=int(included.sum()), inclusion="independent fair coin per run"),
        tables=(table, *obs.tables), last_iterate=reference,
        reproducible=None if check is None else check.reproducible,
        reproducibility_note=None if check is None else check.note)
    config = {"command": "run dp", "runs": runs, "seed": seed, "confidence": confidence,
              "setup": {"name": setup.name, "threat": setup.threat, "canary": setup.canary, "params": setup.params},
              } | setup.config | (options.config_extra or {})
    return ctx.run_dir, ctx.finish(results, config)


def lm_builtin_trainer(opts: DPOptions) -> TrainerPlugin:
    """The lm_trainer plugin of a built-in language-model target (:func:`targets.lm.plugins.lm_trainer_spec`);
    a one-line error without ``--one-run`` (one training: the many-run games would fine-tune it hundreds of
    times)."""
    if not opts.one_run:
        raise UserError(f"{opts.target} is a language model: audit its fine-tuning in one run, python -m audit run dp "
                        f"--target {opts.target} --one-run [--threat updates | white-box | black-box]")
    # the LM targets' code (transformers, peft): only when one is audited
    from targets.lm.plugins import lm_trainer_spec

    return load_plugin(lm_trainer_spec(opts.target))


def run_dp(opts: DPOptions) -> tuple[Path, Outcome]:
    """Build the setup for ``opts.target`` and play the game; returns (run directory, outcome).
    ``opts.check_config``: the accounting check of a trainer plugin alone (:mod:`audit.dp.plugins.config`);
    ``opts.one_run``: one training with gradient canaries (:func:`audit.dp.one_run.game.run_one_run`)."""
    with quiet_libraries(opts.quiet):  # -q silences the warnings of the user's libraries (Opacus, torch) too
        if opts.guesses is not None and not (opts.one_run and opts.threat == "black-box"):
            raise UserError("--guesses K applies to --one-run --threat black-box of a language-model trainer")
        if opts.input_canaries is not None and not (opts.one_run and opts.threat != "black-box"):
            raise UserError("--input-canaries M applies to --one-run of a trainer plugin (threat updates or white-box)")
        if opts.check_config:
            return run_check_config(opts)
        if is_language_model(resolve(opts.target)):  # a built-in LM target: its lm_trainer (targets.lm.plugins)
            return run_plugin_one_run(opts, lm_builtin_trainer(opts))
        if opts.one_run:
            return run_plugin_one_run(opts) if is_plugin(opts.target) else run_one_run(opts)
        if opts.canaries is not None:
            raise UserError("--canaries M applies to --one-run")
        setup = build_setup(opts)
        runs = opts.runs or setup.default_runs
        chosen = replace(opts, threat=setup.threat, canary=setup.canary["kind"])  # config.json records the defaults
        return play(setup, runs, opts.seed, opts.confidence,
                    PlayOptions(out=opts.out, quiet=opts.quiet, config_extra={"options": asdict(chosen)}))


def summary_lines(run_dir: Path, outcome: Outcome) -> list[str]:
    """Lines printed after a run.

    Args:
        run_dir: the run's directory.
        outcome: the run's outcome.

    Returns:
        The lines.
    """
    theory = outcome.epsilon_theory
    lines = check_lines(outcome.detail.config_check) if outcome.detail.config_check else []
    if outcome.game and outcome.game.trainings_text:
        lines += plugin_one_run_summary(outcome)
    lines += [f"report:    {run_dir / 'report.html'}",
              f"theory:    epsilon = {theory:.3f} at delta = {outcome.delta:g}" if theory is not None
              else "theory:    no claim"]
    for b in outcome.lower_bounds:
        eps = b.epsilon
        what = (f"epsilon >= {eps:.3f}" if eps is not None else
                f"mu >= {(b.details or {})['mu_lb']:.3f} (no epsilon at delta 0)")
        lines.append(f"bound:     {b.method:<18} {what} ({b.statement})")
    one = outcome.detail.one_run
    if one:
        expected = one.expected_perfect.mean if one.expected_perfect else float("nan")
        lines.append(f"one run:   {one.canaries} {outcome.game.canary_kind if outcome.game else None} canaries in "
                     f"one training, {one.k_pos} 'in' and {one.k_neg} 'out' guesses, {one.correct} right; "
                     f"perfect-attack expectation epsilon >= {expected:.3f} with this M; "
                     f"ceiling (every guess right) {one.ceiling:.3f}")
    if outcome.judged.last_iterate is not None:
        lines.append(outcome.judged.last_iterate.console_line())
    lines.append(f"verdict:   {outcome.verdict.status}: {outcome.verdict.text}")
    return lines + reproducibility_lines(outcome.audited.reproducible, outcome.audited.reproducibility_note)
