"""``run dp --target module:factory --one-run``: ONE training of a user's DP-SGD code (Opacus unchanged, or a
loop with the two hooks of :mod:`targets.audit_hooks`) on the plugin's whole dataset, with M gradient
canaries, plus the accounting check of :mod:`audit.plugins.accounting` in the same run.

Order (4 whole trainings and the first steps of a fifth, none of them cut to a subset of the data; each
stage prints one line when it starts, with an estimate from the probe's time, and goes to log.txt,
:class:`audit.run_context.Stages`):

1. **Probe** (:func:`audit.dp.plugins.config.plugin_probe`, one training and the first steps of its repeat
   from the same seed, :data:`audit.plugins.probe.REPEAT_STEPS`, no canary):
   the DP-SGD the code runs (:class:`audit.plugins.probe.StepMechanism`: noise multiplier, Poisson rate,
   steps), its clip norm, its parameter count and how much data gradient each coordinate received.
   ``--canaries`` above what the model holds and ``--threat white-box`` on a hooked loop (which reports its
   updates, not its parameters) are one-line errors here, before a run directory is written.
2. **Design**, from the probe and the seed only (never the canaries' coins or scores): the number of
   canaries (``--canaries``, else :func:`audit.stats.one_run.design.default_canary_count` capped by the
   parameter count and :data:`audit.dp.one_run.game.DEFAULT_MAX_CANARIES`) and the guess counts
   (:func:`audit.stats.one_run.design.choose_one_run_design`) by simulating the mechanism the probe read.
3. **Accounting check** (one training on the dataset plus one record, one on the dataset less one): findings
   printed first; each violation decides the verdict (:func:`combined_verdict`).
4. **The audited training**: one call of ``train`` with a :class:`targets.audit_hooks.CanaryRecorder`: each
   canary in by its own fair coin, each included one joining every real step by its own Poisson coin at
   the code's rate, ``C`` times its direction — a Dirac on one of M coordinates spread over every
   parameter tensor, in each those the data touch least, while the parameters last, else a seeded random
   unit direction. ``updates``: canary i's per-step
   observation (noisy sum minus the clipped data sum, on its direction, / C) scored by the likelihood ratio
   of the mechanism the code runs (:func:`audit.stats.one_run.design.dpsgd_canary_llr`; cross-talk of random
   directions read as extra noise). ``white-box`` (Opacus only): the total change of the parameters
   ``theta_0 - theta_T`` projected on each direction.

The audited run also carries **input canaries** (:mod:`audit.dp.plugins.input_canaries`: records, or texts for a
language-model trainer, each joining the data by its own fair coin), scored from what ``train`` returns, for
what happens to the data outside the DP steps; a claim their bound rejects is a violation (:func:`input_verdict`).

Bounds: :func:`audit.dp.one_run.bounds.one_run_results`. **One family.** The accounting check's statistical tests
and the one-run bounds share the audit's alpha ``1 - confidence`` (:func:`family_shares`): the check gets
:data:`audit.plugins.accounting.ONE_RUN_SHARE` of it (split among its tests as that module says), the input
canaries' bound :data:`audit.plugins.accounting.INPUT_CANARY_SHARE` when the run carries them, the gradient
canaries' bound the rest (computed, and its guess counts designed, at ``1 - alpha/4``, or ``1 - alpha/2``
without input canaries), so the verdict holds at the confidence the audit prints; results.json records the
split (``family.split``, ``config_check.alpha``).
What each threat can and cannot see:
:data:`THREAT_COVERAGE`. Sources: docs/references.md, "One-run auditing" and "Configuration checks".
"""

from __future__ import annotations

