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
probability a record joins a batch): the canary stands for such a record. The noisy sum must be
the clipped sum plus the noise and nothing else: in a probe run (no canary) the recorder keeps the
noise, their difference, per parameter tensor and step for the accounting check's noise tests
(:mod:`audit.stats.noise_check`).

The same two calls instrument Opacus (:mod:`targets.opacus_hooks`), so every update-level audit
of user code goes through :class:`UpdateRecorder`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.utils.data import dataloader

from audit.errors import TargetCodeError, UserError
from audit.stats.noise_check import NoiseRecorder

__all__ = ["add_canary", "report_update", "UpdateRecorder", "CanaryRecorder", "recording", "active",
           "loader_indices", "MAX_RANDOM_CANARY_ENTRIES", "RECORDING_STARTS"]

#: Largest canaries x parameters matrix of random canary directions held in memory (float32, 800 MB).
MAX_RANDOM_CANARY_ENTRIES = 200_000_000

_ACTIVE: UpdateRecorder | None = None
_LOCK = threading.Lock()
#: Called with the recorder when a recording starts (:func:`recording`); :mod:`targets.jax_hooks` adds one that
#: drops JAX traces made outside an audit, so no cached trace skips the hooks.
RECORDING_STARTS: list[Callable[[UpdateRecorder], None]] = []


def add_canary(grad_sum: Any, clip_norm: float, sample_rate: float, batch: Any = None) -> Any:
    """Before the noise: add the audit's canaries to the clipped gradient sum (in place), each with
    probability ``sample_rate``; returns ``grad_sum``. ``batch`` (optional): the indices of the
    records this step's sum holds (rows of ``X``, or a boolean mask over them) — the audit reads the
    sampling and checks the clipping from them. A no-op outside an audit.

    Args:
        grad_sum: the clipped per-example gradient sum of this step, before the noise: one tensor
            (flattened order) or a list or tuple of tensors, one per parameter (numpy arrays work too);
            changed in place.
        clip_norm: the clipping norm C.
        sample_rate: the probability a record joins a batch in your loop (Poisson rate q).
        batch: the indices of the records this step's sum holds (rows of ``X``, or a boolean mask), if
            known.

    Returns:
        ``grad_sum``, with the canaries that joined added.

    Raises:
        UserError: during an audit, a ``grad_sum`` that is not a tensor or a list of tensors.
    """
    recorder = _ACTIVE
    if recorder is None:
        return grad_sum
    recorder.add_canary(grad_sum, clip_norm, sample_rate, batch=batch)
    return grad_sum


def report_update(noisy_sum: Any) -> None:
    """After the noise: record the noisy clipped sum (before any division by the batch size) on the
    canary's coordinate. A no-op outside an audit.

    Args:
        noisy_sum: the noisy clipped gradient sum of this step, in the form and order of the ``grad_sum``
            given to :func:`add_canary`.
    """
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
        for listener in RECORDING_STARTS:
            listener(recorder)
        yield recorder
    finally:
        with _LOCK:
            _ACTIVE = None


@contextmanager
def loader_indices(recorder: UpdateRecorder, dataset_size: int) -> Iterator[UpdateRecorder]:
    """While the block runs, ``recorder`` learns which examples each noisy step's per-sample gradients were
    computed on: every torch ``DataLoader`` tells it the indices it yields and the size of its dataset
    (single-process loading reads them in step order), and a global forward hook of ``torch.nn`` follows each
    batch to the first module called on it: the batch counts for the next step when a gradient flows back
    through that module's output (a tensor hook fires in the backward pass), and never when the module ran
    without autograd (a no-grad validation or evaluation pass) or its output got no gradient. A batch no module
    is called on (a functional loop) counts when it was yielded with autograd on. Examples from a loader over a
    dataset of ``dataset_size`` items are the records given (their indices); from a dataset of another size
    they are not (packed or split records: :attr:`UpdateRecorder.foreign`). An iterable dataset (no length)
    yields no indices: those steps' records stay unseen."""
    original = dataloader._BaseDataLoaderIter._next_index

    def _next_index(self: Any) -> Any:
        index = original(self)
        dataset = getattr(self, "_dataset", None)
        size = len(dataset) if hasattr(dataset, "__len__") else None
        if size is not None:  # an iterable dataset yields no indices: its steps' records stay unseen
            recorder.note_loader_indices(index, size, torch.is_grad_enabled())
        return index

    recorder.loader_size = int(dataset_size)
    dataloader._BaseDataLoaderIter._next_index = _next_index
    handles = (torch.nn.modules.module.register_module_forward_pre_hook(recorder.module_called),
               torch.nn.modules.module.register_module_forward_hook(recorder.module_returned))
    try:
        yield recorder
    finally:
        dataloader._BaseDataLoaderIter._next_index = original
        for handle in handles:
            handle.remove()


