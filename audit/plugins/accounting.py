"""The accounting check of a user's DP-SGD code, in seconds: read the configuration it runs and test
it against its claim, before (or instead of) any attack [Abadi et al. 2016, Alg. 1; Chua et al.
2024; the class of Opacus issues 571 and 819]. Sources: docs/references.md, "Configuration checks".

From the probe (:func:`audit.plugins.probe.probe`: the plugin's ``train`` once on its dataset, no
canary) and two more instrumented calls, on the dataset plus one record (its first row duplicated)
and on the dataset less one record (its first row removed). Every finding that means the
accountant's epsilon does not cover the training is a **violation** (the verdict names it first,
with its fix); what leaves the accounting intact is a note:

* **clipping**: every step's clipped data sum has norm at most ``C`` times its batch size (triangle
  inequality); a larger one proves the code does not clip each example to C: a violation.
* **world-dependence**: the configuration read with one record added and with one removed
  (:func:`audit.theory.config_check.compare_world_configs`). A rate, step count, normaliser,
  noise multiplier or clip that moves with one record is a violation, whatever the noise: the
  training is then not DP for add/remove neighbours at that dataset size (Opacus's rate
  ``1/len(loader)`` and its normaliser ``int(n q)`` move wherever ``n`` sits on a batch boundary).
* **sampling**: which records each step held (``add_canary(batch=...)`` or the training set's data
  loaders, whatever loader the loop iterates) tested for Poisson sampling
  (:func:`audit.stats.sampling_check.sampling_from_batches`): shuffled, fixed-size or otherwise
  not Poisson while accounted as Poisson is a violation.
* **records**: what each noisy step's per-sample gradients were computed on, in the probe and both other
  worlds (:func:`targets.audit_hooks.loader_indices`: the batches of the data loaders whose gradients
  reached the step; no-grad passes never count): examples from a dataset that is not the records given
  (packed or split records, Hugging Face's ``group_texts`` blocks) void per-record accounting, a violation
  (:func:`records_finding`).
* **rate**: the records the batches held against the rate accounted (the rate passed to
  ``add_canary``; Opacus: its loader's), by the exact two-sided binomial test
  (:func:`audit.stats.sampling_check.rate_test`): a rejected rate is a violation.
* **noise** (:func:`audit.stats.noise_check.check_noise`, the noise share of alpha split among its
  tests): noise below the multiplier the claim needs in any tensor or step, noise not drawn afresh at
  every step, noise that is not Gaussian, and noise that does not change with the seed (the probe
  against the first steps of a run on the same records from another seed): each a violation.
* **final-model** (:mod:`audit.plugins.final_model`), from the run on the dataset plus one record: the
  parameters the code returns must be its last DP iterate or a linear combination of its iterates (an
  average or EMA); a model changed outside DP-SGD (a non-private pass after the noisy steps) is a
  violation; a model the audit cannot read (a hooked loop, a returned object it cannot reach) is said so.
* **epsilon**: the configuration the code runs — noise multiplier (measured from the noise the probe
  added, per parameter tensor: the largest value consistent with the least noisy tensor,
  :func:`measured_sigma`; Opacus: its optimizer's figure when smaller, reported beside it), the
  rate, the noisy steps it took — by our PLD accountant
  (:func:`audit.theory.config_check.check_config_against_claim`). Above the claim: a violation.

**The alpha split.** The check's statistical tests share one error budget ``alpha`` (the accounting check's part of
the audit's family: all of ``1 - confidence`` with ``--check-config``, half of it with ``--one-run``,
:data:`ONE_RUN_SHARE`), split before any data is seen by the registry of checks
(:func:`audit.plugins.gate_checks.alpha_split` over :data:`CHECKS`, the checks that apply to the declared
mechanism). Under plain Poisson: a quarter to the rate test, a quarter to the sampling test (its four dispersion
tails at a sixteenth of alpha each, each exact or a Monte-Carlo p-value of the law given the total), a quarter to
the periodicity check, half to records that join only every c-th step (cyclic participation accounted as Poisson,
:func:`audit.stats.participation_check.periodic_participation_check`) and half to batches cut to a cap (truncation
accounted as Poisson, :func:`audit.stats.participation_check.cap_under_poisson_check`), and a quarter to the noise
(one alpha for the tests of :func:`audit.stats.noise_check.check_noise`, split among them there). Under another
declared participation, two thirds to its own law's test (:func:`participation_finding`) and a third to the noise. A
loop that runs exactly as it is declared is flagged with probability at most ``alpha`` (Bonferroni); the clipping
and world-dependence checks are facts read from the code, not tests, and use none of it.

**The declared mechanism.** Each registered check says which mechanisms it applies to and which it can test
(:mod:`audit.theory.declared_mechanism`, the plugin's ``"mechanism"``): a declared cyclic, truncated,
balls-in-bins or min-separation participation is tested under its own law (the ``participation`` check, in
place of the sampling, periodicity and rate tests); noise correlated by a declared banded Toeplitz strategy is
decorrelated step by step before the noise tests (:func:`audit.plugins.probe.probe_recorder`), read at the
strategy's sensitivity; epsilon and the noise the claim needs come from the DpEvent jax_privacy builds for the
mechanism (:func:`targets.plugins.declared.event_maker`). A check that cannot test the declared mechanism (a BLT
or dense strategy; a participation jax_privacy has no accountant for) does not run and says could-not-read with
the reason (:func:`audit.plugins.gate_checks.unsupported_finding`): never a violation of correct code, never a
pass.

**Nothing unread passes.** Each check ends ok, violation, or *could not read* with its reason (a finding
with ``read`` False: the records of the steps unseen, so sampling, rate and clipping untested): a check that
could void the accounting and was not read makes the block "could-not-read", printed on the terminal and in
the verdict, never "as claimed" (:func:`unread_findings`).

:func:`accounting_check` returns the ``config_check`` block of results.json and the lines printed
first on the command line.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from audit.plugins.confirmation import CONFIRM_ALPHA, confirmed
from audit.plugins.final_model import final_model_check
from audit.plugins.gate_checks import (
    GateCheck,
    alpha_split,
    deciding_rank,
    plain_poisson,
    register,
    registered,
    unsupported_finding,
)
from audit.plugins.probe import Probe, first_steps_from_another_seed, probe_recorder, require_steps, run_once
from audit.stats.decorrelation import banded_sensitivity_reason, noise_scale
from audit.stats.noise_check import NoiseCheck, check_noise
from audit.stats.outcome import ClippingCheck, ConfigCheck, Finding, Table
from audit.stats.participation_check import (
    ParticipationResult,
    balls_in_bins_check,
    cap_under_poisson_check,
    cyclic_poisson_check,
    min_separation_check,
    periodic_participation_check,
)
from audit.stats.sampling_check import rate_test, sampling_from_batches
from audit.theory.config_check import (
    CONFIG_TOLERANCE,
    DPSGDConfig,
    check_config_against_claim,
    compare_world_configs,
    steps_beyond_claim,
)
from audit.theory.declared_mechanism import BallsInBins, DeclaredMechanism, MinSeparation, PoissonParticipation
from audit.theory.dp_accounting_adapter import calibrate_event_sigma, event_epsilon
from audit.theory.dpsgd import calibrate_noise_multiplier
from targets.audit_hooks import UpdateRecorder
from targets.final_params import IterateSketch
from targets.plugins.declared import accounting_gap, event_maker
from targets.plugins.loading import TrainerPlugin

#: Relative slack of the clipping check (float32 sums).
CLIP_SLACK = 1e-3
#: Below this fraction of the noise the claim needs, the check reports the noise itself (the PLD of a
#: nearly noiseless step is huge and slow to compute).
MIN_SIGMA = 0.25
#: The sampling test's tails (two dispersion tests, two tails each), each at the sampling share / 4.
SAMPLING_TAILS = 4
#: The accounting check's part of the audit's alpha when the one-run test shares the family.
ONE_RUN_SHARE = 0.5
#: The input canaries' part of it in a plugin's one-run audit (:mod:`audit.dp.plugins.input_canaries`): the
#: family is then the check (1/2), the gradient canaries' bound (1/4) and the input canaries' bound (1/4); without
#: input canaries the gradient canaries' bound has the other half.
INPUT_CANARY_SHARE = 0.25
#: The least positive float: the noise multiplier a tensor without noise is carried with.
TINY = float(np.finfo(float).tiny)
FIX_RECORDS = ("give the training one example per record (pad or truncate each text to its own sequence; never join "
               "records and cut them into blocks, as group_texts does), or account for the unit really protected: "
               "give the plugin those examples as its records and claim privacy per example")
FIX_PERIODIC = ("account for the participation the loop runs: declare it (a cyclic or balls-in-bins participation, "
                "e.g. jax_privacy's sampler as the plugin's 'mechanism') and claim its epsilon, or sample every record "
                "at every step by its own coin as plain Poisson sampling")
FIX_SAMPLING = ("sample each record by its own coin with rate q at every step, as accounted (with Opacus, iterate "
                "the data loader make_private returns, with poisson_sampling=True)")


def measured_sigma(noise: NoiseCheck, sigma_code: float | None) -> float:
    """The noise multiplier the configuration's epsilon is computed with: the largest value consistent with
    the noise measured in the least noisy tensor, or the optimizer's (Opacus) when that is smaller."""
    return float(noise.sigma_upper if sigma_code is None else min(sigma_code, noise.sigma_upper))


