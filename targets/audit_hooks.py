"""Audit hooks for a hand-written DP-SGD loop: two calls that let ``run dp --threat updates`` audit it.

In a torch DP-SGD step [Abadi et al. 2016, Alg. 1] put :func:`add_canary` on the clipped gradient
sum *before* the noise and :func:`report_update` on the noisy sum *after* it::

    from targets.audit_hooks import add_canary, report_update

    grad_sum = [per_example_clipped_sum(p) for p in params]           # sum_i clip(g_i), one tensor per parameter
    add_canary(grad_sum, clip_norm=C, sample_rate=q)                   # nothing happens outside an audit
    noisy = [g + sigma * C * torch.randn_like(g) for g in grad_sum]
    report_update(noisy)                                               # the noisy SUM, before dividing by the batch
    for p, g in zip(params, noisy):
        p.data -= lr * g / expected_batch_size

Outside an audit both calls return at once and change nothing (one check of a module variable).
While an audit runs (:func:`recording`, entered by the workbench around each call of the plugin's
``train``), :func:`add_canary` adds a gradient canary — ``C`` times a unit vector on one parameter
coordinate (a Dirac canary, Nasr et al. 2021/2023), joining the step with probability
``sample_rate`` like one more Poisson-sampled example — to ``grad_sum`` in place, and
:func:`report_update` records the noisy sum's value on that coordinate divided by ``C``: one
observation per step (docs/references.md, "Canaries and threat models"). ``grad_sum`` and the
noisy sum are one tensor (flattened order) or a sequence of tensors (concatenated in order, the
same order both times); numpy arrays work too. Pass the sampling rate your loop really uses (the
probability a record joins a batch): the canary stands for such a record.

The same two calls instrument Opacus (:mod:`targets.opacus_hooks`), so every update-level audit
of user code goes through :class:`UpdateRecorder`.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import numpy as np
import torch

from audit.errors import UserError

__all__ = ["add_canary", "report_update", "UpdateRecorder", "recording", "active"]

_ACTIVE: UpdateRecorder | None = None
_LOCK = threading.Lock()


def add_canary(grad_sum: Any, clip_norm: float, sample_rate: float) -> Any:
    """Before the noise: add the audit's canary to the clipped gradient sum (in place) with
    probability ``sample_rate``; returns ``grad_sum``. A no-op outside an audit."""
    recorder = _ACTIVE
    if recorder is None:
        return grad_sum
    recorder.add_canary(grad_sum, clip_norm, sample_rate)
    return grad_sum


def report_update(noisy_sum: Any) -> None:
    """After the noise: record the noisy clipped sum (before any division by the batch size) on the
    canary's coordinate. A no-op outside an audit."""
    recorder = _ACTIVE
    if recorder is None:
        return
    recorder.report(noisy_sum)


def active() -> UpdateRecorder | None:
    """The recorder of the audit running now, or None."""
    return _ACTIVE


@contextmanager
def recording(recorder: UpdateRecorder) -> Iterator[UpdateRecorder]:
    """Make ``recorder`` the target of :func:`add_canary` / :func:`report_update` while the block
    runs (one audit at a time per process)."""
    global _ACTIVE
    with _LOCK:
        if _ACTIVE is not None:
            raise RuntimeError("an update-level audit is already recording in this process")
        _ACTIVE = recorder
    try:
        yield recorder
    finally:
        with _LOCK:
            _ACTIVE = None


def _tensors(value: Any, what: str) -> list[Any]:
    """``value`` as a list of array-likes (one tensor / array, or a sequence of them)."""
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    if not items or not all(hasattr(t, "shape") for t in items):
        raise UserError(f"{what} must be a tensor or a list of tensors (one per parameter), got {type(value).__name__}")
    return items


@dataclass(frozen=True)
class StepSource:
    """What drives the recorded steps: ``kind`` ("hooks" or "opacus"), the Poisson rate the canary
    joins with and, for Opacus, the noise multiplier and whether its loader samples by Poisson."""

    kind: str
    sample_rate: float
    noise_multiplier: float | None = None
    poisson: bool = True