@dataclass
class LoaderBatch:
    """The indices one data loader yielded, the size of its dataset and whether autograd was
    on when it yielded them; ``reached``: a gradient flowed back through the module called on it."""

    indices: np.ndarray
    dataset_size: int
    grad_enabled: bool
    reached: bool = False


def _grad_tensors(value: Any) -> list[Any]:
    """The tensors of a module's output (a tensor, a sequence, a mapping such as Hugging Face's ModelOutput)
    that require grad."""
    if torch.is_tensor(value):
        return [value] if value.requires_grad else []
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    return [t for item in items for t in _grad_tensors(item)]


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
    and the privacy engines it made (``engines``). Per step also ``data_norms`` (the norm of the
    clipped data sum before any canary) and ``batches`` (the record indices the step held, from
    ``add_canary(batch=...)`` or the examples of the data loaders whose gradients reached the step,
    :func:`loader_indices`; None when not seen), ``foreign`` (per step whose examples came from a dataset
    that is not the records given: their count and that dataset's size); a probe run also keeps ``noise``, a
    :class:`audit.stats.noise_check.NoiseRecorder` of the
    noise the code added (the noisy sum minus the clipped sum) per parameter tensor and step, in memory
    bounded whatever the model's size (its module docstring), seen through ``noise_view`` when set (a declared
    noise correlation undone step by step, :mod:`audit.stats.decorrelation`). For Opacus ``normalisation`` /
    ``normaliser``: how the noisy sum is divided. ``iterates``: a :class:`targets.final_params.IterateSketch`
    that Opacus's instrumentation attaches to the DP optimizer (None: the iterates are not recorded).
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
        self.data_norms: list[float] = []
        self.batches: list[np.ndarray | None] = []
        self.normaliser: float | None = None
        self.normalisation: str | None = None
        self.loader_size: int | None = None
        self.foreign: list[tuple[int, int]] = []
        self._yielded: list[LoaderBatch] = []
        self._claim: tuple[Any, list[LoaderBatch]] | None = None
        self._data: np.ndarray | None = None
        self.noise: NoiseRecorder | None = None
        self.noise_view: Callable[[np.ndarray], np.ndarray] | None = None
        self.iterates: Any = None
        self._pending = False

    # --- the two hook calls -------------------------------------------------------------------

    def add_canary(self, grad_sum: Any, clip_norm: float, sample_rate: float, source: StepSource | None = None,
                   batch: Any = None) -> None:
        tensors = _tensors(grad_sum, "add_canary's gradient sum")
        if self._pending:
            raise TargetCodeError("add_canary was called twice without report_update in between; call report_update "
                                  "with the noisy sum after adding the noise")
        clip, q = float(clip_norm), float(sample_rate)
        if not (clip > 0 and np.isfinite(clip)) or not 0 < q <= 1:
            raise UserError(f"add_canary needs clip_norm > 0 and 0 < sample_rate <= 1 (got {clip_norm}, {sample_rate})")
        self._check_step(tensors, clip, source or StepSource("hooks", q))
        self.data_norms.append(float(np.sqrt(sum(float(np.sum(np.asarray(_host(t), dtype=np.float64) ** 2))
                                                 for t in tensors))))
        self.batches.append(self._step_batch(batch))
        self._insert(tensors, clip, q)
        self._pending = True

    def _insert(self, tensors: list[Any], clip: float, q: float) -> None:
        """Add this recorder's canary to the clipped sum (a probe run: note the data's gradient per coordinate)."""
        if self.coordinate is None:
            self._data = _flat(tensors)
            self.touched = np.abs(self._data) if self.touched is None else self.touched + np.abs(self._data)
            self.joined.append(0)
        else:
            copies = int(self.rng.random() < q) if self.include else 0
            if copies:
                tensor, index = self._locate(tensors)
                _add_at(tensor, index, copies * clip)
            self.joined.append(copies)

    def report(self, noisy_sum: Any) -> None:
        tensors = _tensors(noisy_sum, "report_update's noisy sum")
        if not self._pending:
            raise UserError("report_update was called without add_canary before the noise; call add_canary on the "
                            "clipped gradient sum first")
        if tuple(int(np.prod(t.shape)) for t in tensors) != self.sizes:
            raise UserError("report_update got tensors of other shapes than add_canary; pass the noisy sum of the "
                            "same parameters")
        self._observe(tensors)
        self._pending = False

    def _observe(self, tensors: list[Any]) -> None:
        """Record the noisy sum on the canary (a probe run: its norm / C, and the noise per tensor)."""
        if self.coordinate is None:
            noisy = _flat(tensors)
            if self.noise is None:
                self.noise = NoiseRecorder(self.sizes)
            noise = noisy - self._data
            self.noise.add(noise if self.noise_view is None else self.noise_view(noise))
            self.observations.append(float(np.linalg.norm(noisy)) / self.clip_norm)
        else:
            tensor, index = self._locate(tensors)
            self.observations.append(float(tensor[index]) / self.clip_norm)

    # --- which records each step held ---------------------------------------------------------

    def note_loader_indices(self, indices: Any, dataset_size: int, grad_enabled: bool = True) -> None:
        """A data loader over a dataset of ``dataset_size`` items yielded ``indices`` (:func:`loader_indices`)."""
        self._yielded.append(LoaderBatch(np.asarray(indices, dtype=np.int64).reshape(-1), dataset_size,
                                         bool(grad_enabled)))

    def module_called(self, module: Any, _args: Any) -> None:
        """A module's forward starts (global hook): the first call after batches were yielded claims them."""
        if self._claim is None and any(not b.reached for b in self._yielded):
            claimed = [b for b in self._yielded if not b.reached]
            self._yielded = [b for b in self._yielded if b.reached]
            self._claim = (module, claimed)

    def module_returned(self, module: Any, _args: Any, output: Any) -> None:
        """The claiming module returned: its batches count once a gradient flows back through its output;
        without autograd (no output requires grad) they are dropped, a no-grad pass."""
        if self._claim is None or self._claim[0] is not module:
            return
        claimed, self._claim = self._claim[1], None
        if not torch.is_grad_enabled():
            return
        tensors = _grad_tensors(output)
        if not tensors:  # a module without parameters on the batch (a flatten, a transform): the next one decides
            self._yielded.extend(claimed)
            return

        def reached(grad: Any) -> None:
            for b in claimed:
                b.reached = True
                if all(x is not b for x in self._yielded):
                    self._yielded.append(b)

        try:
            for tensor in tensors:
                tensor.register_hook(reached)
        except RuntimeError:  # a tensor that takes no hook (a torch.func transform): read as a functional loop
            self._yielded.extend(claimed)

    def _step_batch(self, batch: Any) -> np.ndarray | None:
        """The record indices of this step: ``batch`` as passed to ``add_canary``, else the examples whose
        gradients reached the step since the last one (:func:`loader_indices`), else None (not seen). Examples
        from a dataset that is not the records given (another size) are noted in :attr:`foreign` and leave the
        step's records unknown (None)."""
        seen = [b for b in self._yielded if b.reached or b.grad_enabled]
        self._yielded = []
        if batch is not None:
            array = np.asarray(_host(batch))
            return np.flatnonzero(array) if array.dtype == bool else array.astype(np.int64).reshape(-1)
        others = [b for b in seen if b.dataset_size != self.loader_size]
        if others:
            self.foreign.append((int(sum(b.indices.size for b in others)), others[0].dataset_size))
            return None
        if self.loader_size is None or (not seen and not any(b is not None for b in self.batches)):
            return None
        return np.concatenate([b.indices for b in seen]) if seen else np.zeros(0, dtype=np.int64)

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
        for tensor, size in zip(tensors, self.sizes, strict=False):
            if local < size:
                return tensor, tuple(int(i) for i in np.unravel_index(local, tuple(tensor.shape)))
            local -= size
        raise AssertionError("coordinate checked in _check_step")

    @property
    def pending(self) -> bool:
        """add_canary was called and report_update not yet."""
        return self._pending

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