def read_config(recorder: UpdateRecorder, sigma: float, dataset_size: int) -> DPSGDConfig:
    """The :class:`DPSGDConfig` one instrumented run shows (``sigma``: the noise multiplier taken)."""
    sizes = [b.size for b in recorder.batches if b is not None]
    return DPSGDConfig(noise_multiplier=float(sigma), steps=recorder.steps, sample_rate=recorder.source.sample_rate,
                       dataset_size=int(dataset_size), clip=recorder.clip_norm,
                       normalisation=recorder.normalisation or "expected", normaliser=recorder.normaliser,
                       batch_sizes=tuple(sizes) if len(sizes) == recorder.steps else ())


def clipping_check(recorder: UpdateRecorder) -> ClippingCheck:
    """Whether every step's clipped data sum has norm <= C x its batch size (module docstring)."""
    pairs = [(norm, b.size) for norm, b in zip(recorder.data_norms, recorder.batches, strict=True) if b is not None]
    if not pairs:
        why = ("they came from examples that are not the records (the records finding)" if recorder.foreign else
               "pass batch= to add_canary, or iterate a torch DataLoader over the training set")
        return ClippingCheck(checked=False, problem=False,
                             message=f"Could not read: the records of each step were not seen ({why}), so "
                                     "per-example clipping was not checked.")
    c = float(recorder.clip_norm)
    ratio = max(norm / (c * max(size, 1)) if norm > 0 else 0.0 for norm, size in pairs)
    worst = max(range(len(pairs)), key=lambda i: pairs[i][0] - c * pairs[i][1])
    bad = sum(norm > c * size * (1 + CLIP_SLACK) + 1e-9 for norm, size in pairs)
    return ClippingCheck(
        checked=True, problem=bad > 0, steps_checked=len(pairs), steps_over=int(bad),
        largest_norm_over_c_times_batch=ratio, worst_step={"norm": pairs[worst][0], "batch": pairs[worst][1]},
        message=(f"{bad} of {len(pairs)} steps have a clipped data sum longer than C x batch size (largest ratio "
                 f"{ratio:.3g}): the code does not clip each example to C." if bad else
                 f"Every step's clipped data sum is within C x its batch size ({len(pairs)} steps)."))


