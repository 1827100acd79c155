"""One training run with M gradient canaries: the one-run DP-SGD game [Steinke, Nasr, Jagielski 2023,
Sec. 6; Mahloujifar, Melis, Chaudhuri 2025], played inside :class:`targets.dpsgd_step.DPSGDStep`.

The canaries. Canary ``i`` is a fixed gradient ``g_i = C d_i`` of norm C (the clip norm), trained on
by its own fair coin (``included[i]``). With the canary in, at every step it joins the batch by its
own Poisson coin with the target's sampling rate q — exactly one more Poisson-sampled record; its
clipped gradient is itself (norm C), so the joining canaries are summed directly
(:class:`targets.dpsgd_step.ExtraExamples` ``presummed``) and added before the noise like every
other clipped example. The directions ``d_i`` are

* ``dirac``: distinct coordinates in every parameter tensor (:func:`spread_coordinates`: equal
  shares, each capped by its tensor's size), in each tensor those the data's gradients touch least
  (:func:`quiet_coordinates`), while the model has coordinates left (M <= P): the directions are
  orthonormal, so no canary sees another. A tensor the code adds no noise to holds canaries too, so it
  shows in the bound;
* ``random``: M seeded random unit vectors when M > P. Two of them overlap by about
  ``N(0, 1/P)``: canary ``i``'s observation carries the cross-talk ``sum_{j != i} b_j <d_i, d_j>``,
  whose variance is about ``q (M - 1) / (2 P)`` (units of C^2; half the canaries in, each joining
  with rate q). It only blurs the scores — every bound stays valid, whatever the score — and the
  ``updates`` score reads it as extra Gaussian noise (:func:`crosstalk_variance`).

What the auditor sees (:class:`OneRunCanaryHook`):

* ``updates``: per step the noisy sum minus the data rows' clipped sum (the instrumented auditor
  knows it, :meth:`targets.dpsgd_step.StepHook.data_sum`), projected on each ``d_i`` and divided by
  C: ``b_t + N(0, sigma^2)`` for a Dirac canary (plus the cross-talk for random directions);
* ``white-box``: the initial and final parameters only.

Momentum must be 0 (as :mod:`targets.dpsgd_audit`). Sources: docs/references.md, "One-run auditing".
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np
import torch
from torch.func import grad, vmap

from audit.errors import UserError
from targets.datasets import Dataset
from targets.dpsgd_audit import flatten, param_shapes, unflatten
from targets.dpsgd_step import (
    Batch,
    DPSGDStep,
    ExtraExamples,
    StepHook,
    StepOptions,
    TrainConfig,
    example_loss,
    to_device,
)
from targets.models import Params, get_architecture, init_params
from targets.training import train_models

__all__ = ["CANARY_KINDS", "OneRunCanaries", "OneRunRun", "OneRunCanaryHook", "quiet_coordinates", "spread_coordinates",
           "crosstalk_variance", "random_direction_capacity", "train_one_run", "MAX_DIRECTION_ELEMENTS"]

#: The canary directions: distinct coordinates, or random unit vectors when coordinates run out.
CANARY_KINDS = ("dirac", "random")
#: Random directions held at once (M x P float32): 2^28 elements = 1 GiB.
MAX_DIRECTION_ELEMENTS = 1 << 28
#: Training rows whose per-example gradients rank the coordinates (:func:`quiet_coordinates`).
RANKING_ROWS = 2048


def crosstalk_variance(canaries: int, params: int, sample_rate: float) -> float:
    """Variance (units of C^2) that M random unit directions in P dimensions add to one canary's
    per-step projection: ``q (M - 1) / (2 P)`` (each other canary is in with probability 1/2, joins
    with rate q, and overlaps by ``<d_i, d_j>`` of variance 1/P); 0 for M <= P (Dirac canaries)."""
    return 0.0 if canaries <= params else sample_rate * (canaries - 1) / (2.0 * params)


def random_direction_capacity(params: int, sample_rate: float, noise_multiplier: float) -> int:
    """The most random-direction canaries a model of ``params`` coordinates holds: the cross-talk
    variance stays at most a quarter of the noise's (``sigma^2 / 4``: the noise's spread grows by at
    most 12%) and the directions fit in :data:`MAX_DIRECTION_ELEMENTS`."""
    by_noise = 1 + int(noise_multiplier ** 2 * params / (2.0 * sample_rate))
    return min(by_noise, MAX_DIRECTION_ELEMENTS // params)


def spread_coordinates(touched: np.ndarray, sizes: tuple[int, ...] | list[int], count: int) -> np.ndarray:
    """``count`` distinct flattened coordinates spread over every parameter tensor (``sizes``, in the
    flattened order): each tensor gets ``min(size, L)`` with ``L`` the smallest equal share that reaches
    ``count`` (the first tensors with room take one more until the total is ``count``), in each tensor its
    least ``touched`` coordinates (ties by index). Returned in the order of ``touched`` (ties by index), so
    a model of one tensor, or ``count`` equal to the parameter count, gets ``argsort(touched)[:count]``."""
    touched, sizes = np.asarray(touched, dtype=np.float64), np.asarray(sizes, dtype=np.int64)
    if not 0 <= count <= touched.size or sizes.sum() != touched.size:
        raise ValueError(f"{count} coordinates of {touched.size} in tensors of {sizes.sum()}")
    level = bisect.bisect_left(range(int(sizes.max(initial=0)) + 1), count,
                               key=lambda share: np.minimum(sizes, share).sum())
    alloc = np.minimum(sizes, max(level - 1, 0))
    for k in np.flatnonzero(sizes >= level):
        if alloc.sum() == count:
            break
        alloc[k] += 1
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    chosen = np.sort(np.concatenate([a + np.argsort(touched[a:b], kind="stable")[:n] for a, b, n in
                                     zip(bounds[:-1], bounds[1:], alloc, strict=True)]).astype(np.int64))
    return chosen[np.argsort(touched[chosen], kind="stable")]


def quiet_coordinates(arch_name: str, data: Dataset, rows: np.ndarray, seed: int, count: int) -> np.ndarray:
    """``count`` flattened coordinates in every parameter tensor (:func:`spread_coordinates`), those the
    data's clipped gradients touch least at the run's initial parameters (seed ``seed``): ranked by
    ``sum_i |clip(g_i)|`` over up to :data:`RANKING_ROWS` training rows (ties by index). For logistic
    regression and MLPs a weight of an input feature that is zero in every row ranks first with exactly
    0 — the generalisation of :func:`targets.dpsgd_audit.dead_coordinate` to many canaries. Uses the
    training data and the public initialisation only, never the canaries' coins."""
    arch = get_architecture(arch_name)
    params = init_params(arch, tuple(data.shape), data.n_classes, torch.Generator(device="cpu").manual_seed(int(seed)))
    chosen = np.sort(rows)[:RANKING_ROWS]
    per_example = vmap(grad(example_loss(arch)), in_dims=(None, 0, 0))
    touch = torch.zeros(sum(v.numel() for v in params.values()), dtype=torch.float64)
    for start in range(0, chosen.size, 256):
        part = chosen[start:start + 256]
        x = torch.as_tensor(np.asarray(data.X[part], dtype=np.float32))
        y = torch.as_tensor(np.asarray(data.y[part]), dtype=torch.long)
        per = flatten(per_example(params, x, y))
        per = per / per.norm(dim=1, keepdim=True).clamp_min(1.0)  # clipped to norm 1 (the ranking is scale-free)
        touch += per.abs().sum(0).double()
    return spread_coordinates(touch.numpy(), [v.numel() for v in params.values()], count)