import math
import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from audit.dp.detail import DpDetail
from audit.dp.one_run.bounds import OneRunResults, one_run_results
from audit.dp.one_run.game import (
    canary_capacity,
    check_canary_count,
    design_canaries,
    design_games,
    one_run_table,
    random_canary_directions,
)
from audit.dp.options import DPOptions
from audit.dp.plugins.config import ProbedPlugin, config_verdict, plugin_accounting, plugin_probe, run_check_config
from audit.dp.plugins.input_canaries import InputCanaries, canary_scores, input_canaries, with_canaries
from audit.dp.plugins.lm_blackbox import run_lm_blackbox
from audit.errors import UserError
from audit.plugins.accounting import INPUT_CANARY_SHARE, ONE_RUN_SHARE, config_table
from audit.plugins.gate_checks import (
    GateCheck,
    only_dpsgd_participation,
    only_independent_noise,
    unsupported_finding,
)
from audit.plugins.probe import require_steps, run_once
from audit.results_header import ResultsHeader
from audit.run_context import RunContext, Stages
from audit.run_results import RunResults
from audit.stats.judgement import Judgement
from audit.stats.metrics import attack_metrics
from audit.stats.one_run.design import (
    CanaryMechanism,
    DesignObjective,
    dpsgd_canary_llr,
)
from audit.stats.outcome import AttackMetrics, ConfigCheck, Finding, Game, Outcome, Table, Verdict
from audit.theory.declared_mechanism import DeclaredMechanism
from targets.audit_hooks import CanaryRecorder
from targets.catalogue import is_language_model, record_word
from targets.gradient_canaries import crosstalk_variance, spread_coordinates
from targets.lm.device import using_lm_device
from targets.plugins.loading import TrainerPlugin, load_plugin, plugin_config
from targets.training import resolve_device

__all__ = ["run_plugin_one_run", "THREAT_COVERAGE", "PLUGIN_ONE_RUN_THREATS"]

#: The threats a one-run audit of a trainer plugin gives (black-box one-run: ``run membership``; for a
#: language-model trainer, canary texts: :mod:`audit.dp.plugins.lm_blackbox`).
PLUGIN_ONE_RUN_THREATS = ("updates", "white-box")

#: The stages of a plugin's one-run audit that print a line, and what each costs in trainings of the code.
ONE_RUN_STAGES = ("probe", "repeat", "other_world", "design", "audited_run")
ONE_RUN_TRAININGS = {"other_world": 2.0, "audited_run": 1.0}

#: Which mistakes each part of the one-run audit can see: (mistake, updates, white-box, accounting check).
THREAT_COVERAGE = (
    ("no per-example clipping (sum unclipped, or the batch clipped as a whole)",
     "no: the canaries are added after the clipping, already of norm C",
     "no: same canaries",
     "yes: a step's clipped data sum longer than C x its batch size proves it (needs the step's records: "
     "the data loaders or add_canary(batch=))"),
    ("noise smaller than the claim needs",
     "yes: every canary observation carries the noise the code adds; the bound exceeds the claim when the "
     "noise is small enough",
     "yes, less power: the noise of all steps is summed",
     "yes: the noise measured in the probe per parameter tensor and step (Opacus too, its optimizer's figure "
     "kept), by the PLD accountant; also noise reused across steps, not Gaussian, or the same for every seed"),
    ("more steps or a higher sampling rate than accounted (extra epochs, physical batch taken as the sampled one)",
     "partly: the canaries join every real step at the code's rate, so they see the real T and q, but one run "
     "certifies a fraction of the claim's epsilon and rarely exceeds it",
     "partly: as updates, with less power",
     "yes: steps and rate read from the code, epsilon by the PLD accountant, and the claim curve"),
    ("batches not Poisson-sampled (shuffled loader accounted as Poisson, the loop iterating the DataLoader "
     "it gave make_private)",
     "no: the canaries join by their own Poisson coins",
     "no: same canaries",
     "yes, a violation: sampling test on the records each step held (needs them: the data loaders or "
     "add_canary(batch=))"),
    ("sampling at another rate than declared (add_canary's sample_rate, Opacus's loader rate)",
     "no: the canaries join at the declared rate, so they see the mechanism the claim describes",
     "no: same canaries",
     "yes, a violation: two-sided binomial test of the records the batches held against the declared rate "
     "(needs the steps' records)"),
    ("a configuration that moves with one record (rate, steps or normaliser from len(data))",
     "no: one dataset, one run", "no: one dataset, one run",
     "yes, a violation: the configuration read with one record added and with one removed"),
    ("passes over the data outside the DP steps (a non-private warm-up before make_private, a polish epoch after)",
     "no: the canaries join the DP steps only", "a polish: partly (the final parameters move); a warm-up: no",
     "a pass after the DP steps: yes, the final-model check (Opacus: the model returned must be a combination of "
     "the DP iterates); a warm-up before them: no — the input canaries of the same run test it, with their own "
     "share of alpha (audit.dp.plugins.input_canaries)"),
)