def unread_findings(block: ConfigCheck) -> list[Finding]:
    """The checks that could void the accounting and could not be read (a could-not-read verdict when nothing
    else is a violation: exit 2 under ``--fail-above-claim``)."""
    return [f for f in block.findings if f.unread]


def records_finding(runs: Sequence[tuple[str, UpdateRecorder, int]]) -> Finding:
    """The **records** finding (module docstring): a violation when a step's per-sample gradients were computed
    on examples that are not the records given (:attr:`targets.audit_hooks.UpdateRecorder.foreign`) in any of
    ``runs`` (its name, its recorder, the records it was given); ok otherwise (steps whose records were not seen
    at all leave sampling, rate and clipping unread, which say so)."""
    seen = [(name, run, n) for name, run, n in runs if run.foreign]
    if not seen:
        return Finding.checked("records", False, True, "No noisy step's per-sample gradients came from examples other "
                               f"than the records given ({', '.join(name for name, _, _ in runs)}).")
    name, run, n = seen[0]
    count, size = run.foreign[0]
    message = (f"The per-sample gradients of {len(run.foreign)} of the {run.steps} noisy steps ({name}) were computed "
               f"on examples of a dataset of {size} items where the plugin gave {n} records (e.g. {count} examples "
               "in one step): the training's examples are not the records. Packed or split records (Hugging Face's "
               "run_clm.py group_texts joins the texts and cuts them into blocks: one text spans several blocks "
               "and adding one shifts every later block) put one record in several examples and several records "
               "in one, so one record changes more than one clipped gradient and the accountant's per-record "
               "epsilon does not hold; sampling, rate and clipping cannot be read per record.")
    details = {"runs": {name: {"steps": run.steps, "foreign_steps": len(run.foreign),
                               "dataset_sizes": sorted({s for _, s in run.foreign}), "records": n}
                        for name, run, n in seen}}
    return Finding.checked("records", True, True, message, FIX_RECORDS, details)


def _unseen_steps(recorder: UpdateRecorder, what: str) -> str:
    """Why ``what`` was not tested when some steps' records were not seen."""
    seen = sum(b is not None for b in recorder.batches)
    why = ("they came from examples that are not the records (the records finding)" if recorder.foreign else
           "pass batch= to add_canary, or iterate a torch DataLoader over the training set")
    return (f"Could not read: the records of {recorder.steps - seen} of the {recorder.steps} steps were not seen "
            f"({why}), so {what} was not tested.")


def _seen_batches(recorder: UpdateRecorder) -> list[np.ndarray] | None:
    """The records each step held, or None when some step's were not seen."""
    batches = [b for b in recorder.batches if b is not None]
    return batches if len(batches) == recorder.steps else None


def sampling_finding(recorder: UpdateRecorder, n: int, alpha: float, seed: int = 0) -> list[Finding]:
    """The sampling finding (module docstring) from the records each step held, at the sampling test's
    ``alpha`` (its :data:`SAMPLING_TAILS` tails share it); none at one step, could-not-read when some step's
    records were not seen. ``seed`` seeds the test's draws of its conditional law
    (:func:`audit.stats.sampling_check.sampling_from_batches`)."""
    batches = _seen_batches(recorder)
    if batches is None:
        return [Finding.checked("sampling", False, True, _unseen_steps(recorder, "the sampling"), read=False)]
    if recorder.steps < 2:
        return []
    sampling = sampling_from_batches(batches, n, significance=alpha / SAMPLING_TAILS, seed=seed).to_dict()
    problem = sampling["verdict"] not in ("poisson", "inconclusive", "full-batch")
    return [Finding.checked("sampling", problem, True, f"Sampling read from the records each step held: "
                            f"{sampling['verdict']}. {sampling['message']}", FIX_SAMPLING if problem else "",
                            sampling)]


def rate_finding(recorder: UpdateRecorder, n: int, rate: float, alpha: float) -> Finding:
    """The rate finding (module docstring): the records the steps held against ``rate`` at level ``alpha``;
    could-not-read when some step's records were not seen."""
    batches = _seen_batches(recorder)
    if batches is None:
        return Finding.checked("rate", False, True, _unseen_steps(recorder, "the sampling rate"), read=False)
    test = rate_test(batches, n, rate, alpha)
    if test["rejected"]:
        message = (f"The batches held {test['observed']:.4g} of the records per step ({test['records']} over "
                   f"{recorder.steps} steps of {n}) where the accounting uses rate {rate:.4g} (two-sided binomial "
                   f"p = {test['p_value']:.2g} < {test['alpha']:.2g}): the accountant's epsilon is for another rate.")
        fix = (f"sample at the rate you account: pass the rate the loop really samples with ({test['observed']:.3g} "
               f"here) to add_canary and the accountant, or sample at {rate:.4g}")
    else:
        message = (f"The batches held {test['observed']:.4g} of the records per step, consistent with the accounted "
                   f"rate {rate:.4g} (two-sided binomial p = {test['p_value']:.2g}).")
        fix = ""
    return Finding.checked("rate", test["rejected"], True, message, fix, test)


