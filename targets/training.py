"""Vectorised training of many small models at once: non-private SGD and DP-SGD.

Every model is moved by the one step of :mod:`targets.dpsgd_step` (DP-SGD [Abadi et al. 2016,
Algorithm 1]: Poisson or shuffled batches, per-example clipping, Gaussian noise, division by the
expected batch size — docs/references.md, "DP-SGD accounting" and "Pitfalls"; plain SGD without a
clip norm). This module trains the targets, shadow and reference models, and — through the step's
hooks — the audit runs of ``run dp`` (:mod:`targets.dpsgd_audit`).

Models are stacked along a leading model axis and trained together (``vmap`` over that axis, or
grouped convolutions). Every model has its own seed and generators, so a model's result does not
depend on which other models it was trained with — nor on how many models are trained at once:
``max_memory`` sets the number of models per chunk from an estimate of the memory one model's step
needs (:func:`memory_plan`). Training runs under the training thread policy
(:class:`targets.threads.TrainingThreads`: intra-op threads follow the free CPUs; results do not
depend on them).
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Sequence

import numpy as np
import torch
from torch.func import vmap
from tqdm.auto import tqdm

from audit.errors import UserError
from targets.datasets import Dataset
from targets.dpsgd_step import CLIPPING_METHODS, ModelChunk, StepOptions, TrainConfig
from targets.ghost_clipping import activation_bytes_per_example, stacked_forward
from targets.models import Architecture, Params, get_architecture, init_params
from targets.sampling import batch_width_bound
from targets.threads import TrainingThreads

#: Default memory budget of one ``train_models`` call (bytes): sets how many models train at once.
DEFAULT_MAX_MEMORY = 2 * 1024**3
#: On the CPU, models whose step holds more than this many bytes train one at a time (:func:`memory_plan`).
CPU_STACK_BYTES = 64 * 1024**2
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


#: PyTorch's notice when the autograd engine's CUDA thread makes the first cuBLAS call of a backward pass
#: before any CUDA context is current on it; PyTorch then sets the primary context itself (pytorch/pytorch
#: pull request 120131), so nothing is wrong, but every GPU run printed it, -q or not. Silenced (that message
#: alone) wherever this module is imported, executor workers included.
CUBLAS_CONTEXT_NOTICE = "Attempting to run cuBLAS, but there was no current CUDA context"
warnings.filterwarnings("ignore", message=CUBLAS_CONTEXT_NOTICE, category=UserWarning)


def resolve_device(device: str = "auto") -> torch.device:
    """``auto`` picks CUDA when available, else CPU; ``cuda`` without a GPU is a user error."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda requested but no CUDA GPU is available; use --device cpu or auto")
    if device not in ("cpu", "cuda"):
        raise UserError(f"unknown device {device!r}; choose auto, cpu or cuda")
    return torch.device(device)


def memory_plan(arch: Architecture, params: Params, input_shape: tuple[int, ...], width: int, private: bool,
                clipping: str, max_memory: int, device_type: str = "cpu") -> tuple[int, int]:
    """(models per chunk, examples per chunk) that keep one training step within ``max_memory`` bytes.

    Per model: parameters, momentum, gradient and noise (8 copies of the parameters) plus, per
    example of the padded batch, the activations and per-example quantities the clipping method
    holds (:func:`targets.ghost_clipping.activation_bytes_per_example`), or, for ``vmap(grad)``
    clipping, three copies of a per-example gradient. The example chunk is the whole batch except
    for ``vmap`` clipping, whose per-example gradients are materialised a chunk at a time. On the
    CPU a model whose step holds more than :data:`CPU_STACK_BYTES` trains alone: stacking would not
    vectorise its convolutions (one ``conv2d`` per model) and the stacked working set leaves the
    caches (8 stacked MNIST CNNs at batch 256 took 1.37x the time of 8 trained one at a time on a
    2-core Xeon).
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
        if device_type == "cpu" and fixed + per_example * width > CPU_STACK_BYTES:
            return 1, width
        return max(1, int(max_memory // (fixed + per_example * width))), width
    models = max(1, int(max_memory // (fixed + per_example * min(width, 32))))
    examples = max(1, min(width, int((max_memory / models - fixed) // per_example)))
    return models, examples


def train_models(
    data: Dataset,
    masks: np.ndarray,
    config: TrainConfig,
    seeds: Sequence[int],
    device: torch.device | str = "cpu",
    progress: bool = True,
    desc: str = "training",
    *,
    options: StepOptions | None = None,
) -> Params:
    """Train ``len(seeds)`` models at once; model ``r`` trains on ``data`` rows where ``masks[r]``.

    Each chunk of models is moved ``config.steps`` times by :class:`targets.dpsgd_step.DPSGDStep`
    (or ``options.step_type``). ``options`` (:class:`targets.dpsgd_step.StepOptions`, default: its
    defaults) selects the per-example clipping method of DP-SGD (all give the same result up to
    rounding), the memory bound ``max_memory`` (default :data:`DEFAULT_MAX_MEMORY`) that sets how many
    models are trained together (:func:`memory_plan`; the result is the same for any chunking), the
    ``hook`` instrumenting the step (the canaries and observations of :mod:`targets.dpsgd_audit`), the
    step's replacement ``step_type`` and the public starting point ``init``.
    Returns the stacked final parameters (leading model axis) on the CPU.
    """
    options = StepOptions() if options is None else options
    clipping, hook, max_memory = options.clipping, options.hook, options.max_memory
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
    width = batch_width_bound(members, config.sample_rate, config.sampling)
    materialised = "vmap" if hook is not None and hook.replaces_gradients else clipping
    models, examples = memory_plan(arch, {k: v[None] for k, v in probe.items()}, tuple(data.shape), width,
                                   config.private, materialised, budget, device.type)
    X = torch.as_tensor(data.X).to(device)
    y = torch.as_tensor(data.y).to(device)
    chunks = []
    with TrainingThreads() as threads:
        for start in range(0, len(seeds), models):
            stop = min(len(seeds), start + models)
            label = desc if models >= len(seeds) else f"{desc} [models {start + 1}-{stop} of {len(seeds)}]"
            chunk = ModelChunk(members=members[start:stop], seeds=seeds[start:stop], models=slice(start, stop))
            step = options.step_type(arch, config, X, y, data.n_classes, chunk, options=options, examples=examples)
            for _ in tqdm(range(config.steps), desc=label, disable=not progress, unit="step", leave=False):
                step.step()
                threads.tick()
            chunks.append({k: v.detach().cpu() for k, v in step.params.items()})
    return {k: torch.cat([c[k] for c in chunks]) for k in chunks[0]}


def predict_logits(arch_name: str, params: Params, X: np.ndarray, device: torch.device | str = "cpu",
                   chunk: int = 2048) -> np.ndarray:
    """Logits of every stacked model on ``X``: array (R, n, n_classes), float64. Layered models run
    the training forward pass (:func:`targets.ghost_clipping.stacked_forward`, channels-last on the
    CPU), others ``vmap`` over the model axis."""
    arch = get_architecture(arch_name)
    device = torch.device(device)
    stacked = {k: v.to(device) for k, v in params.items()}
    models = next(iter(stacked.values())).shape[0]
    if arch.layers is not None:
        def forward(p: Params, xb: torch.Tensor) -> torch.Tensor:
            return stacked_forward(arch.layers, p, xb.expand(models, *xb.shape))
    else:
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
