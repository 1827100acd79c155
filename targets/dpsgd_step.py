"""The one DP-SGD step: every trainer of the workbench moves its models with :class:`DPSGDStep`.

DP-SGD [Abadi et al. 2016, Algorithm 1], for R models stacked along a leading axis:

1. sample a batch (:class:`targets.sampling.BatchSampler`: Poisson with rate ``q`` by default);
2. clip every per-example gradient to L2 norm ``C`` and sum: ``sum_i min(1, C/||g_i||) g_i``
   (ghost / book-keeping clipping for layered architectures, :mod:`targets.ghost_clipping`;
   materialised ``vmap(grad)`` per-example gradients otherwise);
3. add Gaussian noise ``N(0, sigma^2 C^2 I)`` (:meth:`DPSGDStep.add_noise`, the only place noise is
   added; its scale is :meth:`DPSGDStep.noise_std`);
4. divide by the *expected* batch size ``B = q n`` — never the realised one, which leaks membership
   under add/remove neighbours (docs/references.md, "DP-SGD accounting" and "Pitfalls") — and
   take the step ``theta <- theta - lr/B (sum + noise)``, with heavy-ball momentum when configured.

Its privacy is that of the Poisson-subsampled Gaussian mechanism composed over the steps
(:class:`audit.theory.dpsgd.DPSGDClaim`). With ``clip_norm=None`` and no noise the same step is
non-private SGD (the weighted gradient sum, same sampling, normalisation and momentum).

Random streams: model ``r`` with seed ``s`` draws its initialisation from
``torch.Generator().manual_seed(s)``, its batches from ``np.random.default_rng([s, 2])`` and its
noise — one vector of all parameters per step, split in the architecture's parameter order — from
``torch.Generator(device).manual_seed(s + 1)``. Every model keeps its own generators, so a model's
result does not depend on which or how many models are trained with it.

Audits instrument this step through a :class:`StepHook` (canaries, per-step observation) instead
of re-implementing it: a hook may add clipped examples before the noise
(:meth:`StepHook.extra_examples`), supply the per-example gradients of the data rows
(:meth:`StepHook.data_gradients`, the crafted replace-one dataset), see the data rows' clipped sum
(:meth:`StepHook.data_sum`) and observe the noisy sum (:meth:`StepHook.observe`). Without a hook the
step does nothing beyond DP-SGD.

On CUDA the data stay on the device, batch indices travel from pinned host memory without
blocking, and the step never waits for the GPU (no ``.item()`` or host copies).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch.func import grad, vmap

from audit.errors import UserError
from targets.ghost_clipping import MODES, per_example_clipped_sum, weighted_gradient
from targets.models import Architecture, Params, init_params
from targets.sampling import SAMPLING, BatchSampler

#: ``clipping`` choices: the layer-wise methods of :mod:`targets.ghost_clipping`, or ``vmap`` (grad).
CLIPPING_METHODS = (*MODES, "vmap")


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """Hyper-parameters of one training run (shared by all models trained together).

    ``clip_norm=None`` and ``noise_multiplier=0`` give non-private SGD. ``sampling``: ``"poisson"``
    (default) or ``"shuffle"`` (see :class:`targets.sampling.BatchSampler`).
    ``expected_batch_size`` is the fixed normaliser of the gradient sum (q times the nominal
    training-set size).
    """

    arch: str
    epochs: float
    sample_rate: float
    lr: float
    expected_batch_size: float
    clip_norm: float | None = None
    noise_multiplier: float = 0.0
    momentum: float = 0.0
    sampling: str = "poisson"

    def __post_init__(self) -> None:
        if self.sampling not in SAMPLING:
            raise UserError(f"unknown batch sampling {self.sampling!r}; choose one of {', '.join(SAMPLING)}")
        if not 0 < self.sample_rate <= 1:
            raise UserError(f"sample rate must be in (0, 1], got {self.sample_rate}")
        if self.epochs <= 0 or self.lr <= 0 or self.expected_batch_size <= 0:
            raise UserError("epochs, learning rate and expected batch size must be positive")
        if self.noise_multiplier < 0:
            raise UserError(f"noise multiplier must be >= 0, got {self.noise_multiplier}")
        if self.noise_multiplier > 0 and self.clip_norm is None:
            raise UserError("DP-SGD noise needs a clip norm; set clip_norm")

    @property
    def steps(self) -> int:
        """Number of SGD steps: epochs / q, rounded (at least 1)."""
        return max(1, int(round(self.epochs / self.sample_rate)))

    @property
    def private(self) -> bool:
        return self.clip_norm is not None

    def to_dict(self) -> dict:
        return asdict(self) | {"steps": self.steps}


def example_loss(arch: Architecture) -> Callable[[Params, torch.Tensor, torch.Tensor], torch.Tensor]:
    """Cross-entropy of one example ``(x, y)`` under one model: the function per-example gradients differentiate."""
    def loss(params: Params, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(arch.forward(params, x.unsqueeze(0)), y.unsqueeze(0))

    return loss


def batch_loss(arch: Architecture) -> Callable[[Params, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]:
    """``sum_i w_i loss_i`` of one model on a batch (non-private SGD without a layer description)."""
    def loss(params: Params, x: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return (F.cross_entropy(arch.forward(params, x), y, reduction="none") * w).sum()

    return loss


def clipped_sum(per_example: Params, weights: torch.Tensor, clip_norm: float) -> Params:
    """``sum_i w_i min(1, C/||g_i||) g_i`` over the batch axis of materialised per-example gradients
    [Abadi et al. 2016, Alg. 1, clip and sum].

    ``per_example`` tensors are (R, B, ...); ``weights`` (R, B) is 1 for sampled, 0 for padding.
    """
    sq = sum(g.flatten(2).pow(2).sum(-1) for g in per_example.values())
    factor = weights * torch.clamp(clip_norm / (sq.sqrt() + 1e-12), max=1.0)
    return {name: torch.einsum("rb,rb...->r...", factor, g) for name, g in per_example.items()}


def to_device(array: np.ndarray, device: torch.device) -> torch.Tensor:
    """Host array to ``device``; on CUDA through pinned memory without blocking the host."""
    tensor = torch.from_numpy(array)
    if device.type == "cuda":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor


@dataclass(frozen=True)
class Batch:
    """The rows sampled at one step for R models: host arrays ``rows`` (R, B) (data row indices) and
    ``weights`` (R, B) (1 sampled, 0 padding), and their device copies ``index`` and ``weight``."""

    rows: np.ndarray
    weights: np.ndarray
    index: torch.Tensor
    weight: torch.Tensor


@dataclass(frozen=True)
class ExtraExamples:
    """Examples a hook adds to one step besides the data rows.

    ``grads``: their per-example gradients (R, K, ...), clipped by the step like every other
    example's; ``weight`` (R, K): 1 where the example joins this step, else 0; ``data_weight``
    (R, B), optional: replaces the batch's weights (e.g. a permutation slot the canary holds is no
    data row). ``presummed`` (R, ...), optional, instead of ``grads``: the sum of the joining
    examples when their gradients are fixed vectors of norm at most C (gradient canaries), which the
    per-example clipping leaves unchanged — thousands of one-run canaries are added as one sum.
    """

    grads: Params | None
    weight: torch.Tensor | None
    data_weight: torch.Tensor | None = None
    presummed: Params | None = None


class StepHook:
    """Optional instrumentation of :class:`DPSGDStep`; every method does nothing by default.

    One hook serves all chunks of a training call: :meth:`start` tells it which of the trained
    models (a slice of the seeds) the step object that follows trains. The hook may then, at each
    step ``t`` (parameters ``theta_t``), contribute examples (:meth:`extra_examples`), supply the
    data rows' per-example gradients (:meth:`data_gradients`, when :attr:`replaces_gradients`) and
    see the noisy clipped sum that moves the models (:meth:`observe`).
    """

    #: per-example gradients of the data rows come from :meth:`data_gradients` (materialised)
    replaces_gradients: bool = False

    def start(self, models: slice, step: DPSGDStep) -> None:
        """``step`` (initial parameters in ``step.params``) trains ``models`` from now on."""

    def extra_examples(self, t: int, batch: Batch, params: Params) -> ExtraExamples | None:
        """Examples joining step ``t`` besides ``batch`` (None: none)."""
        return None

    def data_gradients(self, params: Params, index: torch.Tensor) -> Params:
        """Per-example gradients (R, b, ...) of the data rows ``index`` (R, b), used instead of the model's."""
        raise NotImplementedError

    def data_sum(self, t: int, summed: Params) -> None:
        """Step ``t``'s clipped sum of the data rows alone (before the extra examples and the noise):
        what an instrumented auditor knows (the one-run ``updates`` threat subtracts it)."""

    def observe(self, t: int, batch: Batch, noisy_sum: Params, params: Params) -> None:
        """After the noise of step ``t``: ``noisy_sum`` is the noisy clipped sum that moves ``params`` (theta_t)."""