def _plugin(opts: DPOptions, plugin: TrainerPlugin | None) -> TrainerPlugin:
    """The trainer plugin audited, and one-line errors for options a plugin's one-run audit does not take."""
    if plugin is None:
        plugin = load_plugin(opts.target)
    if not isinstance(plugin, TrainerPlugin):
        raise UserError(f"plugin {opts.target} is a mechanism; --one-run audits DP-SGD trainers "
                        f"(python -m audit run mechanism --target {opts.target})")
    if is_language_model(plugin) and opts.threat == "black-box":  # canary texts (audit.dp.plugins.lm_blackbox)
        return plugin
    if opts.epsilon is not None or opts.delta is not None:
        raise UserError("--epsilon/--delta do not apply to a plugin: its factory states the claim")
    if opts.threat == "black-box":
        raise UserError(f"the one-run black-box game of a trainer plugin is the membership audit: python -m audit "
                        f"run membership --target {opts.target}; --one-run takes --threat updates or white-box")
    if is_language_model(plugin) and not plugin.lm.claimed:
        raise UserError(f"plugin {opts.target} claims no privacy (no 'claim') and runs no DP-SGD to put gradient "
                        f"canaries in; audit its texts with --threat black-box --epsilon E")
    given = [flag for flag, on in (("--runs", opts.runs is not None), ("--canary", opts.canary is not None),
                                   ("--init pretrained", opts.init != "random"),
                                   ("--calibration-runs", opts.calibration_runs > 0)) if on]
    if given:
        raise UserError(f"{', '.join(given)} do(es) not apply to --one-run (one training, gradient canaries); "
                        f"use --canaries M")
    return plugin


def _check_probe(opts: DPOptions, plugin: TrainerPlugin, probed: ProbedPlugin, threat: str) -> tuple[int, int]:
    """(parameters, canary capacity) of the probed code; one-line errors for a threat it cannot give or more
    canaries than it holds."""
    found, mech = probed.probe, probed.mechanism
    if threat == "white-box" and found.recorder.initial is None:
        raise UserError(f"plugin {plugin.spec} is a hooked loop: it reports its updates, not its parameters; audit it "
                        f"with --threat updates (white-box needs Opacus, whose parameters the audit reads, or a JAX "
                        f"loop passing params= to both hooks of targets.jax_hooks)")
    n_params = found.n_params
    capacity = canary_capacity(n_params, mech.sample_rate, mech.noise_multiplier)
    check_canary_count(opts, capacity, n_params, f"plugin {plugin.name}'s model holds")
    return n_params, capacity


