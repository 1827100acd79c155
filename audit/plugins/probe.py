"""Reading the DP-SGD a user's training code runs: one instrumented call of its ``train``.

Opacus is patched (:mod:`targets.opacus_hooks`) and the hooks of :mod:`targets.audit_hooks` record
while ``train`` runs once with no canary (:func:`probe`). For the reproducibility check it runs again
from the same seed, stopped after :data:`REPEAT_STEPS` noisy steps or at the first that differs
(:func:`repeat_matches`): a seeded loop gives the same noisy sums bit for bit from its first step, so
a few steps decide, for a fraction of a training. That shows how many noisy steps the code really
takes, the Poisson rate it samples with, its clip norm, for Opacus its noise multiplier and what Opacus's own accountant
reports, and which parameter coordinate the data's clipped gradients never reach (the smallest
summed ``|grad_sum|``, zero for a dead coordinate; Nasr et al. 2023 put their Dirac canary there).
The claim is the plugin's, or with ``"claim": "opacus"`` the epsilon Opacus reported for the probe;
the mechanism the code runs (:class:`StepMechanism`) is recomputed by our PLD accountant. Shared by
every audit kind that needs a plugin's claim (:func:`resolved_claim`).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np

from audit.errors import TargetCodeError, UserError
from audit.plugins.training import train_once
from audit.run_context import Stages
from audit.stats.decorrelation import ToeplitzDecorrelator
from audit.theory.claims import PURE_DP_DELTA, ApproxDPClaim, PrivacyClaim
from audit.theory.declared_mechanism import DeclaredMechanism
from audit.theory.dpsgd import DPSGDClaim, calibrate_noise_multiplier
from targets.audit_hooks import StepSource, UpdateRecorder, loader_indices, recording
from targets.catalogue import record_word
from targets.plugins.loading import TrainerPlugin
from targets.plugins.rng import Reproducibility, reproducibility

#: Noisy steps of the probe's repeat compared with the probe's before it stops (:func:`repeat_matches`).
REPEAT_STEPS = 5


@dataclass(frozen=True)
class StepMechanism:
    """The DP-SGD mechanism one audited run executes: noise multiplier, the Poisson rate a record (the
    canary) joins a step with, and the number of steps with noise."""

    noise_multiplier: float
    sample_rate: float
    steps: int

    def claim(self) -> DPSGDClaim:
        """Its guarantee by the PLD accountant (add/remove neighbours)."""
        return DPSGDClaim(self.noise_multiplier, self.sample_rate, self.steps)

    def to_dict(self) -> dict[str, Any]:
        return {"noise_multiplier": self.noise_multiplier, "sample_rate": self.sample_rate, "steps": self.steps}



def _opacus_status() -> str | None:
    """None when Opacus can be instrumented (or is absent), else why not (an untested version)."""
    if importlib.util.find_spec("opacus") is None:
        return None
    # optional dependency (the opacus extra)
    from targets.opacus_hooks import require_opacus

    try:
        require_opacus()
    except UserError as exc:
        return str(exc)
    return None


@contextmanager
def instrumented(recorder: UpdateRecorder) -> Iterator[UpdateRecorder]:
    """``recorder`` receives the hooks' calls and, when Opacus is installed (a tested version), every
    Opacus DP optimizer's steps."""
    if importlib.util.find_spec("opacus") is not None and _opacus_status() is None:
        # optional dependency (the opacus extra)
        from targets.opacus_hooks import instrument_opacus

        with instrument_opacus(recorder):
            yield recorder
    else:
        with recording(recorder):
            yield recorder


def run_once(plugin: TrainerPlugin, X: np.ndarray, y: np.ndarray, seed: int, recorder: UpdateRecorder) -> Any:
    """One instrumented call of ``train``; returns its ``predict_proba`` (the recorder holds the steps and
    the training-set indices its data loaders yielded)."""
    with instrumented(recorder), loader_indices(recorder, len(X)):
        return train_once(plugin, X, y, seed)


@dataclass(frozen=True, kw_only=True)
class Probe:
    """What the probe run showed (module docstring, step 1); ``trained``: what its ``train`` returned."""

    steps: int
    source: StepSource
    clip_norm: float
    n_params: int
    coordinate: int
    touched: float
    opacus: dict | None
    check: Reproducibility | None = None
    recorder: UpdateRecorder | None = None
    trained: Any = None