def _epsilon_finding(config: DPSGDConfig, claim: Any, delta: float, sigma: float, needed: float,
                     source: str) -> Finding:
    """The epsilon finding (module docstring); far too little noise is said without the PLD (``sigma``: the
    multiplier measured, 0 for a tensor without noise, which the configuration carries as the least positive
    float); ``source``: where the noise multiplier comes from, in words."""
    claimed = float(claim.epsilon(delta))
    if sigma < MIN_SIGMA * needed:
        return Finding.checked("epsilon", True, True, f"The loop adds noise of multiplier at most {sigma:.3g}, where "
                               f"{config.rate:.4g} sampling and {config.steps} steps need at least {needed:.4g} for "
                               f"the claimed epsilon {claimed:.3g}.", f"raise the noise multiplier to at least "
                               f"{needed:.4g}", {"config": config.to_dict(), "noise_multiplier_needed": needed,
                                                 "noise_multiplier_source": source})
    found = check_config_against_claim(config, claim, delta)
    return Finding.of(replace(found, details=found.details | {"noise_multiplier_source": source}), True)


def world_training(plugin: TrainerPlugin, X: np.ndarray, y: np.ndarray, seed: int, salt: int,
                   recorder: UpdateRecorder) -> Any:
    """One instrumented call of ``train`` on ``(X, y)`` into ``recorder``, from a seed of its own (``salt``), no
    canary; returns what ``train`` returned."""
    trained = run_once(plugin, X, y, int(np.random.SeedSequence([seed, salt]).generate_state(1)[0]), recorder)
    require_steps(plugin, recorder)
    return trained


def world_run(plugin: TrainerPlugin, X: np.ndarray, y: np.ndarray, seed: int, salt: int) -> UpdateRecorder:
    """:func:`world_training` into a fresh recorder (:func:`audit.plugins.probe.probe_recorder`), returned."""
    other = probe_recorder(plugin.mechanism)
    world_training(plugin, X, y, seed, salt, other)
    return other


@dataclass(frozen=True)
class Evidence:
    """What the instrumented trainings recorded, read once, for the registered checks (:func:`accounting_check`).

    Attributes:
        probe: the probe's recorder (the plugin's whole dataset, ``n`` records).
        added: the run on the dataset plus its first record (its iterates sketched for the final-model check).
        removed: the run on the dataset less its first record.
        trained: what ``train`` returned in the run with one record added.
        n: the records given.
        mechanism: the declared mechanism.
        alphas: the registered statistical checks' alpha (:func:`audit.plugins.gate_checks.alpha_split`).
        noise: the noise tests on the probe and the run with one record added.
        config: the DP-SGD configuration the probe shows (noise multiplier: :func:`measured_sigma`).
        claim: the privacy claim; ``delta``: its delta.
        needed: the noise multiplier the claim needs at the probe's rate and steps.
        sigma_code: the optimizer's noise multiplier (Opacus), else None.
        seed: the audit's seed.
        make_event: the declared mechanism's DpEvent as a function of sigma (:func:`mechanism_event`); None for
            DP-SGD, accounted by our PLD accountant.
    """

    probe: UpdateRecorder
    added: UpdateRecorder
    removed: UpdateRecorder
    trained: Any
    n: int
    mechanism: DeclaredMechanism
    alphas: dict[str, float]
    noise: NoiseCheck
    config: DPSGDConfig
    claim: Any
    delta: float
    needed: float
    sigma_code: float | None
    seed: int
    make_event: Callable[[float], Any] | None = None

    @functools.cached_property
    def clipping(self) -> ClippingCheck:
        """The clipping check of the probe (:func:`clipping_check`), read once for its finding and the block."""
        return clipping_check(self.probe)

    @property
    def noisy_enough(self) -> bool:
        """Whether the probe's noise is within reach of the claim (a PLD is computed)."""
        return self.config.noise_multiplier >= MIN_SIGMA * self.needed

    def sigma_of(self, run: UpdateRecorder) -> float:
        """The noise multiplier a world's run is read with: a hooked loop, the probe's measurement; Opacus, its
        optimizer's figure capped by the noise measured."""
        if self.sigma_code is None:
            return self.config.noise_multiplier
        return max(measured_sigma(self.noise, run.source.noise_multiplier), TINY)


def world_finding(ev: Evidence) -> Finding:
    """The configuration read with the first of the ``n`` records duplicated (``ev.added``, :func:`world_run`) and
    with it removed (``ev.removed``), against the probe's (module docstring): a move either way is a violation;
    where it moved and the noise is within reach of the claim, each world's PLD epsilon too."""
    config, n = ev.config, ev.n
    added = read_config(ev.added, ev.sigma_of(ev.added), n + 1)
    removed = read_config(ev.removed, ev.sigma_of(ev.removed), n - 1)
    delta = ev.delta if ev.noisy_enough else None
    worlds = {"adding": (config, added), "removing": (removed, config)}
    pairs = [(word, compare_world_configs(*pair)) for word, pair in worlds.items()]
    if delta is not None:  # each world's PLD epsilon, where the configuration moved
        pairs = [(word, compare_world_configs(*worlds[word], delta=delta) if f.problem else f) for word, f in pairs]
    details = {word: f.details for word, f in pairs}
    moved = [(word, f) for word, f in pairs if f.problem]
    if not moved:
        return Finding.checked("world-dependence", False, False, "The DP-SGD configuration is the same with one "
                        "record added and with one removed, as the accounting assumes.", "", details)
    message = " ".join(f"{'Adding' if word == 'adding' else 'Removing'} one record: {f.message}" for word, f in moved)
    fixes = dict.fromkeys(part for _, f in moved for part in f.fix.split("; ") if part)
    return Finding.checked("world-dependence", True, True, message, "; ".join(fixes), details)