def _flat(tensors: list[Any]) -> np.ndarray:
    """The tensors' values concatenated in order, float64 on the host."""
    return np.concatenate([np.asarray(_host(t), dtype=np.float64).reshape(-1) for t in tensors])


class CanaryRecorder(UpdateRecorder):
    """M gradient canaries in one training run (the one-run game; docs/references.md, "One-run auditing").

    ``included[i]``: canary i's fair coin. ``coordinates`` (M distinct flattened parameter indices:
    Dirac canaries) or ``directions`` (M x d unit vectors: random directions, when the parameters
    are fewer than the canaries). At every step each included canary joins by its own
    Bernoulli(``sample_rate``) coin and adds ``C`` times its direction to the clipped sum; after the
    noise the recorder keeps, per canary, the noisy sum minus the clipped data sum (the data sum
    copied before the canaries joined) projected on its direction, divided by C:
    ``observations`` is a list of (M,) arrays, one per step (:attr:`canary_observations`: (M, T)).
    ``joined`` counts the canary copies per step.
    """

    def __init__(self, included: np.ndarray, coin_seed: Sequence[int] | int, *, coordinates: np.ndarray | None = None,
                 directions: np.ndarray | None = None) -> None:
        super().__init__(0, coin_seed, include=True)
        self.included = np.asarray(included, dtype=bool)
        if (coordinates is None) == (directions is None):
            raise ValueError("give the canaries' coordinates or their directions")
        self.coordinates = None if coordinates is None else np.asarray(coordinates, dtype=np.int64)
        self.directions = None if directions is None else np.asarray(directions, dtype=np.float32)
        count = self.coordinates.size if self.coordinates is not None else self.directions.shape[0]
        if count != self.included.size:
            raise ValueError("one coin per canary")

    def _insert(self, tensors: list[Any], clip: float, q: float) -> None:
        d = sum(self.sizes)
        if self.coordinates is not None and (self.coordinates.max(initial=0) >= d):
            raise UserError(f"the canaries need {int(self.coordinates.max()) + 1} parameter coordinates; this run "
                            f"trains {d}")
        if self.directions is not None and self.directions.shape[1] != d:
            raise UserError(f"the canary directions have {self.directions.shape[1]} coordinates; this run trains {d}")
        self._data = _flat(tensors)
        coins = (self.rng.random(self.included.size) < q) & self.included
        self.joined.append(int(coins.sum()))
        if self.coordinates is not None:
            delta = np.zeros(d)
            delta[self.coordinates[coins]] = clip
        else:
            delta = clip * self.directions[coins].sum(axis=0, dtype=np.float64)
        offset = 0
        for tensor, size in zip(tensors, self.sizes, strict=False):
            part = delta[offset:offset + size].reshape(tuple(tensor.shape))
            if hasattr(tensor, "detach"):
                with torch.no_grad():
                    tensor += torch.as_tensor(part, dtype=tensor.dtype, device=tensor.device)
            else:
                tensor += part.astype(tensor.dtype)
            offset += size

    def _observe(self, tensors: list[Any]) -> None:
        moved = _flat(tensors) - self._data
        if self.coordinates is not None:
            self.observations.append(moved[self.coordinates] / self.clip_norm)
        else:
            self.observations.append((self.directions @ moved.astype(np.float32)).astype(np.float64) / self.clip_norm)

    @property
    def canary_observations(self) -> np.ndarray:
        """(M, T): canary i's normalised observation at step t."""
        if not self.observations:
            return np.zeros((self.included.size, 0))
        return np.stack(self.observations, axis=1)