def require_steps(plugin: TrainerPlugin, recorder: UpdateRecorder) -> None:
    """A one-line error when a run took no step the audit saw: the loop calls no hook (exit 2), or it
    called ``add_canary`` without ``report_update`` (the user's code is incomplete: exit 3)."""
    if recorder.steps > 0:
        if recorder.pending:
            raise TargetCodeError(f"train of plugin {plugin.spec} called add_canary but not report_update after its "
                                  f"last step: call report_update with the noisy sum after every add_canary")
        return
    if recorder.pending:
        raise TargetCodeError(f"train of plugin {plugin.spec} called add_canary but never report_update: call "
                              f"targets.audit_hooks.report_update with the noisy sum after adding the noise")
    why = _opacus_status()
    raise UserError(f"train of plugin {plugin.spec} took no DP-SGD step the audit could see: use Opacus's "
                    f"PrivacyEngine.make_private or call targets.audit_hooks.add_canary / report_update in the "
                    f"loop, or audit it black-box (--threat black-box)" + (f"; {why}" if why else ""))


class _RepeatDecided(BaseException):
    """Raised from the hook inside the user's loop once the repeat has decided (a BaseException, so the
    loop's own ``except Exception`` cannot swallow it); caught by :func:`repeat_matches` alone."""


class _RepeatRecorder(UpdateRecorder):
    """A probe recorder that compares each noisy step with the probe's and stops the run when decided."""

    def __init__(self, reference: list[float], limit: int) -> None:
        super().__init__(None, 0)
        self.reference, self.limit = reference, limit

    def _observe(self, tensors: list[Any]) -> None:
        super()._observe(tensors)
        t = len(self.observations) - 1
        if t >= len(self.reference) or self.observations[t] != self.reference[t] or t + 1 >= self.limit:
            raise _RepeatDecided


def repeat_matches(plugin: TrainerPlugin, X: np.ndarray, y: np.ndarray, seed: int, first: UpdateRecorder,
                   limit: int = REPEAT_STEPS) -> tuple[bool, int]:
    """Train again from ``seed`` and compare the noisy sums step by step with ``first`` (the probe's), stopping
    the training at the first step that differs or after ``limit`` steps; returns (identical, steps compared).
    A run that ends sooner is compared whole (and must take the probe's steps)."""
    second = _RepeatRecorder(list(first.observations), limit)
    try:
        run_once(plugin, X, y, seed, second)
    except _RepeatDecided:
        pass
    n = second.steps
    same = n > 0 and second.observations == first.observations[:n] and (n >= limit or n == first.steps)
    return same, n


class _FirstSteps(UpdateRecorder):
    """A probe recorder that stops the run after ``limit`` noisy steps."""

    def __init__(self, limit: int) -> None:
        super().__init__(None, 0)
        self.limit = limit

    def _observe(self, tensors: list[Any]) -> None:
        super()._observe(tensors)
        if len(self.observations) >= self.limit:
            raise _RepeatDecided


def first_steps_from_another_seed(plugin: TrainerPlugin, X: np.ndarray, y: np.ndarray, seed: int,
                                  limit: int = REPEAT_STEPS) -> UpdateRecorder:
    """The first ``limit`` noisy steps of ``train`` on the same records from ``seed`` (another than the probe's),
    their noise seen as the probe's (:func:`probe_recorder`): the run the noise-seed test compares with the probe
    (a seed that never changes the noise, e.g. a ``TrainingArguments`` without ``seed=`` calling ``set_seed(42)``
    after the user's seeding, repeats the probe's noise here, where a world with one record more or less draws
    it shifted; issue 50)."""
    run = _FirstSteps(limit)
    run.noise_view = probe_recorder(plugin.mechanism).noise_view
    try:
        run_once(plugin, X, y, seed, run)
    except _RepeatDecided:
        pass
    return run


def probe_recorder(mechanism: DeclaredMechanism) -> UpdateRecorder:
    """A recorder of a run without canary, its noise seen with the ``mechanism``'s declared correlation undone
    (:class:`audit.stats.decorrelation.ToeplitzDecorrelator` for a banded Toeplitz strategy)."""
    recorder = UpdateRecorder(None, 0)
    if mechanism.noise.kind == "banded-toeplitz" and not mechanism.noise.independent:
        recorder.noise_view = ToeplitzDecorrelator(mechanism.noise.coefficients)
    return recorder