def _noise_source(measured: dict[str, Any], sigma_code: float | None, alpha: float) -> str:
    """Where the epsilon finding's noise multiplier comes from, in words (``alpha``: the noise tests' level)."""
    return ((f"the optimizer's {sigma_code:.4g}, capped by " if sigma_code is not None else "")
            + f"the noise measured per parameter tensor: at most {measured['upper']:.4g} in the least noisy tensor "
            f"({measured['worst_tensor']}; estimate over all tensors {measured['estimate']:.4g}, "
            f"{measured['coordinates_x_steps']} coordinate-steps, level {alpha:.3g} split among the noise tests)")


def steps_named(findings: list[Finding]) -> list[Finding]:
    """``findings`` with the noise-level violation naming the steps when the epsilon violation found that the noise
    read from the code meets the claim over fewer steps than the loop took (``steps_within_claim``) and the noise
    falls short over the whole training, not at some steps only (``uniform_over_steps``): a loop running steps
    beyond its accounting (``max_steps`` or epochs larger than the accountant's) reads as noise below what its steps
    need, and the noise-level finding, which decides first, says so with the epsilon finding's fix. A step without
    its noise (a warm-up) keeps the noise fix: fewer steps would not pass."""
    epsilon = next((f for f in findings if f.check == "epsilon" and f.violation and f.details
                    and f.details.get("steps_within_claim")), None)
    if epsilon is None:
        return findings
    within, steps = int(epsilon.details["steps_within_claim"]), int(epsilon.details["config"]["steps"])
    return [replace(f, message=f"{f.message} {steps_beyond_claim(within, steps)}", fix=epsilon.fix)
            if f.check == "noise-level" and f.violation and (f.details or {}).get("uniform_over_steps") else f
            for f in findings]


def accounting_check(plugin: TrainerPlugin, X: np.ndarray, y: np.ndarray, seed: int, found: Probe, claim: Any,
                     alpha: float) -> ConfigCheck:
    """The ``config_check`` block (module docstring): the evidence of the probe and the two other worlds
    (:class:`Evidence`), then every registered check (:func:`audit.plugins.gate_checks.registered`) that runs on
    it, or its could-not-read finding when it cannot test the plugin's declared mechanism. ``found.source`` reports the
    optimizer's noise multiplier (Opacus: capped by the noise measured) or None (a hooked loop: measured only);
    ``alpha``: the check's part of the audit's alpha, split by the registry; ``claim`` holds at the plugin's
    delta."""
    mechanism, delta = plugin.mechanism, plugin.delta
    ev = gather_evidence(plugin, X, y, seed, found, claim, alpha)
    findings: list[Finding] = []
    ran = []
    for check in registered(mechanism):
        if check.run is None:
            continue
        reason = check.supports(mechanism)
        findings += [unsupported_finding(check, reason)] if reason else list(check.run(ev))
        ran += [] if reason else [check]
    findings, again = confirmed(findings, ran, lambda alphas: fresh_evidence(plugin, X, y, ev, alphas))
    findings = steps_named(findings)
    clipping = ev.clipping
    sampling = next((f.details for f in findings if f.check == "sampling" and f.details and f.read), None)
    epsilon = next((f.details.get("epsilon") for f in findings if f.check == "epsilon" and f.details), None)
    alphas = ev.alphas
    return ConfigCheck(status=block_status(findings), findings=tuple(findings),
                       config=ev.config.to_dict() | {"epsilon": epsilon}, claimed_epsilon=float(claim.epsilon(delta)),
                       delta=delta, noise_measured=ev.noise.summary | {"optimizer": ev.sigma_code}, sampling=sampling,
                       clipping=clipping, alpha=alpha,
                       alpha_split=alphas | ({"sampling_per_tail": alphas["sampling"] / SAMPLING_TAILS}
                                             if "sampling" in alphas else {}),
                       trainings=5 + again, nulls=frozenset({"sampling"} if sampling is None else ()),
                       mechanism=None if mechanism.is_dpsgd else mechanism.to_dict())


def gather_evidence(plugin: TrainerPlugin, X: np.ndarray, y: np.ndarray, seed: int, found: Probe, claim: Any,
                    alpha: float) -> Evidence:
    """The :class:`Evidence` of :func:`accounting_check`: the runs with one record added and removed, and the noise
    tests of the probe (the noise multiplier the configuration is read with), its noise-seed test against the first
    steps of a run on the same records from another seed
    (:func:`audit.plugins.probe.first_steps_from_another_seed`). For a declared
    mechanism other than DP-SGD that jax_privacy accounts, the noise the claim needs is calibrated on its DpEvent
    and the noise tests read the noise with the declared correlation undone at the strategy's sensitivity
    (:mod:`audit.stats.decorrelation`)."""
    recorder, alphas, sigma_code = found.recorder, alpha_split(alpha, plugin.mechanism), found.source.noise_multiplier
    delta, mechanism, n = plugin.delta, plugin.mechanism, len(X)
    claimed = float(claim.epsilon(delta))
    make_event = mechanism_event(mechanism, recorder, n)
    needed = float(calibrate_noise_multiplier(claimed, delta, recorder.source.sample_rate, recorder.steps)
                   if make_event is None else calibrate_event_sigma(make_event, claimed, delta))
    added_run = probe_recorder(mechanism)
    added_run.iterates = IterateSketch(recorder.steps, seed)  # the final-model check reads this run
    trained = world_training(plugin, np.concatenate([X, X[:1]]), np.concatenate([y, y[:1]]), seed, 31, added_run)
    seeded = first_steps_from_another_seed(plugin, X, y, int(np.random.SeedSequence([seed, 53]).generate_state(1)[0]))
    noise = check_noise(recorder.noise, seeded.noise, noise_clip(mechanism, recorder.clip_norm), needed,
                        alphas["noise"])
    sigma = max(measured_sigma(noise, sigma_code), TINY)  # a tensor without noise measures 0
    removed_run = world_run(plugin, X[1:], y[1:], seed, 43)
    return Evidence(probe=recorder, added=added_run, removed=removed_run, trained=trained, n=n,
                    mechanism=mechanism, alphas=alphas, noise=noise, config=read_config(recorder, sigma, n),
                    claim=claim, delta=delta, needed=needed, sigma_code=sigma_code, seed=seed, make_event=make_event)


