"""Vectorised training of many small models at once: non-private SGD and DP-SGD.

Both trainers use Poisson subsampling (each member of a model's training set joins each step
independently with probability ``q``) by default — the sampling the DP-SGD accountant assumes —
or, with ``TrainConfig.sampling = "shuffle"``, fixed-size batches cut from a fresh random
permutation every epoch (what most implementations do; its privacy is *not* the Poisson figure,
Chua et al. 2024), and normalise the gradient sum by a fixed, data-independent
expected batch size — dividing by the realised batch size leaks membership under add/remove
neighbouring (docs/references.md, "Pitfalls"). DP-SGD [Abadi et al. 2016, Algorithm 1]: per-example
gradients (``torch.func.vmap(grad)``) clipped to L2 norm ``C``, summed, plus ``N(0, sigma^2 C^2 I)``,
divided by the expected batch size. Its privacy is that of the Poisson-subsampled Gaussian
mechanism composed over ``steps`` (audit.theory.dpsgd.DPSGDClaim).

Per-example clipping: for architectures described as a sequence of layers (all of
:mod:`targets.models`) the per-example gradient norms and the clipped sum come from one forward
and one backward pass, with ghost norms where cheaper (:mod:`targets.ghost_clipping`; Li et al.
2022, Bu et al. 2023) — the same result as clipping materialised ``vmap(grad)`` per-example
gradients, which remain the fallback for other architectures (computed in chunks of examples).

Models are stacked along a leading model axis and trained together (``vmap`` over that axis, or
grouped convolutions). Every model has its own seed: its initialisation, batch sampling and noise
come from its own generators, so a model's result does not depend on which other models it was
trained with — nor on how many models are trained at once: ``max_memory`` sets the number of
models per chunk from an estimate of the memory one model's step needs.

On CUDA the data stay on the GPU, batch indices travel from pinned host memory without blocking,
and nothing in the step loop waits for the GPU (no ``.item()``/host copies until the end).
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch.func import grad, vmap
from tqdm.auto import tqdm

from audit.errors import UserError
from targets.datasets import Dataset
from targets.ghost_clipping import MODES, activation_bytes_per_example, per_example_clipped_sum, weighted_gradient
from targets.models import Architecture, Params, get_architecture, init_params

#: Default memory budget of one ``train_models`` call (bytes): sets how many models train at once.
DEFAULT_MAX_MEMORY = 2 * 1024**3
#: ``clipping`` choices: the layer-wise methods of :mod:`targets.ghost_clipping`, or ``vmap`` (grad).
CLIPPING_METHODS = (*MODES, "vmap")
#: ``TrainConfig.sampling`` choices (see :class:`BatchSampler`).
SAMPLING = ("poisson", "shuffle")
_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3,
          "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tb": 1000**4, "tib": 1024**4}


def parse_memory(text: str | int) -> int:
    """Bytes in a memory size such as ``2GiB``, ``512MiB``, ``1.5GB`` or ``1000000`` (bytes)."""
    if isinstance(text, int):
        value = text
    else:
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", str(text))
        unit = match.group(2).lower() if match else None
        if match is None or unit not in _UNITS:
            raise UserError(f"cannot read memory size {text!r}; write e.g. 2GiB, 512MiB or 1.5GB")
        value = int(float(match.group(1)) * _UNITS[unit])
    if value < 1024**2:
        raise UserError(f"memory budget {text!r} is below 1 MiB; give e.g. --max-memory 2GiB")
    return value


@dataclass(frozen=True)
class TrainConfig:
    """Hyper-parameters of one training run (shared by all models trained together).

    ``clip_norm=None`` and ``noise_multiplier=0`` give non-private SGD. ``sampling``: ``"poisson"``
    (default) or ``"shuffle"`` (see :class:`BatchSampler`).
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