@dataclass(frozen=True)
class OneRunCanaries:
    """M canaries: ``kind`` (``dirac`` or ``random``), ``coordinates`` (M,) for Dirac or ``directions``
    (M, P) unit rows for random, ``included`` (M,) fair coins, and the seed of their Poisson coins."""

    kind: str
    included: np.ndarray
    coin_seed: int
    coordinates: np.ndarray | None = None
    directions: np.ndarray | None = None

    @property
    def count(self) -> int:
        return int(self.included.size)


class OneRunCanaryHook(StepHook):
    """The canaries and the auditor of the module docstring, as a hook of one training run (R = 1)."""

    def __init__(self, config: TrainConfig, canaries: OneRunCanaries, shapes: dict[str, tuple[int, ...]],
                 updates: bool) -> None:
        self.config, self.canaries, self.shapes, self.updates = config, canaries, shapes, updates
        self.clip = float(config.clip_norm)
        self.n_params = sum(int(np.prod(s)) for s in shapes.values())
        self.coins = np.random.default_rng([int(canaries.coin_seed), 31])
        self.joins = np.zeros(canaries.count, dtype=np.int64)
        self.obs: torch.Tensor | None = None
        self.data: torch.Tensor | None = None

    def start(self, models: slice, step: DPSGDStep) -> None:
        if models.stop - models.start != 1:
            raise ValueError("a one-run audit trains exactly one model")
        self.step, self.device = step, step.device
        self.initial = flatten(step.params).detach().cpu()
        c = self.canaries
        if c.kind == "dirac":
            self.index = torch.as_tensor(c.coordinates, dtype=torch.long, device=self.device)
        else:
            d = torch.as_tensor(c.directions, dtype=torch.float32, device=self.device)
            self.dirs = d / d.norm(dim=1, keepdim=True).clamp_min(1e-12)
        if self.updates:
            self.obs = torch.zeros(self.config.steps, c.count, device=self.device)

    def extra_examples(self, t: int, batch: Batch, params: Params) -> ExtraExamples:
        """Each included canary joins by its own Poisson coin at rate q; the joining ones, ``C d_i``
        each (norm C: clipping leaves them unchanged), summed into one vector."""
        joined = (self.coins.random(self.canaries.count) < self.config.sample_rate) & self.canaries.included
        self.joins += joined
        b = to_device(joined.astype(np.float32), self.device)
        if self.canaries.kind == "dirac":
            total = torch.zeros(self.n_params, device=self.device).index_add_(0, self.index, self.clip * b)
        else:
            total = self.clip * (b @ self.dirs)
        return ExtraExamples(None, None, presummed=unflatten(total[None], self.shapes))

    def data_sum(self, t: int, summed: Params) -> None:
        if self.updates:
            self.data = flatten(summed)[0]

    def project(self, vec: torch.Tensor) -> torch.Tensor:
        """``<d_i, vec>`` for every canary (M,)."""
        return vec[self.index] if self.canaries.kind == "dirac" else self.dirs @ vec

    def observe(self, t: int, batch: Batch, noisy_sum: Params, params: Params) -> None:
        if self.updates:
            self.obs[t] = self.project(flatten(noisy_sum)[0] - self.data) / self.clip


