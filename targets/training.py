"""Vectorised training of many small models at once: non-private SGD and DP-SGD.

Both trainers use Poisson subsampling (each member of a model's training set joins each step
independently with probability ``q``) and normalise the gradient sum by a fixed, data-independent
expected batch size — dividing by the realised batch size leaks membership under add/remove
neighbouring (REFERENCES.md, pitfalls). DP-SGD [Abadi et al. 2016, Algorithm 1]: per-example
gradients (``torch.func.vmap(grad)``) clipped to L2 norm ``C``, summed, plus ``N(0, sigma^2 C^2 I)``,
divided by the expected batch size. Its privacy is that of the Poisson-subsampled Gaussian
mechanism composed over ``steps`` (audit.accounting.DPSGDClaim).

Models are stacked along a leading model axis and trained together with ``vmap`` over that axis.
Every model has its own seed: its initialisation, batch sampling and noise come from its own
generators, so a model's result does not depend on which other models it was trained with.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch.func import grad, vmap
from tqdm.auto import tqdm

from audit.errors import UserError
from targets.datasets import Dataset
from targets.models import Architecture, Params, get_architecture, init_params


@dataclass(frozen=True)
class TrainConfig:
    """Hyper-parameters of one training run (shared by all models trained together).

    ``clip_norm=None`` and ``noise_multiplier=0`` give non-private SGD with Poisson batches.
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

    def __post_init__(self) -> None:
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
    width = max(1, max(c.shape[0] for c in chosen))
    index = np.zeros((len(chosen), width), dtype=np.int64)
    weight = np.zeros((len(chosen), width), dtype=np.float32)
    for r, c in enumerate(chosen):
        index[r, : c.shape[0]] = c
        weight[r, : c.shape[0]] = 1.0
    return index, weight


def train_models(
    data: Dataset,
    masks: np.ndarray,
    config: TrainConfig,
    seeds: Sequence[int],
    device: torch.device | str = "cpu",
    progress: bool = True,
    desc: str = "training",
) -> Params:
    """Train ``len(seeds)`` models at once; model ``r`` trains on ``data`` rows where ``masks[r]``.

    Returns the stacked final parameters (leading model axis) on the CPU.
    """
    device = torch.device(device)
    masks = np.asarray(masks, dtype=bool)
    if masks.ndim != 2 or masks.shape != (len(seeds), len(data)):
        raise ValueError(f"masks must be (models, examples) = ({len(seeds)}, {len(data)}), got {masks.shape}")
    arch = get_architecture(config.arch)
    torch_gens = [torch.Generator(device="cpu").manual_seed(int(s)) for s in seeds]
    noise_gens = [torch.Generator(device=device).manual_seed(int(s) + 1) for s in seeds]
    batch_rngs = [np.random.default_rng([int(s), 2]) for s in seeds]
    inits = [init_params(arch, data.shape, data.n_classes, g) for g in torch_gens]
    params = {k: torch.stack([p[k] for p in inits]).to(device) for k in inits[0]}
    velocity = {k: torch.zeros_like(v) for k, v in params.items()}
    members = [np.flatnonzero(m) for m in masks]
    X = torch.as_tensor(data.X, device=device)
    y = torch.as_tensor(data.y, device=device)

    if config.private:
        per_example_grads = vmap(vmap(grad(_example_loss(arch)), in_dims=(None, 0, 0)), in_dims=(0, 0, 0))
    else:
        batch_grads = vmap(grad(_batch_loss(arch)), in_dims=(0, 0, 0, 0))
    scale = config.lr / config.expected_batch_size
    for _ in tqdm(range(config.steps), desc=desc, disable=not progress, unit="step", leave=False):
        index_np, weight_np = _sample_batches(members, batch_rngs, config.sample_rate)
        index = torch.as_tensor(index_np, device=device)
        weight = torch.as_tensor(weight_np, device=device)
        xb, yb = X[index], y[index]
        if config.private:
            summed = _clipped_sum(per_example_grads(params, xb, yb), weight, float(config.clip_norm))
            std = config.noise_multiplier * float(config.clip_norm)
            if std > 0:
                for name, value in summed.items():
                    noise = torch.stack([torch.randn(value.shape[1:], generator=g, device=device) for g in noise_gens])
                    summed[name] = value + std * noise
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