def _recorder(opts: DPOptions, touched: np.ndarray, sizes: tuple[int, ...], m: int) -> tuple[CanaryRecorder, dict]:
    """M canaries with their fair coins: Dirac in every parameter tensor on its least-touched coordinates
    (:func:`targets.gradient_canaries.spread_coordinates`), or random unit directions."""
    included = np.random.default_rng([opts.seed, 11]).random(m) < 0.5
    coin_seed = [opts.seed, 29]
    n_params = int(touched.size)
    if m <= n_params:
        coords = spread_coordinates(touched, sizes, m)
        return (CanaryRecorder(included, coin_seed, coordinates=coords),
                {"kind": "dirac", "directions": f"Dirac: {m} distinct coordinates of the {n_params}, in every one of "
                 f"the {len(sizes)} parameter tensors (equal shares up to each tensor's size), in each those the "
                 f"data's clipped gradients touched least in the probe run", "norm": "C"})
    d = random_canary_directions(opts.seed, m, n_params)
    return (CanaryRecorder(included, coin_seed, directions=d),
            {"kind": "random", "directions": f"random unit directions ({m} canaries > {n_params} parameters: seeded "
             "Gaussian directions, cross-talk between them read as extra noise)", "norm": "C"})


def _scores(recorder: CanaryRecorder, threat: str, mech: CanaryMechanism, crosstalk: float) -> np.ndarray:
    """One score per canary (module docstring, step 4)."""
    if threat == "updates":
        return dpsgd_canary_llr(recorder.canary_observations, mech.sample_rate,
                                math.sqrt(mech.noise_multiplier ** 2 + crosstalk))
    moved = np.asarray(recorder.initial, dtype=np.float64) - np.asarray(recorder.final, dtype=np.float64)
    if recorder.coordinates is not None:
        return moved[recorder.coordinates]
    return recorder.directions.astype(np.float64) @ moved


def run_plugin_one_run(opts: DPOptions, plugin: TrainerPlugin | None = None) -> tuple[Path, Outcome]:
    """One training of a trainer plugin with M gradient canaries and the accounting check (module
    docstring); ``plugin``: an already loaded plugin (``assert_private``), else ``opts.target`` is loaded."""
    plugin = _plugin(opts, plugin)
    threat = opts.threat or "updates"
    if threat == "black-box":
        return run_lm_blackbox(opts, plugin)
    stages = Stages.for_command(ONE_RUN_STAGES, ONE_RUN_TRAININGS)
    with using_lm_device(resolve_device(opts.device)):  # as in the run's context below
        probed = plugin_probe(plugin, opts.data_dir, opts.seed, stages)
    if probed.probe is None:  # the language-model checks stopped the training (audit.plugins.lm_checks)
        return run_check_config(opts, plugin, probed, stages)
    unsupported = one_run_support(plugin.mechanism)
    if unsupported:  # the accounting check alone, with the one-run test said not run
        return run_check_config(opts, plugin, probed, stages, unread=(unsupported,))
    n_params, capacity = _check_probe(opts, plugin, probed, threat)
    found, step_mech, data = probed.probe, probed.mechanism, probed.data
    mech = CanaryMechanism(step_mech.sample_rate, step_mech.noise_multiplier, step_mech.steps)
    alpha = 1.0 - opts.confidence
    inputs = input_canaries(plugin, data, opts.input_canaries, opts.seed,
                            (mech, float(probed.claim.epsilon(plugin.delta)),
                             DesignObjective(delta=plugin.delta, confidence=1.0 - alpha * INPUT_CANARY_SHARE)))
    shares = family_shares(opts, inputs is not None)
    ctx = RunContext(opts.out, "dp", plugin.name, seed=opts.seed, quiet=opts.quiet, stages=stages,
                     device=opts.device)
    with ctx:
        block = plugin_accounting(plugin, opts.data_dir, opts.seed, shares["config_check"], probed, stages).block
        bound_confidence = 1.0 - shares["one_run"]
        with ctx.stage("design", f"design: the number of canaries and guesses, from {design_games(opts)} games "
                                 f"simulated under the DP-SGD the probe read"):
            design = design_canaries(replace(opts, confidence=bound_confidence), mech, plugin.delta, n_params)
        recorder, cinfo = _recorder(opts, found.recorder.touched, found.recorder.sizes, design.canaries)
        X, y = with_canaries(data.X, data.y, inputs, opts.seed)
        records = record_word(plugin)
        with ctx.stage("audited_run", f"audited run: the training on all {len(data)} {records} with {design.canaries} "
                                      f"{cinfo['kind']} gradient canaries ({int(recorder.included.sum())} in), "
                                      f"threat {threat}" + (f", and {inputs.describe()}" if inputs else "")):
            trained = run_once(plugin, X, y, int(np.random.SeedSequence([opts.seed, 37]).generate_state(1)[0]),
                               recorder)
        require_steps(plugin, recorder)
        if sum(recorder.sizes) != n_params:
            raise UserError(f"the audited run of plugin {plugin.spec} trained {sum(recorder.sizes)} parameters where "
                            f"the probe saw {n_params}; the audit needs the same model in every call of train")
        crosstalk = crosstalk_variance(design.canaries, n_params, mech.sample_rate)
        scores = _scores(recorder, threat, mech, crosstalk)
        with ctx.stage("statistics"):
            stats = one_run_results(scores, recorder.included, probed.claim, plugin.delta, bound_confidence, design)
            inputs_found = None
            if inputs is not None:
                input_scores = canary_scores(plugin, trained, inputs)
                inputs_found = InputCanaryRun(canaries=inputs, scores=input_scores, stats=one_run_results(
                    input_scores, inputs.included, probed.claim, plugin.delta, 1.0 - shares["input_canaries"],
                    inputs.design))
        audited = AuditedPluginRun(plugin=plugin, probed=probed, block=block, threat=threat, scores=scores,
                                   recorder=recorder, canary_info=cinfo, capacity=capacity, crosstalk=crosstalk,
                                   inputs=inputs_found)
        results = _results(opts, audited, stats)
        config = {"command": "run dp", "one_run": True, "seed": opts.seed, "confidence": opts.confidence,
                  "options": asdict(opts) | {"threat": threat, "canaries": design.canaries},
                  "plugin": plugin_config(plugin)}
        if not opts.quiet:
            print(f"one run: {design.canaries} canaries, {design.k_pos + design.k_neg} guesses, "
                  f"{stats.one_run.correct} right; "
                  f"{results.game.trainings} trainings", file=sys.stderr)
        return ctx.run_dir, ctx.finish(results, config)