class UpdateRecorder:
    """The canary and the observations of one training run.

    ``coordinate``: the flattened parameter index of the Dirac canary, or None for a *probe* run:
    no canary joins, and the recorder notes how much data gradient each coordinate received
    (``touched``: the sum over steps of ``|grad_sum|``) so that the canary can be put where the data
    do not reach. ``include``: whether the canary is in this run (an excluded run records the same
    coordinate without adding anything). ``coin_seed`` seeds the canary's own Poisson coins. After training:
    ``observations`` (one per step, noisy sum on the coordinate / C; for a probe its Euclidean
    norm / C), ``joined`` (canary copies per step), ``sizes`` (parameter tensor sizes), ``clip_norm``,
    ``source`` (:class:`StepSource`), and for Opacus ``initial`` / ``final`` parameters (white-box)
    and the privacy engines it made (``engines``).
    """

    def __init__(self, coordinate: int | None, coin_seed: Sequence[int] | int, include: bool = True) -> None:
        self.coordinate, self.include = coordinate, bool(include)
        self.rng = np.random.default_rng(coin_seed)
        self.observations: list[float] = []
        self.joined: list[int] = []
        self.touched: np.ndarray | None = None
        self.sizes: tuple[int, ...] | None = None
        self.clip_norm: float | None = None
        self.source: StepSource | None = None
        self.initial: np.ndarray | None = None
        self.final: np.ndarray | None = None
        self.final_params: list[Any] | None = None
        self.engines: list[Any] = []
        self.optimizers: dict[int, tuple[Any, StepSource]] = {}
        self._pending = False

    # --- the two hook calls -------------------------------------------------------------------

    def add_canary(self, grad_sum: Any, clip_norm: float, sample_rate: float, source: StepSource | None = None) -> None:
        tensors = _tensors(grad_sum, "add_canary's gradient sum")
        if self._pending:
            raise UserError("add_canary was called twice without report_update in between; call report_update with "
                            "the noisy sum after adding the noise")
        clip, q = float(clip_norm), float(sample_rate)
        if not (clip > 0 and np.isfinite(clip)) or not 0 < q <= 1:
            raise UserError(f"add_canary needs clip_norm > 0 and 0 < sample_rate <= 1 (got {clip_norm}, {sample_rate})")
        self._check_step(tensors, clip, source or StepSource("hooks", q))
        if self.coordinate is None:
            flat = np.concatenate([np.abs(np.asarray(_host(t), dtype=np.float64)).reshape(-1) for t in tensors])
            self.touched = flat if self.touched is None else self.touched + flat
            self.joined.append(0)
        else:
            copies = int(self.rng.random() < q) if self.include else 0
            if copies:
                tensor, index = self._locate(tensors)
                _add_at(tensor, index, copies * clip)
            self.joined.append(copies)
        self._pending = True

    def report(self, noisy_sum: Any) -> None:
        tensors = _tensors(noisy_sum, "report_update's noisy sum")
        if not self._pending:
            raise UserError("report_update was called without add_canary before the noise; call add_canary on the "
                            "clipped gradient sum first")
        if tuple(int(np.prod(t.shape)) for t in tensors) != self.sizes:
            raise UserError("report_update got tensors of other shapes than add_canary; pass the noisy sum of the "
                            "same parameters")
        if self.coordinate is None:
            norm = np.sqrt(sum(float(np.sum(np.asarray(_host(t), dtype=np.float64) ** 2)) for t in tensors))
            self.observations.append(norm / self.clip_norm)
        else:
            tensor, index = self._locate(tensors)
            self.observations.append(float(tensor[index]) / self.clip_norm)
        self._pending = False

    # --- bookkeeping --------------------------------------------------------------------------

    def _check_step(self, tensors: list[Any], clip: float, source: StepSource) -> None:
        sizes = tuple(int(np.prod(t.shape)) for t in tensors)
        if self.sizes is None:
            self.sizes, self.clip_norm, self.source = sizes, clip, source
            if self.coordinate is not None and not 0 <= self.coordinate < sum(sizes):
                raise UserError(f"the canary coordinate {self.coordinate} lies outside the {sum(sizes)} parameters "
                                f"this run trains; the model must be the same in every run")
        elif sizes != self.sizes or clip != self.clip_norm or source != self.source:
            raise UserError("the audited loop changed its parameters, clip norm or sample rate between steps; the "
                            "update-level audit needs one DP-SGD loop per training run")

    def _locate(self, tensors: list[Any]) -> tuple[Any, tuple[int, ...]]:
        local = int(self.coordinate)
        for tensor, size in zip(tensors, self.sizes):
            if local < size:
                return tensor, tuple(int(i) for i in np.unravel_index(local, tuple(tensor.shape)))
            local -= size
        raise AssertionError("coordinate checked in _check_step")

    @property
    def steps(self) -> int:
        """Steps recorded (noise added and reported)."""
        return len(self.observations)

    def register(self, optimizer: Any, source: StepSource, engine: Any = None) -> None:
        """An optimizer (Opacus) whose steps this run records, with its sampling; ``engine`` its PrivacyEngine."""
        self.optimizers[id(optimizer)] = (optimizer, source)
        if engine is not None and all(e is not engine for e in self.engines):
            self.engines.append(engine)

    def source_of(self, optimizer: Any) -> StepSource:
        """The sampling of a registered optimizer; a one-line error for one the audit did not see made."""
        entry = self.optimizers.get(id(optimizer))
        if entry is None or entry[0] is not optimizer:
            raise UserError("a DP optimizer stepped that was not made by PrivacyEngine.make_private during this run; "
                            "build it with make_private (or make_private_with_epsilon), or call "
                            "targets.audit_hooks.add_canary / report_update in your loop")
        return entry[1]


def _host(tensor: Any) -> Any:
    """A tensor's values on the host (numpy arrays pass through)."""
    detach = getattr(tensor, "detach", None)
    return detach().cpu().numpy() if detach is not None else tensor


def _add_at(tensor: Any, index: tuple[int, ...], value: float) -> None:
    """``tensor[index] += value`` in place, outside autograd for torch tensors."""
    if hasattr(tensor, "detach"):

        with torch.no_grad():
            tensor[index] += value
    else:
        tensor[index] += value