def probe(plugin: TrainerPlugin, X: np.ndarray, y: np.ndarray, seed: int, delta: float,
          stages: Stages | None = None) -> Probe:
    """Train once without a canary, repeat its first steps (the reproducibility check) and read the code's
    DP-SGD. ``stages``: an :class:`audit.run_context.Stages` that times and announces the two stages."""
    probe_seed = int(np.random.SeedSequence([seed, 29]).generate_state(1)[0])
    first = probe_recorder(plugin.mechanism)
    records = record_word(plugin)
    with _stage(stages, "probe", f"probe: training the code once on its {len(X)} {records}, reading the DP-SGD "
                                 f"it runs"):
        trained = run_once(plugin, X, y, probe_seed, first)
    require_steps(plugin, first)
    if stages is not None:
        stages.set_training_time(stages.timing["probe_s"])
        stages.expect("repeat", min(1.0, REPEAT_STEPS / first.steps))
    with _stage(stages, "repeat", f"repeat: the probe again from the same seed, stopped after {REPEAT_STEPS} noisy "
                                  f"steps or the first that differs (reproducibility)"):
        same, compared = repeat_matches(plugin, X, y, probe_seed, first)
    check = reproducibility(same, plugin.rng, f"the probe run repeated from the same seed ({compared} of its "
                                              f"{first.steps} noisy steps compared)")
    coordinate = int(np.argmin(first.touched))
    return Probe(steps=first.steps, source=first.source, clip_norm=float(first.clip_norm),
                 n_params=int(first.touched.size), coordinate=coordinate, touched=float(first.touched[coordinate]),
                 opacus=_opacus_report(first, delta), check=check, recorder=first, trained=trained)


def _stage(stages: Stages | None, name: str, text: str) -> AbstractContextManager[None]:
    """``stages.stage(name, text)``, or nothing when no stages are kept."""
    return nullcontext() if stages is None else stages.stage(name, text)


def _opacus_report(recorder: UpdateRecorder, delta: float) -> dict | None:
    """What the PrivacyEngine of a run reports at ``delta`` (None when the run used no Opacus)."""
    if not recorder.engines:
        return None
    if len(recorder.engines) > 1:
        raise UserError("train made more than one Opacus PrivacyEngine; the audit needs one DP-SGD loop per run")
    engine = recorder.engines[0]
    return {"epsilon": float(engine.get_epsilon(delta)), "accountant": str(engine.accountant.mechanism()),
            "history": [list(map(float, h)) for h in getattr(engine.accountant, "history", [])]}


def claim_and_mechanism(plugin: TrainerPlugin, found: Probe) -> tuple[PrivacyClaim, StepMechanism]:
    """The claim audited and the DP-SGD the code runs (module docstring, step 2)."""

    claim = plugin.claim
    if claim is None:  # "claim": "opacus"
        if found.opacus is None:
            raise UserError(f"plugin {plugin.spec} claims what Opacus reports ('claim': 'opacus'), but its train made "
                            f"no Opacus PrivacyEngine")
        claim = ApproxDPClaim(found.opacus["epsilon"], plugin.delta)
    sigma = found.source.noise_multiplier
    if sigma is None:  # a hooked loop: the noise the claim states, or the least it allows at the steps taken
        delta = plugin.delta or PURE_DP_DELTA
        sigma = (claim.noise_multiplier if isinstance(claim, DPSGDClaim) else
                 float(calibrate_noise_multiplier(claim.epsilon(delta), delta, found.source.sample_rate, found.steps)))
    if not sigma > 0:
        raise UserError(f"train of plugin {plugin.spec} adds no noise (noise multiplier {sigma}); it is not DP-SGD")
    return claim, StepMechanism(float(sigma), found.source.sample_rate, found.steps)


def resolved_claim(plugin: TrainerPlugin, X: np.ndarray, y: np.ndarray, seed: int) -> PrivacyClaim:
    """The claim of a plugin, reading Opacus's report from a probe run for ``"claim": "opacus"``."""
    if plugin.claim is not None:
        return plugin.claim
    return claim_and_mechanism(plugin, probe(plugin, X, y, seed, plugin.delta))[0]