def one_run_support(mechanism: DeclaredMechanism) -> Finding | None:
    """None when the one-run test can audit ``mechanism``, else its could-not-read finding: its canaries join
    every step as DP-SGD records by their own Poisson coins and are scored against independent noise, so under
    cyclic, truncated or fixed participation, or noise correlated across steps, the bound is not for the
    mechanism the code runs (a correct banded-noise loop was certified a violation: issue 49). The accounting
    check still runs; the verdict is could-not-read unless it finds a violation."""
    reason = only_dpsgd_participation(mechanism) or only_independent_noise(mechanism)
    if not reason:
        return None
    return unsupported_finding(GateCheck("one-run", 1000, fix_unsupported="audit this mechanism with "
                                         "--check-config; its one-run analysis is not in the gate yet"), reason)


def combined_verdict(block: ConfigCheck, verdict: Verdict) -> Verdict:
    """The one-run verdict with the accounting check's, one verdict line: a violation of the check decides (a
    finding that voids the accounting, named first with its fix), the one-run bound's verdict follows as a
    sentence of its own; a check not read decides next (could-not-read) unless the bound is a violation; else
    the one-run bound's verdict, then the check's notes."""
    checked = config_verdict(block)
    if checked.status == "violation" or (checked.status == "could-not-read" and verdict.status != "violation"):
        return replace(checked, text=f"{checked.text} One-run bound (alone): {verdict.text}.",
                       one_run=verdict.to_dict())
    notes = [f"{f.check}: {f.message}" for f in block.findings if f.problem]
    return replace(verdict, text=f"{verdict.text}. Accounting check notes: {' | '.join(notes)}") if notes else verdict