def noise_clip(mechanism: DeclaredMechanism, clip: float) -> float:
    """The clip norm the noise tests read the (decorrelated) noise with: ``clip`` times the declared banded
    strategy's sensitivity (:func:`audit.stats.decorrelation.noise_scale`), ``clip`` for independent noise."""
    return clip * (noise_scale(mechanism.noise.coefficients) if mechanism.noise.kind == "banded-toeplitz" else 1.0)


def fresh_evidence(plugin: TrainerPlugin, X: np.ndarray, y: np.ndarray, ev: Evidence,
                   alphas: dict[str, float]) -> Evidence:
    """``ev`` with the probe replaced by one more training of the code from another seed (fresh sampling and fresh
    noise) and its tests at ``alphas``: the evidence that confirms a statistical violation
    (:mod:`audit.plugins.confirmation`). Its noise-seed test compares it with the probe (the same records, another
    seed)."""
    fresh = probe_recorder(ev.mechanism)
    run_once(plugin, X, y, int(np.random.SeedSequence([ev.seed, 47]).generate_state(1)[0]), fresh)
    require_steps(plugin, fresh)
    noise = check_noise(fresh.noise, ev.probe.noise, noise_clip(ev.mechanism, fresh.clip_norm), ev.needed,
                        alphas.get("noise", CONFIRM_ALPHA))
    sigma = max(measured_sigma(noise, ev.sigma_code), TINY)
    return replace(ev, probe=fresh, noise=noise, config=read_config(fresh, sigma, len(X)), alphas=alphas)


def mechanism_event(mechanism: DeclaredMechanism, recorder: UpdateRecorder, n: int) -> Callable[[float], Any] | None:
    """The declared mechanism's DpEvent as a function of sigma at the rate (declared, else the hooks') and steps
    the probe ran (:func:`targets.plugins.declared.event_maker`); None for DP-SGD (our PLD accountant) or a
    mechanism jax_privacy does not account (:func:`targets.plugins.declared.accounting_gap`)."""
    if mechanism.is_dpsgd or accounting_gap(mechanism):
        return None
    rate = getattr(mechanism.participation, "rate", None) or recorder.source.sample_rate
    return event_maker(mechanism, float(rate), recorder.steps, n)


def _run_epsilon(ev: Evidence) -> list[Finding]:
    """The epsilon finding of the evidence: DP-SGD's (:func:`_epsilon_finding`) or the declared mechanism's
    (:func:`_mechanism_epsilon_finding`)."""
    shown = measured_sigma(ev.noise, ev.sigma_code)
    source = _noise_source(ev.noise.summary, ev.sigma_code, ev.alphas["noise"])
    if ev.make_event is not None:
        return [_mechanism_epsilon_finding(ev, shown, source)]
    return [_epsilon_finding(ev.config, ev.claim, ev.delta, shown, ev.needed, source)]


def _mechanism_epsilon_finding(ev: Evidence, sigma: float, source: str) -> Finding:
    """The epsilon of the declared mechanism at the noise multiplier measured (``sigma``, with the declared
    correlation undone; ``source`` says where it comes from), the rate and the steps the code ran, by the PLD
    accountant on the DpEvent jax_privacy builds for it; above the claim beyond
    :data:`audit.theory.config_check.CONFIG_TOLERANCE`, a violation."""
    claimed, cfg = float(ev.claim.epsilon(ev.delta)), ev.config
    what = f"{ev.mechanism.describe()} ({ev.mechanism.source}), sigma {sigma:.4g}, {cfg.steps} steps"
    details = {"config": cfg.to_dict(), "mechanism": ev.mechanism.to_dict(), "claimed_epsilon": claimed,
               "delta": ev.delta, "tolerance": CONFIG_TOLERANCE, "noise_multiplier_needed": ev.needed,
               "noise_multiplier_source": source, "accountant": "jax_privacy's DpEvent, PLD (dp-accounting)"}
    if sigma < MIN_SIGMA * ev.needed:
        return Finding.checked("epsilon", True, True, f"The loop adds noise of multiplier at most {sigma:.3g} where "
                               f"the declared mechanism ({what}) needs at least {ev.needed:.4g} for the claimed "
                               f"epsilon {claimed:.3g}.", f"raise the noise multiplier to at least {ev.needed:.4g}",
                               details | {"epsilon": None})
    eps = event_epsilon(ev.make_event(sigma), ev.delta)
    details["epsilon"] = eps
    if eps <= claimed * (1.0 + CONFIG_TOLERANCE):
        return Finding.checked("epsilon", False, True, f"The mechanism read from the code ({what}) is ({eps:.3g}, "
                               f"{ev.delta:g})-DP by its accountant, within the claimed epsilon {claimed:.3g}.",
                               details=details)
    return Finding.checked("epsilon", True, True, f"The mechanism read from the code ({what}) is only ({eps:.3g}, "
                           f"{ev.delta:g})-DP by its accountant, more than the claimed epsilon {claimed:.3g}.",
                           f"raise the noise multiplier to at least {ev.needed:.4g}, or claim epsilon {eps:.3g}",
                           details)