class DPSGDStep:
    """R stacked models and the one (DP-)SGD step that moves them (see the module docstring).

    ``X``, ``y``: the training rows on the device; ``chunk``: the models (:class:`ModelChunk`);
    ``options``: the clipping method, hook and starting point (:class:`StepOptions`; its ``step_type``
    and ``max_memory`` are :func:`targets.training.train_models`'); ``examples``: per-example gradients
    are materialised this many examples at a time (``vmap`` clipping, architectures without layers, a
    hook's gradients). ``step()`` advances ``params``.
    """

    def __init__(self, arch: Architecture, config: TrainConfig, X: torch.Tensor, y: torch.Tensor, n_classes: int,
                 chunk: ModelChunk, *, options: StepOptions | None = None, examples: int | None = None) -> None:
        options = StepOptions() if options is None else options
        members, seeds, models = chunk.members, chunk.seeds, chunk.models
        hook, clipping, init = options.hook, options.clipping, options.init
        self.arch, self.config, self.X, self.y, self.hook, self.clipping = arch, config, X, y, hook, clipping
        self.device = X.device
        self.examples = examples
        self.sampler = BatchSampler(members, [np.random.default_rng([int(s), 2]) for s in seeds],
                                    config.sample_rate, config.sampling)
        self.noise_gens = [torch.Generator(device=self.device).manual_seed(int(s) + 1) for s in seeds]
        inits = ([init] * len(seeds) if init is not None else
                 [init_params(arch, tuple(X.shape[1:]), n_classes, torch.Generator(device="cpu").manual_seed(int(s)))
                  for s in seeds])
        self.params: Params = {k: torch.stack([p[k] for p in inits]).to(self.device) for k in inits[0]}
        self.velocity = {k: torch.zeros_like(v) for k, v in self.params.items()} if config.momentum else None
        self.layered = arch.layers is not None and clipping != "vmap" and not (hook and hook.replaces_gradients)
        self._vmap_grads = vmap(vmap(grad(example_loss(arch)), in_dims=(None, 0, 0)), in_dims=(0, 0, 0))
        self._batch_grads = vmap(grad(batch_loss(arch)), in_dims=(0, 0, 0, 0))
        self.t = 0
        if hook is not None:
            hook.start(slice(0, len(seeds)) if models is None else models, self)

    def sample(self) -> Batch:
        """The next batch of every model (:class:`targets.sampling.BatchSampler`)."""
        rows, weights = self.sampler.next()
        return Batch(rows, weights, to_device(rows, self.device), to_device(weights, self.device))

    def rows(self, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The data rows ``index`` (R, b): features (R, b, ...) and labels (R, b) (``index_select``:
        faster than advanced indexing on the CPU)."""
        flat = index.flatten()
        return (self.X.index_select(0, flat).view(*index.shape, *self.X.shape[1:]),
                self.y.index_select(0, flat).view(index.shape))

    def per_example_gradients(self, params: Params, index: torch.Tensor) -> Params:
        """Materialised per-example gradients (R, b, ...) of the data rows ``index`` (R, b)."""
        return self._vmap_grads(params, *self.rows(index))

    def weighted_sum(self, params: Params, index: torch.Tensor, weight: torch.Tensor) -> Params:
        """Unclipped ``sum_i w_i g_i`` of the data rows ``index`` (non-private SGD), one backward pass."""
        if self.arch.layers is not None:
            return weighted_gradient(self.arch.layers, params, *self.rows(index), weight)
        return self._batch_grads(params, *self.rows(index), weight)

    def clipped_sum(self, params: Params, index: torch.Tensor, weight: torch.Tensor) -> Params:
        """``sum_i w_i min(1, C/||g_i||) g_i`` over the data rows ``index`` (R, B) at ``params``
        [Abadi et al. 2016, Alg. 1]: ghost clipping for layered models, else materialised gradients
        ``examples`` at a time (from the hook when it replaces them)."""
        clip = float(self.config.clip_norm)
        if self.layered:
            return per_example_clipped_sum(self.arch.layers, params, *self.rows(index), weight, clip, self.clipping)
        replaced = self.hook is not None and self.hook.replaces_gradients
        source = self.hook.data_gradients if replaced else self.per_example_gradients
        width = index.shape[1]
        chunk = width if self.examples is None else self.examples
        summed: Params | None = None
        for s in range(0, width, chunk):
            part = clipped_sum(source(params, index[:, s:s + chunk]), weight[:, s:s + chunk], clip)
            summed = part if summed is None else {k: summed[k] + part[k] for k in part}
        return summed

    def noise_std(self) -> float:
        """``sigma C``: the standard deviation of the noise added to the clipped sum [Abadi et al. 2016, Alg. 1]."""
        return self.config.noise_multiplier * float(self.config.clip_norm)

    def add_noise(self, summed: Params) -> Params:
        """``summed + N(0, noise_std^2 I)``: one draw per model and step from the model's noise generator,
        split over the parameters in their fixed order. The only place noise enters training."""
        std = self.noise_std()
        if std <= 0:
            return summed
        n_noise = sum(v[0].numel() for v in summed.values())
        noise = torch.stack([torch.randn(n_noise, generator=g, device=self.device) for g in self.noise_gens])
        out, offset = {}, 0
        for name, value in summed.items():
            size = value[0].numel()
            out[name] = value + std * noise[:, offset:offset + size].view_as(value)
            offset += size
        return out

    def gradient_sum(self, batch: Batch) -> Params:
        """The clipped sum of step ``t`` before noise, with the hook's extra examples (unclipped
        weighted sum for non-private SGD)."""
        if not self.config.private:
            return self.weighted_sum(self.params, batch.index, batch.weight)
        extra = self.hook.extra_examples(self.t, batch, self.params) if self.hook is not None else None
        weight = batch.weight if extra is None or extra.data_weight is None else extra.data_weight
        summed = self.clipped_sum(self.params, batch.index, weight)
        if self.hook is not None:
            self.hook.data_sum(self.t, summed)
        if extra is not None:
            part = (extra.presummed if extra.grads is None else
                    clipped_sum(extra.grads, extra.weight, float(self.config.clip_norm)))
            summed = {k: summed[k] + part[k] for k in summed}
        return summed

    def step(self) -> None:
        """One step: sample, clip and sum, add noise, let the hook observe, then
        ``theta <- theta - lr / B * (sum + noise)`` (through the momentum buffer when configured)."""
        batch = self.sample()
        summed = self.gradient_sum(batch)
        if self.config.private:
            summed = self.add_noise(summed)
        if self.hook is not None:
            self.hook.observe(self.t, batch, summed, self.params)
        scale = self.config.lr / self.config.expected_batch_size
        with torch.no_grad():
            for name, update in summed.items():
                if self.velocity is not None:
                    self.velocity[name] = update = self.config.momentum * self.velocity[name] + update
                self.params[name] = self.params[name] - scale * update
        self.t += 1


@dataclass(frozen=True, kw_only=True)
class ModelChunk:
    """The models one :class:`DPSGDStep` moves together: ``members[r]`` the data rows model ``r`` trains on,
    ``seeds[r]`` its seed, ``models`` which models of the hook's run these are (None: all of them)."""

    members: list[np.ndarray]
    seeds: Sequence[int]
    models: slice | None = None


@dataclass(frozen=True, kw_only=True)
class StepOptions:
    """How the (DP-)SGD step of :func:`targets.training.train_models` is computed, instrumented and started.

    ``clipping``: ``auto``/``ghost``/``direct`` (layer-wise, :mod:`targets.ghost_clipping`) or ``vmap``
    (materialised per-example gradients), all the same result up to rounding; ``max_memory`` (bytes or a size
    such as ``"2GiB"``, None: the default) bounds a step's estimated memory and so how many models move
    together, never the result; ``hook``: optional instrumentation (:class:`StepHook`); ``step_type``: a
    subclass replacing the step (the deliberately broken controls of :mod:`targets.dpsgd_controls`);
    ``init``: one model's parameters every model starts from (public, e.g. pre-trained or zeros) instead of
    the default initialisation drawn from each model's seed.
    """

    clipping: str = "auto"
    max_memory: int | str | None = None
    hook: StepHook | None = None
    step_type: type[DPSGDStep] = DPSGDStep
    init: Params | None = None