def coverage_table() -> Table:
    """Report table of :data:`THREAT_COVERAGE`."""
    return Table(title="What each part of the one-run audit can and cannot see",
                 columns=["mistake in the code", "updates (gradient canaries)", "white-box (final parameters)",
                          "accounting check"],
                 rows=[list(row) for row in THREAT_COVERAGE],
                 caption="Gradient canaries are added after the code's clipping, so they test the noise and the "
                         "steps the code really takes, never its clipping or how it samples the data; the "
                         "accounting check reads those from the same instrumentation. The claim's own tradeoff "
                         "curve is tested with the canaries' guesses too.")


@dataclass(frozen=True, kw_only=True)
class InputCanaryRun:
    """The input canaries of a plugin's one-run audit and what their one-run bound found.

    Attributes:
        canaries: the input canaries.
        scores: one black-box score per canary.
        stats: their one-run statistics (their own member of the family).
    """

    canaries: InputCanaries
    scores: np.ndarray
    stats: OneRunResults


@dataclass(frozen=True, kw_only=True)
class AuditedPluginRun:
    """What a plugin's one-run audit found before its statistics (:func:`run_plugin_one_run`).

    Attributes:
        plugin: the trainer plugin.
        probed: the probe's findings (:func:`audit.dp.plugins.config.plugin_probe`).
        block: the accounting check's ``config_check`` block.
        threat: ``updates`` or ``white-box``.
        scores: one score per canary.
        recorder: the audited run's canaries and observations.
        canary_info: what the canaries are (``game.canary``).
        capacity: the most canaries the model holds.
        crosstalk: the random directions' cross-talk variance (0 for Dirac canaries).
        inputs: the input canaries and their one-run statistics (None: the run carried none).
    """

    plugin: TrainerPlugin
    probed: ProbedPlugin
    block: ConfigCheck
    threat: str
    scores: np.ndarray
    recorder: CanaryRecorder
    canary_info: dict
    capacity: int
    crosstalk: float
    inputs: InputCanaryRun | None = None

    def observation(self) -> dict:
        """``game.observation``: the score, the canaries' joins and steps, how the guesses were chosen."""
        joins, crosstalk = np.asarray(self.recorder.joined), self.crosstalk
        return {"score": ("likelihood ratio of the per-step observations under the mechanism the code runs"
                          + (f" (cross-talk variance {crosstalk:.3g} read as noise)" if crosstalk else "")
                          if self.threat == "updates" else
                          "total parameter change (initial - final) projected on the canary direction"),
                "canary_copies_per_step_mean": float(joins.mean()) if joins.size else 0.0,
                "steps_audited_run": self.recorder.steps, "steps_probe": self.probed.probe.steps,
                "capacity": self.capacity,
                "guess_counts": "chosen for the perfect attack of the updates threat, simulating the mechanism "
                                "the probe read (noise multiplier, rate, steps)"}

    def input_attack(self, confidence: float) -> dict[str, AttackMetrics]:
        """``attacks`` entry of the input canaries (none without them)."""
        if self.inputs is None:
            return {}
        canaries = self.inputs.canaries
        return {f"black-box/input-{canaries.kind}": attack_metrics(self.inputs.scores, canaries.included,
                                                                   confidence)}

    def input_summary(self) -> dict | None:
        """``game.input_canaries``: what the input canaries were and what their bound found."""
        if self.inputs is None:
            return None
        canaries, judgement, one = self.inputs.canaries, self.inputs.stats.judgement, self.inputs.stats.one_run
        best = judgement.best_lower_bound
        return {"kind": canaries.kind, "canaries": canaries.canaries, "included": int(canaries.included.sum()),
                "description": canaries.describe(), "design": canaries.design.to_dict(),
                "k_pos": canaries.design.k_pos, "k_neg": canaries.design.k_neg,
                "correct": one.correct, "claim_rejected": one.claim_rejected,
                "epsilon_lower_bound": None if best is None else best.epsilon,
                "confidence": canaries.design.confidence, "verdict": judgement.verdict.status}

    def input_tables(self) -> list[Table]:
        """The input canaries' bounds table (none without them)."""
        if self.inputs is None:
            return []
        canaries, stats = self.inputs.canaries, self.inputs.stats
        table = one_run_table(stats.one_run, stats.judgement.lower_bounds)
        return [replace(table, title=f"Input canaries ({canaries.kind}) in the same training: bounds",
                        caption=f"{canaries.describe()}. {table.caption}")]

    def params(self) -> dict:
        """``params``: the plugin's claim, the DP-SGD the code runs and what Opacus reported."""
        plugin, found, mech = self.plugin, self.probed.probe, self.probed.mechanism
        claim = self.probed.claim
        return {"plugin": plugin.spec, "rng": plugin.rng, "claimed_epsilon": float(claim.epsilon(plugin.delta)),
                "claimed_delta": plugin.delta, "n_train": int(len(self.probed.data)),
                "clip_norm": found.clip_norm,
                "code": mech.to_dict() | {"epsilon_pld": float(mech.claim().epsilon(plugin.delta)),
                                          "sampling": "poisson" if found.source.poisson else "not poisson",
                                          "driver": found.source.kind},
                "opacus_reported": found.opacus} | plugin.params