def _run_clipping(ev: Evidence) -> list[Finding]:
    """The clipping finding of the evidence (:func:`clipping_check`)."""
    clipping = ev.clipping
    return [Finding.checked("clipping", clipping.problem, True, clipping.message,
                            "clip each example's gradient to C before summing" if clipping.problem else "",
                            clipping.to_dict(), read=clipping.checked)]


def _run_records(ev: Evidence) -> list[Finding]:
    """The records finding of the probe and both other worlds (:func:`records_finding`)."""
    return [records_finding([("the probe", ev.probe, ev.n), ("one record added", ev.added, ev.n + 1),
                             ("one record removed", ev.removed, ev.n - 1)])]


def _run_final_model(ev: Evidence) -> list[Finding]:
    """The final-model finding of the run with one record added (:func:`audit.plugins.final_model`)."""
    return [final_model_check(ev.added.iterates, ev.trained, ev.added.source.kind)]


def periodicity_findings(ev: Evidence) -> list[Finding]:
    """Under declared plain Poisson sampling, the participation of another law the loop may really run, each at
    half the check's alpha: **periodicity**, records that join only every c-th step (cyclic or balls-in-bins
    participation accounted as Poisson, :func:`audit.stats.participation_check.periodic_participation_check`),
    and **truncation**, batches cut to a cap (:func:`audit.stats.participation_check.cap_under_poisson_check`);
    could-not-read when some step's records were not seen."""
    batches = _seen_batches(ev.probe)
    if batches is None:
        return [Finding.checked(name, False, True, _unseen_steps(ev.probe, what), read=False)
                for name, what in (("periodicity", "periodic participation"), ("truncation", "a cap on the batches"))]
    alpha = ev.alphas["periodicity"] / 2
    found = periodic_participation_check(batches, ev.n, alpha, ev.seed)
    if not found.read:  # too few steps for any cycle: nothing periodic to see, the sampling test reads the law
        periodic = Finding.checked("periodicity", False, True, found.message, details=found.to_dict()["details"])
    else:
        periodic = _participation(found, "periodicity", FIX_PERIODIC)
    return [periodic, _participation(cap_under_poisson_check(batches, ev.n, alpha, ev.seed), "truncation", "")]


def participation_finding(ev: Evidence) -> Finding:
    """The participation finding of a declared participation other than plain Poisson: its own law's test
    (:mod:`audit.stats.participation_check`: cyclic or truncated Poisson, balls-in-bins, min-separation), at the
    declared rate (else the hooks'); could-not-read when some step's records were not seen."""
    batches = _seen_batches(ev.probe)
    if batches is None:
        return Finding.checked("participation", False, True, _unseen_steps(ev.probe, "the declared participation"),
                               read=False)
    p, alpha, seed = ev.mechanism.participation, ev.alphas["participation"], ev.seed
    if isinstance(p, BallsInBins):
        found = balls_in_bins_check(batches, ev.n, p.cycle, alpha, seed)
    elif isinstance(p, MinSeparation):
        found = min_separation_check(batches, ev.n, p.rate, p.min_separation, alpha, seed)
    else:
        found = cyclic_poisson_check(batches, ev.n, p.rate or ev.config.rate, p.cycle, alpha, seed, cap=p.cap)
    return _participation(found, "participation", f"sample as declared: {p.describe()}")


def _participation(found: ParticipationResult, name: str, fix: str) -> Finding:
    """A participation test's result as the finding ``name`` (a broken fact marked ``details["fact"]``: nothing
    for :mod:`audit.plugins.confirmation` to confirm)."""
    details = found.to_dict()["details"] | ({"fact": True} if found.fact else {})
    return Finding.checked(name, found.violation, True, found.message, (found.fix or fix) if found.violation else "",
                           details, read=found.read)


#: The findings of the noise tests (:func:`audit.stats.noise_check.check_noise`), registered as the noise check's.
NOISE_FINDINGS = ("noise-level", "noise-coverage", "noise-cross-tensor", "noise-independence", "noise-distribution",
                  "noise-seed")


def _epsilon_support(mechanism: DeclaredMechanism) -> str:
    """The epsilon check's support: DP-SGD by our PLD accountant, another mechanism by the DpEvent jax_privacy
    builds for it ("" when supported, else why not)."""
    return "" if mechanism.is_dpsgd else accounting_gap(mechanism)


def _noise_support(mechanism: DeclaredMechanism) -> str:
    """The noise tests' support: independent noise, or noise correlated by a banded Toeplitz strategy whose
    sensitivity is read (:mod:`audit.stats.decorrelation`) under a participation jax_privacy accounts ("" when
    supported, else why not)."""
    noise, p = mechanism.noise, mechanism.participation
    if noise.independent:
        return ""
    if noise.kind != "banded-toeplitz":
        return f"it undoes a banded Toeplitz correlation, and the declared noise is {noise.describe()}"
    cycle = p.cycle if isinstance(p, PoissonParticipation) else 1
    return banded_sensitivity_reason(len(noise.coefficients), cycle) or accounting_gap(mechanism)


_NOISE_FIX = ("declare independent noise if the loop adds it, or audit with --one-run alone; the noise tests undo a "
              "declared correlation once the gate reads it")