def resolve_device(device: str = "auto") -> torch.device:
    """``auto`` picks CUDA when available, else CPU; ``cuda`` without a GPU is a user error."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda requested but no CUDA GPU is available; use --device cpu or auto")
    if device not in ("cpu", "cuda"):
        raise UserError(f"unknown device {device!r}; choose auto, cpu or cuda")
    return torch.device(device)


def _example_loss(arch: Architecture):
    def loss(params: Params, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(arch.forward(params, x.unsqueeze(0)), y.unsqueeze(0))

    return loss


def _batch_loss(arch: Architecture):
    def loss(params: Params, x: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return (F.cross_entropy(arch.forward(params, x), y, reduction="none") * w).sum()

    return loss


def _clipped_sum(per_example: Params, weights: torch.Tensor, clip_norm: float) -> Params:
    """Sum over the batch axis of per-example gradients clipped to L2 norm ``clip_norm``.

    ``per_example`` tensors are (R, B, ...); ``weights`` (R, B) is 1 for sampled, 0 for padding.
    """
    sq = sum(g.flatten(2).pow(2).sum(-1) for g in per_example.values())
    factor = weights * torch.clamp(clip_norm / (sq.sqrt() + 1e-12), max=1.0)
    return {name: torch.einsum("rb,rb...->r...", factor, g) for name, g in per_example.items()}


def _sample_batches(members: list[np.ndarray], rngs: list[np.random.Generator], q: float):
    """Poisson sampling for each model, padded to a common length: (index, weight) arrays (R, B)."""
    chosen = [idx[rng.random(idx.shape[0]) < q] for idx, rng in zip(members, rngs)]
    return _pad(chosen)


def _pad(chosen: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    width = max(1, max(c.shape[0] for c in chosen))
    index = np.zeros((len(chosen), width), dtype=np.int64)
    weight = np.zeros((len(chosen), width), dtype=np.float32)
    for r, c in enumerate(chosen):
        index[r, : c.shape[0]] = c
        weight[r, : c.shape[0]] = 1.0
    return index, weight


def steps_per_epoch(sample_rate: float) -> int:
    """Batches per epoch of shuffled sampling: ``round(1 / q)``."""
    return max(1, int(round(1.0 / sample_rate)))


class BatchSampler:
    """The batches of every model, step after step: ``next() -> (index, weight)``, each (R, B).

    ``"poisson"``: each member joins each step independently with probability ``q`` (what the
    DP-SGD accountant assumes). ``"shuffle"``: at the start of every epoch of
    :func:`steps_per_epoch` steps, each model draws a random permutation of its members and takes
    consecutive, near-equal slices of it (``numpy.array_split``) — every member is in exactly one
    batch per epoch. Each model draws from its own generator, so results do not depend on which
    models are trained together.
    """

    def __init__(self, members: list[np.ndarray], rngs: list[np.random.Generator], q: float,
                 sampling: str = "poisson") -> None:
        if sampling not in SAMPLING:
            raise UserError(f"unknown batch sampling {sampling!r}; choose one of {', '.join(SAMPLING)}")
        self.members, self.rngs, self.q, self.sampling = members, rngs, q, sampling
        self.per_epoch = steps_per_epoch(q)
        self.step = 0
        self._slices: list[list[np.ndarray]] = []

    def next(self) -> tuple[np.ndarray, np.ndarray]:
        if self.sampling == "poisson":
            self.step += 1
            return _sample_batches(self.members, self.rngs, self.q)
        k = self.step % self.per_epoch
        if k == 0:
            self._slices = [np.array_split(rng.permutation(idx), self.per_epoch)
                            for idx, rng in zip(self.members, self.rngs)]
        self.step += 1
        return _pad([s[k] for s in self._slices])


def _batch_width_bound(members: list[np.ndarray], q: float, sampling: str = "poisson") -> int:
    """A high-probability bound on the padded batch width: max over models of a Binomial(n_r, q)
    count is below ``q n + 5 sqrt(q n) + 1`` except with negligible probability (Chernoff); a
    shuffled batch has at most ``ceil(n / steps_per_epoch)`` members."""
    n = max((m.shape[0] for m in members), default=1)
    if sampling == "shuffle":
        return max(1, math.ceil(n / steps_per_epoch(q)))
    mean = q * n
    return max(1, min(n, int(math.ceil(mean + 5 * math.sqrt(mean) + 1))))


def memory_plan(arch: Architecture, params: Params, input_shape: tuple[int, ...], width: int, private: bool,
                clipping: str, max_memory: int) -> tuple[int, int]:
    """(models per chunk, examples per chunk) that keep one training step within ``max_memory`` bytes.

    Per model: parameters, momentum, gradient and noise (8 copies of the parameters) plus, per
    example of the padded batch, the activations and per-example quantities the clipping method
    holds (:func:`targets.ghost_clipping.activation_bytes_per_example`), or, for ``vmap(grad)``
    clipping, three copies of a per-example gradient. The example chunk is the whole batch except
    for ``vmap`` clipping, whose per-example gradients are materialised a chunk at a time.
    """
    one = {k: v[:1] for k, v in params.items()}
    n_params = sum(v[0].numel() for v in params.values())
    fixed = 8 * 4 * n_params
    if arch.layers is not None:
        activations = activation_bytes_per_example(arch.layers, one, input_shape, clipping if private and
                                                   clipping != "vmap" else "auto")
    else:
        activations = 2 * 4 * 8 * math.prod(input_shape)
    per_example = activations + (3 * 4 * n_params if private and (clipping == "vmap" or arch.layers is None) else 0)
    vmap_chunked = private and (clipping == "vmap" or arch.layers is None)
    if not vmap_chunked:
        return max(1, int(max_memory // (fixed + per_example * width))), width
    models = max(1, int(max_memory // (fixed + per_example * min(width, 32))))
    examples = max(1, min(width, int((max_memory / models - fixed) // per_example)))
    return models, examples


def _to_device(array: np.ndarray, device: torch.device) -> torch.Tensor:
    """Host array to ``device``; on CUDA through pinned memory without blocking the host."""
    tensor = torch.from_numpy(array)
    if device.type == "cuda":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor


def train_models(
    data: Dataset,
    masks: np.ndarray,
    config: TrainConfig,
    seeds: Sequence[int],
    device: torch.device | str = "cpu",
    progress: bool = True,
    desc: str = "training",
    max_memory: int | str | None = None,
    clipping: str = "auto",
) -> Params:
    """Train ``len(seeds)`` models at once; model ``r`` trains on ``data`` rows where ``masks[r]``.

    ``max_memory`` (bytes or a size such as ``"2GiB"``; default :data:`DEFAULT_MAX_MEMORY`) bounds the
    estimated memory of a step and so sets how many models are trained together (:func:`memory_plan`);
    the result is the same for any chunking. ``clipping`` selects the per-example clipping method of
    DP-SGD: ``auto``/``ghost``/``direct`` (:mod:`targets.ghost_clipping`) or ``vmap`` (materialised
    ``vmap(grad)`` per-example gradients); all give the same result up to rounding.
    Returns the stacked final parameters (leading model axis) on the CPU.
    """
    device = torch.device(device)
    masks = np.asarray(masks, dtype=bool)
    if masks.ndim != 2 or masks.shape != (len(seeds), len(data)):
        raise ValueError(f"masks must be (models, examples) = ({len(seeds)}, {len(data)}), got {masks.shape}")
    if clipping not in CLIPPING_METHODS:
        raise UserError(f"unknown clipping method {clipping!r}; choose one of {', '.join(CLIPPING_METHODS)}")
    budget = parse_memory(DEFAULT_MAX_MEMORY if max_memory is None else max_memory)
    arch = get_architecture(config.arch)
    members = [np.flatnonzero(m) for m in masks]
    probe = init_params(arch, data.shape, data.n_classes, torch.Generator().manual_seed(0))
    width = _batch_width_bound(members, config.sample_rate, config.sampling)
    models, examples = memory_plan(arch, {k: v[None] for k, v in probe.items()}, tuple(data.shape), width,
                                   config.private, clipping, budget)
    X = torch.as_tensor(data.X).to(device)
    y = torch.as_tensor(data.y).to(device)
    chunks = []
    for start in range(0, len(seeds), models):
        stop = min(len(seeds), start + models)
        label = desc if models >= len(seeds) else f"{desc} [models {start + 1}-{stop} of {len(seeds)}]"
        chunks.append(_train_chunk(arch, X, y, data, members[start:stop], config, list(seeds[start:stop]), device,
                                   progress, label, clipping, examples))
    return {k: torch.cat([c[k] for c in chunks]) for k in chunks[0]}


def _train_chunk(arch: Architecture, X: torch.Tensor, y: torch.Tensor, data: Dataset, members: list[np.ndarray],
                 config: TrainConfig, seeds: list[int], device: torch.device, progress: bool, desc: str,
                 clipping: str, examples: int) -> Params:
    """Train the models of one chunk together (see :func:`train_models`)."""
    torch_gens = [torch.Generator(device="cpu").manual_seed(int(s)) for s in seeds]
    noise_gens = [torch.Generator(device=device).manual_seed(int(s) + 1) for s in seeds]
    batch_rngs = [np.random.default_rng([int(s), 2]) for s in seeds]
    inits = [init_params(arch, data.shape, data.n_classes, g) for g in torch_gens]
    params = {k: torch.stack([p[k] for p in inits]).to(device) for k in inits[0]}
    velocity = {k: torch.zeros_like(v) for k, v in params.items()}
    n_noise = sum(v[0].numel() for v in params.values())
    layered = arch.layers is not None and clipping != "vmap"

    if config.private and not layered:
        per_example_grads = vmap(vmap(grad(_example_loss(arch)), in_dims=(None, 0, 0)), in_dims=(0, 0, 0))
    elif not config.private and arch.layers is None:
        batch_grads = vmap(grad(_batch_loss(arch)), in_dims=(0, 0, 0, 0))
    scale = config.lr / config.expected_batch_size
    sampler = BatchSampler(members, batch_rngs, config.sample_rate, config.sampling)
    for _ in tqdm(range(config.steps), desc=desc, disable=not progress, unit="step", leave=False):
        index_np, weight_np = sampler.next()
        index = _to_device(index_np, device)
        weight = _to_device(weight_np, device)
        xb, yb = X[index], y[index]
        if config.private:
            clip = float(config.clip_norm)
            if layered:
                summed = per_example_clipped_sum(arch.layers, params, xb, yb, weight, clip, clipping)
            else:
                summed = None
                for s in range(0, xb.shape[1], examples):
                    part = _clipped_sum(per_example_grads(params, xb[:, s:s + examples], yb[:, s:s + examples]),
                                        weight[:, s:s + examples], clip)
                    summed = part if summed is None else {k: summed[k] + part[k] for k in part}
            std = config.noise_multiplier * clip
            if std > 0:  # one draw per model and step, split over the parameters in a fixed order
                noise = torch.stack([torch.randn(n_noise, generator=g, device=device) for g in noise_gens])
                offset = 0
                for name in params:
                    size = params[name][0].numel()
                    summed[name] = summed[name] + std * noise[:, offset:offset + size].view_as(summed[name])
                    offset += size
        elif arch.layers is not None:
            summed = weighted_gradient(arch.layers, params, xb, yb, weight)
        else:
            summed = batch_grads(params, xb, yb, weight)
        with torch.no_grad():
            for name in params:
                if config.momentum:
                    velocity[name] = config.momentum * velocity[name] + summed[name]
                    params[name] = params[name] - scale * velocity[name]
                else:
                    params[name] = params[name] - scale * summed[name]
    return {k: v.detach().cpu() for k, v in params.items()}


def predict_logits(arch_name: str, params: Params, X: np.ndarray, device: torch.device | str = "cpu",
                   chunk: int = 2048) -> np.ndarray:
    """Logits of every stacked model on ``X``: array (R, n, n_classes), float64."""
    arch = get_architecture(arch_name)
    device = torch.device(device)
    stacked = {k: v.to(device) for k, v in params.items()}
    forward = vmap(arch.forward, in_dims=(0, None))
    outs = []
    with torch.no_grad():
        for start in range(0, X.shape[0], chunk):
            xb = torch.as_tensor(X[start : start + chunk], device=device)
            outs.append(forward(stacked, xb).double().cpu().numpy())
    return np.concatenate(outs, axis=1) if outs else np.zeros((next(iter(params.values())).shape[0], 0, 0))


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Numerically stable log-softmax over the last axis."""
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def select_model(params: Params, r: int) -> Params:
    """Model ``r`` of a stack, kept with a leading axis of length 1."""
    return {k: v[r : r + 1] for k, v in params.items()}


def steps_for(epochs: float, sample_rate: float) -> int:
    """Steps that :class:`TrainConfig` runs for ``epochs`` at rate ``sample_rate``."""
    return max(1, int(math.floor(epochs / sample_rate + 0.5)))