def family_shares(opts: DPOptions, with_inputs: bool) -> dict[str, float]:
    """The alpha of each member of a plugin's one-run family (module docstring): the accounting check
    (:data:`audit.plugins.accounting.ONE_RUN_SHARE`), the input canaries when the audited run carries them
    (:data:`audit.plugins.accounting.INPUT_CANARY_SHARE`, :func:`audit.dp.plugins.input_canaries.input_canaries`)
    and the gradient canaries' one-run bound (the rest)."""
    alpha = 1.0 - opts.confidence
    shares = {"config_check": alpha * ONE_RUN_SHARE}
    if with_inputs:
        shares["input_canaries"] = alpha * INPUT_CANARY_SHARE
    return shares | {"one_run": alpha - sum(shares.values())}


def _family(opts: DPOptions, judgement: Judgement, with_inputs: bool) -> Judgement:
    """One family: the shares of :func:`family_shares`."""
    bound_confidence = judgement.family.confidence
    split = family_shares(opts, with_inputs)
    inputs = (f", the input canaries' bound at {1.0 - split['input_canaries']:.2%}" if "input_canaries" in split
              else "")
    family = replace(judgement.family, confidence=opts.confidence, split=split,
                     text=f"one family at {opts.confidence:.0%}: the accounting check's tests share alpha "
                          f"{split['config_check']:.3g}, the one-run bound holds at {bound_confidence:.2%}{inputs}",
                     one_run_confidence=bound_confidence)
    return replace(judgement, family=family)


def input_verdict(verdict: Verdict, inputs: InputCanaryRun | None) -> Verdict:
    """The gradient canaries' verdict, unless the input canaries' bound rejects the claim: then theirs, named as
    a pass outside the DP steps (their own member of the family)."""
    if inputs is None:
        return verdict
    canaries = inputs.canaries
    found = inputs.stats.judgement.verdict
    if found.status != "violation":
        return replace(verdict, text=f"{verdict.text}. Input canaries ({canaries.canaries}): {found.text}")
    return replace(found, text=f"input canaries: {found.text}: the released model remembers more of its "
                               f"{canaries.kind} than the claim allows, so some pass over the data outside the "
                               "DP-SGD steps (a non-private warm-up or polish, batches sliced off tensors) reached "
                               "them. Fix: train on the data only through the DP optimizer's steps, every epoch "
                               f"accounted. Gradient canaries: {verdict.text}", source="input_canaries")


