"""Update-level instrumentation of Opacus, with no change to the user's code.

While :func:`instrument_opacus` is active (the workbench enters it around each call of a trainer
plugin's ``train``), every ``PrivacyEngine.make_private`` (``make_private_with_epsilon`` goes
through it) registers the optimizer it returns with the run's
:class:`targets.audit_hooks.UpdateRecorder`, together with the Poisson rate of the data loader
it returns (``DPDataLoader.sample_rate``; for a loader without Poisson sampling ``1/len(loader)``,
the rate Opacus accounts), and every ``add_noise`` of ``DPOptimizer`` (and of its subclasses that
define their own, e.g. the ghost clipping ``DPOptimizerFastGradientClipping``) is wrapped:

* before the noise, the recorder's ``add_canary`` (what :func:`targets.audit_hooks.add_canary`
  calls) adds the Dirac canary (norm ``max_grad_norm``) to the clipped sums ``p.summed_grad`` with
  the loader's rate, times the number of accumulated batches (the rate Opacus's own accountant uses
  for that step);
* after it, the recorder's ``report`` (:func:`targets.audit_hooks.report_update`) reads the noisy
  sums ``p.grad`` — before ``scale_grad`` divides them by the expected batch size. ``p.grad -
  p.summed_grad`` is the noise Opacus drew: a probe run records it per parameter and step, so the
  accounting check measures Opacus's noise too (:mod:`audit.stats.noise_check`) rather than trusting
  the optimizer's ``noise_multiplier``, which it keeps as reported.

Opacus calls ``add_noise`` exactly when an optimizer step really happens (``pre_step``: skipped
virtual steps of ``BatchMemoryManager`` or gradient accumulation only clip and accumulate), so one
observation is recorded per real step, however many epochs the loop runs. The patches are undone
on exit. They rely on those internals (``summed_grad``, ``add_noise``, ``scale_grad``), read from
Opacus 1.6: :func:`require_opacus` accepts the versions in :data:`SUPPORTED` only.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from audit.errors import UserError
from targets.audit_hooks import StepSource, UpdateRecorder, active, recording

#: Opacus versions whose internals the instrumentation was written against: [low, high).
SUPPORTED = ((1, 4), (1, 7))

_BUSY = "_privacy_audit_in_add_noise"


def _version_tuple(text: str) -> tuple[int, int]:
    parts = text.split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return (0, 0)


def require_opacus() -> Any:
    """The opacus module, or a one-line error when it is missing or of an untested version."""
    try:
        # optional dependency (the opacus extra)
        import opacus
    except ImportError:
        raise UserError("this target needs Opacus: pip install -e '.[opacus]'") from None
    low, high = SUPPORTED
    if not low <= _version_tuple(opacus.__version__) < high:
        raise UserError(f"the update-level audit instruments Opacus internals tested with Opacus "
                        f"{low[0]}.{low[1]} to {high[0]}.{high[1] - 1}; found {opacus.__version__}: "
                        f"pip install 'opacus>={low[0]}.{low[1]},<{high[0]}.{high[1]}'")
    return opacus


def classes_defining(base: type, name: str) -> list[type]:
    """``base`` and its subclasses that define their own method ``name`` (what a patch of it must cover)."""
    seen, todo = [], [base]
    while todo:
        cls = todo.pop()
        if cls not in seen:
            seen.append(cls)
            todo.extend(cls.__subclasses__())
    return [cls for cls in seen if name in cls.__dict__]


def _flat_params(params: list[Any]) -> Any:

    return torch.cat([p.detach().reshape(-1).double().cpu() for p in params]).numpy()


def _wrap_add_noise(original: Callable[[Any], None]) -> Callable[[Any], None]:
    @functools.wraps(original)
    def add_noise(self: Any) -> None:
        recorder = active()
        if recorder is None or getattr(self, _BUSY, False):  # not auditing, or a subclass calling super()
            return original(self)
        max_grad_norm = self.max_grad_norm
        if not isinstance(max_grad_norm, (int, float)):
            raise UserError("the update-level audit supports flat clipping (one max_grad_norm); this optimizer clips "
                            "per layer")
        source = recorder.source_of(self)
        params = list(self.params)
        if recorder.initial is None:
            recorder.initial, recorder.final_params = _flat_params(params), params
        accumulated = max(1, int(self.accumulated_iterations))
        rate = min(1.0, source.sample_rate * accumulated)
        # how scale_grad will divide the noisy sum: by the expected batch size (loss_reduction "mean") or not at all
        recorder.normalisation = "sum" if self.loss_reduction == "sum" else "expected"
        recorder.normaliser = None if self.loss_reduction == "sum" else float(self.expected_batch_size * accumulated)
        setattr(self, _BUSY, True)
        try:
            recorder.add_canary([p.summed_grad for p in params], float(max_grad_norm), rate, source)
            original(self)
            recorder.report([p.grad for p in params])
        finally:
            setattr(self, _BUSY, False)

    return add_noise


def _wrap_make_private(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def make_private(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = original(self, *args, **kwargs)
        recorder = active()
        if recorder is not None:
            # optional dependency (the opacus extra)
            from opacus.data_loader import DPDataLoader

            optimizer, loader = out[1], out[-1]
            poisson = isinstance(loader, DPDataLoader)
            rate = float(loader.sample_rate) if poisson else 1.0 / len(loader)
            recorder.register(optimizer, StepSource("opacus", rate, float(optimizer.noise_multiplier), poisson), self)
            if recorder.iterates is not None:  # the final-model check (targets.final_params)
                recorder.iterates.attach(out[0], optimizer, lambda: recorder.steps)
        return out

    return make_private


@contextmanager
def instrument_opacus(recorder: UpdateRecorder) -> Iterator[UpdateRecorder]:
    """Patch Opacus as the module docstring says while the block runs (restored on exit, also on
    error); the canary and observations go to ``recorder``, which is made the active recorder."""
    require_opacus()
    # optional dependency (the opacus extra)
    from opacus import PrivacyEngine
    from opacus.optimizers import DPOptimizer

    saved: list[tuple[type, str, Any]] = [(cls, "add_noise", cls.__dict__["add_noise"])
                                          for cls in classes_defining(DPOptimizer, "add_noise")]
    saved.append((PrivacyEngine, "make_private", PrivacyEngine.__dict__["make_private"]))
    with recording(recorder):
        try:
            for cls, name, original in saved:
                setattr(cls, name, (_wrap_make_private if name == "make_private" else _wrap_add_noise)(original))
            yield recorder
        finally:
            for cls, name, original in saved:
                setattr(cls, name, original)
            if recorder.final_params is not None:
                recorder.final = _flat_params(recorder.final_params)
            if recorder.iterates is not None:
                recorder.iterates.detach()

