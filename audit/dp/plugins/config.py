"""``run dp --target module:factory --check-config``: the accounting check of a trainer plugin alone,
in about three trainings of the code (:mod:`audit.plugins.accounting`): the probe on the plugin's whole
dataset (one training, and its first steps again for the reproducibility check), one training on the
dataset plus one record and one on the dataset less one, no attack. Each stage prints one line when it
starts, with an estimate from the probe's time (:class:`audit.run_context.Stages`; nothing with ``-q``),
and goes to log.txt.

What each stage needs of the code: the probe, a whole training (the steps it takes are only known at
its end); the repeat, a few steps (:data:`audit.plugins.probe.REPEAT_STEPS`); the other worlds, whole
trainings again (their step count, rate and normaliser against the probe's: the steps only show at the
end of a run). The verdict is the check's (:func:`config_verdict`): could-not-read (exit 2 with
``--fail-above-claim``) when a check that could void the accounting was not read and nothing is a violation;
a violation (exit 1 with ``--fail-above-claim``) for every finding that means the accountant's epsilon does
not cover the training — the code's configuration less private than its claim, noise below the claim's or not fresh,
Gaussian and seed-dependent, no per-example clipping, sampling other than accounted (not Poisson, or at
another rate), a configuration that moves with one record added or removed. Alone, the check's
statistical tests get the whole alpha ``1 - confidence``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from audit.dp.detail import DpDetail
from audit.dp.game import ALPHA_GRID
from audit.dp.options import DPOptions
from audit.errors import UserError
from audit.plugins.accounting import (
    accounting_check,
    block_status,
    config_table,
    deciding_findings,
    unread_findings,
)
from audit.plugins.hf_trainer import TrainerWatch, trainer_findings, watched_trainer
from audit.plugins.lm_checks import LMChecks, lm_checks, watched_training
from audit.plugins.probe import Probe, StepMechanism, claim_and_mechanism, probe
from audit.plugins.training import plugin_dataset
from audit.results_header import ResultsHeader
from audit.run_context import RunContext, Stages
from audit.run_results import RunResults, Unbounded
from audit.stats.outcome import ConfigCheck, Curve, Family, Finding, Outcome, Verdict
from targets.catalogue import is_language_model, is_plugin, record_word
from targets.dataset import Dataset
from targets.plugins.loading import TrainerPlugin, load_plugin, plugin_config


def config_verdict(block: ConfigCheck) -> Verdict:
    """The verdict of an accounting check alone: a violation names the deciding finding first with its fix,
    then, as a sentence of its own, what else was found; otherwise consistent, naming any notes."""
    violations = deciding_findings(block)
    notes = [f for f in block.findings if f.problem and not f.violation]
    unread = unread_findings(block)
    if violations:
        first, *others = violations
        also = others + notes
        text = (f"accounting check violation, {first.sentence()}"
                + (f" Also found: {' | '.join(f.sentence() for f in also)}" if also else "")
                + (f" Could not read: {' | '.join(f.sentence() for f in unread)}" if unread else ""))
        return Verdict(status="violation", text=text, source="config_check")
    if unread:  # nothing unread passes: exit 2 under --fail-above-claim (audit.run_parser.gated_results)
        text = ("accounting check could not read what it needs, so nothing shows the code private: "
                + " | ".join(f.sentence() for f in unread)
                + (f" Notes: {' | '.join(f.sentence() for f in notes)}" if notes else ""))
        return Verdict(status="could-not-read", text=text, source="config_check")
    text = ("accounting check: the configuration the code runs is as private as claimed" if not notes else
            f"accounting check: within the claim. Notes: {' | '.join(f.sentence() for f in notes)}")
    return Verdict(status="consistent", text=text, source="config_check")


@dataclass(frozen=True, kw_only=True)
class ProbedPlugin:
    """What :func:`plugin_probe` read of a trainer plugin before any audited training.

    Attributes:
        claim: the claim audited (the plugin's, or what Opacus reports).
        mechanism: the DP-SGD the probe read (None: the language-model checks stopped the training).
        probe: the probe run (None likewise).
        data: the plugin's dataset.
        lm: the language-model checks (None: not a language-model trainer).
        trainer: the Hugging Face ``Trainer`` watched while the probe trained (None: not watched).
    """

    claim: Any
    mechanism: StepMechanism | None
    probe: Probe | None
    data: Dataset
    lm: LMChecks | None = None
    trainer: TrainerWatch | None = None


@dataclass(frozen=True, kw_only=True)
class PluginAccounting:
    """What :func:`plugin_accounting` returns: the probe's reading and the accounting check's block.

    Attributes:
        probed: what the probe read.
        block: the ``config_check`` block.
    """

    probed: ProbedPlugin
    block: ConfigCheck


#: The stages of ``--check-config`` that print a line (:class:`audit.run_context.Stages`).
CHECK_STAGES = ("probe", "repeat", "other_world")


def plugin_probe(plugin: TrainerPlugin, data_dir: str | None, seed: int,
                 stages: Stages | None = None) -> ProbedPlugin:
    """The probe on the plugin's whole dataset (a training and the first steps of its repeat); ``stages`` times
    and announces them. For a language-model trainer (:func:`targets.catalogue.is_language_model`) the probe's
    training is also the watched call of :mod:`audit.plugins.lm_checks`, whose checks follow (``lm``; else None);
    when they stop the training (it cannot run under Opacus as written) there is no probe: ``probe`` and
    ``mechanism`` are None when a finding voids the accounting (a violation); otherwise nothing was read and it is
    a UserError (exit 2), never a pass."""
    data = plugin_dataset(plugin, data_dir)
    if not is_language_model(plugin):
        found = probe(plugin, data.X, data.y, seed, plugin.delta, stages)
        claim, mech = claim_and_mechanism(plugin, found)
        return ProbedPlugin(claim=claim, mechanism=mech, probe=found, data=data)
    found = None
    with watched_training() as watch, watched_trainer() as trainer:
        found = probe(plugin, data.X, data.y, seed, plugin.delta, stages)
    with (stages or Stages()).stage("lm_checks", f"language-model checks: the probe's training read, its first "
                                                 f"steps replayed on chosen batches of its {len(data.X)} texts"):
        lm = lm_checks(plugin, data.X, data.y, seed, watch, None if found is None else found.trained)
    lm = LMChecks(trainer_findings(lm.findings, trainer), lm.runs)  # a Hugging Face Trainer's causes named
    if not lm.runs:
        if plugin.claim is None or not any(f.violation for f in lm.findings):
            # nothing read and nothing that voids the accounting: a gate must not pass it, the user must fix it
            what = "claims what Opacus reports, but" if plugin.claim is None else "states its claim, but"
            raise UserError(f"plugin {plugin.spec} {what} its training stops under Opacus, so its DP-SGD cannot be "
                            "read: " + " ".join(f"{f.message} Fix: {f.fix}." for f in lm.findings if f.problem))
        return ProbedPlugin(claim=plugin.claim, mechanism=None, probe=None, data=data, lm=lm)
    claim, mech = claim_and_mechanism(plugin, found)
    return ProbedPlugin(claim=claim, mechanism=mech, probe=found, data=data, lm=lm, trainer=trainer)


def lm_only_block(lm: LMChecks, claim: Any, delta: float, alpha: float, n_train: int) -> ConfigCheck:
    """The ``config_check`` block when the language-model checks stopped the training: their findings alone
    (no ``config``: the DP-SGD was not read) on the plugin's ``n_train`` texts."""
    return ConfigCheck(status=block_status(lm.findings), findings=tuple(lm.findings),
                       claimed_epsilon=float(claim.epsilon(delta)), delta=delta, alpha=alpha, alpha_split={},
                       trainings=1, n_train=n_train)


def plugin_accounting(plugin: TrainerPlugin, data_dir: str | None, seed: int, alpha: float,
                      probed: ProbedPlugin | None = None, stages: Stages | None = None) -> PluginAccounting:
    """Probe the plugin on its whole dataset (or take ``probed``, :func:`plugin_probe`) and run the accounting
    check with error budget ``alpha`` (its part of the audit's family); returns the ``config_check`` block
    with what the probe read. ``stages`` (default: a fresh one) times and announces the stages."""
    stages = stages or Stages()
    probed = probed or plugin_probe(plugin, data_dir, seed, stages)
    found, lm, data = probed.probe, probed.lm, probed.data
    X, y = data.X, data.y
    if found is None:
        return PluginAccounting(probed=probed, block=lm_only_block(lm, probed.claim, plugin.delta, alpha, len(X)))
    records = record_word(plugin)
    with stages.stage("other_world", f"other worlds: training the code on its {len(X)} {records} plus one record and "
                                     f"less one record, the configuration read again (accounting check)"):
        with watched_trainer():  # a Hugging Face Trainer's batches given to the steps that train on them
            block = accounting_check(plugin, X, y, seed, found, probed.claim, alpha)
    if lm is not None:  # the language-model checks first (audit.plugins.lm_checks.CHECKS)
        findings = lm.findings + trainer_findings(block.findings, probed.trainer)
        block = replace(block, findings=tuple(findings), status=block_status(findings),
                        trainings=block.trainings + 1)  # the replay (its three steps)
    opacus = None if found.opacus is None else found.opacus["epsilon"]
    return PluginAccounting(probed=probed, block=replace(block, driver=found.source.kind, n_train=int(len(X)),
                                                         opacus_reported_epsilon=opacus))


def run_check_config(opts: DPOptions, plugin: TrainerPlugin | None = None, probed: dict | None = None,
                     stages: Stages | None = None, unread: Sequence[Finding] = ()) -> tuple[Path, Outcome]:
    """The accounting check of ``opts.target`` (a trainer plugin) as a run of its own. ``plugin``, ``probed``
    (:func:`plugin_probe`) and ``stages``: a one-run audit's whose training the language-model checks stopped
    (no probe, so no canaries), or whose declared mechanism its canaries cannot audit (``unread``: that
    could-not-read finding, added to the block): the check is then its whole result."""
    if plugin is None:
        if not is_plugin(opts.target):
            raise UserError("--check-config reads the DP-SGD of a trainer plugin (--target module:factory or a "
                            "built-in plugin such as opacus_mnist); the project's DP-SGD targets state their "
                            "configuration")
        plugin = load_plugin(opts.target)
        if not isinstance(plugin, TrainerPlugin):
            raise UserError(f"plugin {opts.target} is a mechanism; --check-config applies to DP-SGD trainers")
    stages = stages or Stages.for_command(CHECK_STAGES, {"other_world": 2.0})
    ctx = RunContext(opts.out, "dp", plugin.name, seed=opts.seed, quiet=opts.quiet, stages=stages,
                     device=opts.device)
    with ctx:
        found = plugin_accounting(plugin, opts.data_dir, opts.seed, 1.0 - opts.confidence, probed, stages)
        block, claim = found.block, found.probed.claim
        if unread:
            findings = (*block.findings, *unread)
            block = replace(block, findings=findings, status=block_status(findings))
        header = ResultsHeader(description=plugin.description, dataset=found.probed.data.name,
                               model={"name": f"user trainer {plugin.spec}"}, delta=plugin.delta,
                               confidence=opts.confidence, epsilon_theory=float(claim.epsilon(plugin.delta)),
                               accountant=getattr(claim, "description", None), params={"plugin": plugin.spec})
        family = Family(confidence=opts.confidence, split={"config_check": block.alpha},
                        text=f"the accounting check alone: its tests share alpha {block.alpha:.3g}")
        judgement = Unbounded(verdict=config_verdict(block), family=family,
                              tradeoff=Curve(alpha=ALPHA_GRID, beta=claim.tradeoff(ALPHA_GRID)))
        results = RunResults(header=header, judgement=judgement, detail=DpDetail(config_check=block),
                             tables=(config_table(block),))
        config = {"command": "run dp", "check_config": True, "seed": opts.seed, "options": asdict(opts),
                  "plugin": plugin_config(plugin)}
        return ctx.run_dir, ctx.finish(results, config)