def _results(opts: DPOptions, audited: AuditedPluginRun, stats: OneRunResults) -> RunResults:
    """The typed results of a plugin's one-run audit (kind dp, ``game.one_run``, ``config_check``)."""
    plugin, block, threat = audited.plugin, audited.block, audited.threat
    found, claim, data = audited.probed.probe, audited.probed.claim, audited.probed.data
    attack = f"{threat}/one-run-{audited.canary_info['kind']}"
    judgement = _family(opts, stats.judgement.for_attack(attack), audited.inputs is not None)
    verdict = input_verdict(judgement.verdict, audited.inputs)
    judgement = judgement.with_verdict(combined_verdict(block, verdict))
    one, inc = stats.one_run, audited.recorder.included
    trainings = int(block.trainings) + 1
    header = ResultsHeader(
        description=plugin.description, dataset=data.name,
        model={"name": f"user trainer {plugin.spec}", "parameters": found.n_params},
        neighbouring="add/remove one record (each canary)", delta=plugin.delta, confidence=opts.confidence,
        accountant=getattr(claim, "description", None), params=audited.params())
    metrics = {attack: attack_metrics(audited.scores, inc, opts.confidence)} | audited.input_attack(opts.confidence)
    return RunResults(
        header=header, judgement=judgement, estimate=True, family=True,
        attacks=metrics,
        detail=DpDetail(one_run=one,
                        config_check=block,
                        threat_coverage=[dict(zip(("mistake", "updates", "white-box", "config_check"), row,
                                                  strict=True)) for row in THREAT_COVERAGE]),
        game=Game(one_run=True, runs=1, canaries=int(inc.size), canary_kind=audited.canary_info["kind"],
                  canary=audited.canary_info, threat=threat, observation=audited.observation(),
                  trainings_text=f"{trainings} calls of the code's training: the probe, the first steps of its "
                                 f"repeat (stopped once the reproducibility check is decided) and of a run from "
                                 f"another seed (the noise-seed test), "
                                 + ("three steps replayed on chosen batches (language-model checks), "
                                    if is_language_model(plugin) else "")
                                 + "the dataset plus one record and less one record (accounting check), and the "
                                   "one audited run",
                  threshold_strategy="one-run guesses: 'in' for the k_pos highest scores, 'out' for the k_neg "
                                     "lowest (0: one-sided), both fixed by simulating "
                                     "the mechanism the probe read",
                  trainings=trainings, included=int(inc.sum()), n_train=int(len(data)),
                  input_canaries=audited.input_summary(),
                  inclusion="independent fair coin per canary; each included canary joins every real step by "
                            "its own Poisson coin at the code's sampling rate, C times its unit direction"),
        tables=(config_table(block), one_run_table(one, judgement.lower_bounds),
                *audited.input_tables(), coverage_table()))


def plugin_one_run_summary(outcome: Outcome) -> list[str]:
    """Extra summary lines of a plugin's one-run audit (after the accounting check's).

    Args:
        outcome: the run's outcome (its ``game`` names the rows and the trainings).

    Returns:
        The lines.
    """
    game = outcome.game or Game()
    lm = "language-model checks" in (game.trainings_text or "")
    replay = "the language-model checks' replay, " if lm else ""
    lines = [f"training:  the audited run on all {game.n_train} {'texts' if lm else 'rows'}; "
             f"{game.trainings} calls of the code's training in all (probe, the first steps of its repeat and of "
             f"a run from another seed, "
             f"{replay}the dataset plus and less one record, the audited run)"]
    inputs = game.input_canaries
    if inputs:
        bound = inputs["epsilon_lower_bound"]
        lines.append(f"inputs:    {inputs['canaries']} input canaries ({inputs['kind']}, {inputs['included']} in) in "
                     f"the same training, {inputs['k_pos']} 'in' and {inputs['k_neg']} 'out' guesses, "
                     f"{inputs['correct']} right; epsilon >= {0.0 if bound is None else bound:.3g} at "
                     f"{inputs['confidence']:.2%}"
                     + (": the claim is rejected" if inputs["claim_rejected"] else ""))
    return lines