#: The accounting check's own registered checks (:mod:`audit.plugins.gate_checks`), in deciding order after the
#: language-model checks (:mod:`audit.plugins.lm_checks`): facts read from the code, then the statistical tests
#: (a third of alpha each to the sampling, rate and noise tests), then the epsilon the configuration gives.
CHECKS = (
    GateCheck("records", 30, run=_run_records),
    GateCheck("final-model", 40, run=_run_final_model),
    GateCheck("clipping", 50, run=_run_clipping),
    GateCheck("world-dependence", 60, run=lambda ev: [world_finding(ev)]),
    GateCheck("sampling", 70, 1.0, lambda ev: sampling_finding(ev.probe, ev.n, ev.alphas["sampling"], ev.seed),
              applies=plain_poisson),
    GateCheck("periodicity", 72, 1.0, periodicity_findings, applies=plain_poisson, emits=("truncation",)),
    GateCheck("participation", 74, 2.0, lambda ev: [participation_finding(ev)],
              applies=lambda mechanism: not plain_poisson(mechanism)),
    GateCheck("rate", 80, 1.0, lambda ev: [rate_finding(ev.probe, ev.n, ev.config.rate, ev.alphas["rate"])],
              applies=plain_poisson),
    GateCheck("noise", 90, 1.0, lambda ev: list(ev.noise.findings), _noise_support,
              emits=NOISE_FINDINGS, fix_unsupported=_NOISE_FIX),
    GateCheck("epsilon", 100, run=_run_epsilon, supports=_epsilon_support,
              fix_unsupported="give the accountant of the declared mechanism (a dp_accounting DpEvent)"),
)
for _check in CHECKS:
    register(_check)


def block_status(findings: Sequence[Finding]) -> str:
    """The block's status: "violation" when a finding voids the accounting, "could-not-read" when a check that
    could void it was not read, "finding" for notes, else "ok"."""
    return ("violation" if any(f.violation for f in findings) else
            "could-not-read" if any(f.unread for f in findings) else
            "finding" if any(f.problem for f in findings) else "ok")


def deciding_findings(block: ConfigCheck) -> list[Finding]:
    """The block's violations, the deciding one first (:func:`audit.plugins.gate_checks.deciding_rank`)."""
    return sorted((f for f in block.findings if f.violation), key=lambda f: deciding_rank(f.check))


def check_lines(block: ConfigCheck) -> list[str]:
    """The lines printed first: each finding with a problem, with its fix (the violations first, the deciding
    one first of all); else one line saying the configuration is as claimed."""
    unread = unread_findings(block)
    problems = deciding_findings(block) + [f for f in block.findings if f.problem and not f.violation]
    unread_lines = [f"CONFIG NOT READ ({f.check}): {f.message}" for f in unread]
    if not problems and unread:
        return unread_lines
    if not problems:
        cfg = block.config or {}
        if block.mechanism:
            return [f"config:    as claimed: epsilon {cfg['epsilon']:.3g} by jax_privacy's accounting of the declared "
                    f"mechanism ({_mechanism_words(block.mechanism)}; sigma {cfg['noise_multiplier']:.4g}, "
                    f"{cfg['steps']} steps) <= claimed {block.claimed_epsilon:.3g}"]
        return [f"config:    as claimed: epsilon {cfg['epsilon']:.3g} by the PLD accountant for the DP-SGD the code "
                f"runs (sigma {cfg['noise_multiplier']:.4g}, q {cfg['sample_rate']:.4g}, {cfg['steps']} steps) <= "
                f"claimed {block.claimed_epsilon:.3g}"]
    return [f"CONFIG {'VIOLATION' if f.violation else 'FINDING'} ({f.check}): {f.message}"
            + (f" Fix: {f.fix.rstrip('.')}." if f.fix else "") for f in problems] + unread_lines


def _mechanism_words(mechanism: Mapping[str, Any]) -> str:
    """A declared mechanism as results.json holds it (:meth:`DeclaredMechanism.to_dict`), in a few words."""
    part, noise = mechanism["participation"], mechanism["noise"]
    rate = f" at q {part['rate']:.4g}" if "rate" in part else ""
    return (f"{part['law']}{rate}" + (f", cycle {part['cycle']}" if part.get("cycle", 1) > 1 else "")
            + (f", cap {part['cap']}" if "cap" in part else "") + f", {noise['matrix']} noise")


def config_table(block: ConfigCheck) -> Table:
    """Report table of the accounting check: what the code runs (the declared mechanism, else DP-SGD), each
    finding, and the split of alpha among the statistical tests."""
    rows = [[f.check, "violation" if f.violation else "finding" if f.problem else
             "could not read" if f.read is False else "ok", f.message, f.fix] for f in block.findings]
    split = ", ".join(f"{name} {share:.3g}" for name, share in (block.alpha_split or {}).items()
                      if name != "sampling_per_tail")
    what = (f"the declared mechanism ({_mechanism_words(block.mechanism)})" if block.mechanism else "the DP-SGD")
    accountant = ("jax_privacy's DpEvent of the declared mechanism, by the PLD accountant" if block.mechanism else
                  "our PLD accountant")
    return Table(title=f"Accounting check: {what} the code runs", columns=["check", "status", "what", "fix"],
                 rows=rows, caption="Read from instrumented trainings of the code (probe, its repeat, the first steps "
                                    "from another seed, the dataset plus one record and less one record); epsilon by "
                                    f"{accountant}; the statistical tests share alpha {block.alpha:.3g}"
                                    + (f" ({split})." if split else "."))