@dataclass(frozen=True)
class OneRunRun:
    """What :func:`train_one_run` returns: ``initial``/``final`` (P,) parameters, ``step_obs`` (M, T)
    per-step observations (``updates``) or None, ``white_box`` (M,) ``<d_i, theta_0 - theta_T>`` in
    units of ``lr C / B`` (the summed updates' projection), ``joins`` (M,) steps each canary joined."""

    initial: np.ndarray
    final: np.ndarray
    step_obs: np.ndarray | None
    white_box: np.ndarray
    joins: np.ndarray


def train_one_run(data: Dataset, train_index: np.ndarray, config: TrainConfig, seed: int, canaries: OneRunCanaries,
                  *, updates: bool, device: torch.device | str = "cpu", progress: bool = False) -> OneRunRun:
    """One DP-SGD training of ``data[train_index]`` (rows in increasing order, model seed ``seed``: the
    same model :func:`targets.training.train_models` trains without canaries when none joins) with the
    canaries of the module docstring, by the project's one DP-SGD step."""
    if not config.private or config.clip_norm is None:
        raise UserError("a one-run DP audit needs a DP-SGD target (clip norm and noise multiplier set)")
    if config.momentum:
        raise UserError("a one-run DP audit needs plain DP-SGD (momentum 0)")
    if config.sampling != "poisson":
        raise UserError("one-run gradient canaries join by Poisson coins; the target samples by "
                        f"{config.sampling}: audit it with the many-run `run dp --canary dirac-replace`")
    shapes = param_shapes(config.arch, data)
    rows = data.subset(np.sort(np.asarray(train_index)))
    hook = OneRunCanaryHook(config, canaries, shapes, updates)
    final = train_models(rows, np.ones((1, len(rows)), dtype=bool), config, [int(seed)], device=device,
                         progress=progress, desc="one run",
                         options=StepOptions(hook=hook))
    initial = hook.initial[0].double()
    last = flatten(final)[0].double()
    diff = (initial - last).to(torch.float32).to(hook.device)
    white = hook.project(diff).double().cpu().numpy() * config.expected_batch_size / (config.lr * hook.clip)
    obs = hook.obs.T.double().cpu().numpy() if updates else None
    return OneRunRun(initial.numpy(), last.numpy(), obs, white, hook.joins)
