"""Training runs of the reconstruction game on the project's DP-SGD targets, through the one DP-SGD step.

Run ``r`` trains the target's recipe on its training rows plus one *target record* chosen among ``n``
candidates: candidate ``c`` is a gradient canary ``g_c`` (a flattened parameter vector, ``||g_c|| <= C``),
the record whose per-example gradient is ``g_c`` at every step — the informed adversary's candidates of
Hayes, Mahloujifar & Balle (NeurIPS 2023), who use such gradient canaries to meet their ReRo bound
(docs/references.md, "Reconstruction robustness"). The candidate joins each step by its own Poisson
coin (``np.random.default_rng([seed, 3])``, as :class:`targets.dpsgd_audit.CanaryHook`), or, under
shuffled batches, when the batch holds its permutation slot; it is clipped and summed before the noise
by :class:`targets.dpsgd_step.DPSGDStep` like every example.

What the informed adversary sees (:class:`CandidateHook`): ``"updates"`` — at every step the noisy
clipped sum minus the clipped sum of the *other* records of the batch (it knows them, their sampling
and the parameters ``theta_t``), projected on an orthonormal basis ``U`` (P, k) of the candidates'
span (the component orthogonal to the span is the same for every candidate: the projection loses
nothing for the likelihood); ``"final"`` — the initial and final parameters only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from targets.datasets import Dataset
from targets.dpsgd_audit import flatten, param_shapes, unflatten
from targets.dpsgd_step import Batch, DPSGDStep, ExtraExamples, StepHook, StepOptions, TrainConfig, to_device
from targets.models import Params
from targets.training import train_models

__all__ = ["CandidateDraw", "CandidateRuns", "CandidateHook", "train_candidate_runs"]


@dataclass(frozen=True)
class CandidateRuns:
    """What :func:`train_candidate_runs` returns: ``initial``/``final`` (R, P) flattened parameters;
    ``residuals`` (R, T, k) the per-step residual updates projected on the basis (``"updates"``), else
    None; ``joined`` (R,) how many steps each run's target record joined."""

    initial: torch.Tensor
    final: torch.Tensor
    residuals: np.ndarray | None
    joined: np.ndarray


class CandidateHook(StepHook):
    """Adds each run's target candidate to the DP-SGD step and records the adversary's view (module docstring).

    ``candidates`` (n, P), ``chosen`` (R,) the candidate index of every run, ``basis`` (P, k) orthonormal
    columns or None (no per-step observation), ``row`` the permutation slot of the target record under
    shuffled batches.
    """

    def __init__(self, config: TrainConfig, seeds: list[int], candidates: torch.Tensor, chosen: np.ndarray,
                 basis: torch.Tensor | None, row: int, shapes: dict[str, tuple[int, ...]]) -> None:
        self.config, self.seeds, self.chosen, self.basis, self.row = config, seeds, chosen, basis, row
        self.candidates, self.shapes = candidates, shapes
        self.initial: list[torch.Tensor] = []
        self.obs: list[torch.Tensor] = []
        self.counts = np.zeros(len(seeds), dtype=np.int64)

    def start(self, models: slice, step: DPSGDStep) -> None:
        self.models, self.step = models, step
        self.coin_rngs = [np.random.default_rng([int(s), 3]) for s in self.seeds[models]]
        chosen = torch.as_tensor(self.chosen[models], device=self.candidates.device)
        self.grads = unflatten(self.candidates.index_select(0, chosen), self.shapes)  # (r, ...) per run
        self.joined = np.zeros(len(self.coin_rngs), dtype=bool)
        self.initial.append(flatten(step.params).detach().cpu())
        if self.basis is not None:
            self.obs.append(torch.zeros(len(self.coin_rngs), self.config.steps, self.basis.shape[1],
                                        device=step.device))

    def extra_examples(self, t: int, batch: Batch, params: Params) -> ExtraExamples:
        data_weight = None
        if self.config.sampling == "shuffle":  # the batch holds its slot: it joins, and the slot is no data row
            self.joined = ((batch.rows == self.row) & (batch.weights > 0)).any(axis=1)
            data_weight = batch.weight * (batch.index != self.row)
        else:
            self.joined = np.array([rng.random() < self.config.sample_rate for rng in self.coin_rngs])
        weight = to_device(self.joined[:, None].astype(np.float32), self.step.device)
        grads = {k: v[:, None] for k, v in self.grads.items()}
        return ExtraExamples(grads, weight, data_weight)

    def observe(self, t: int, batch: Batch, noisy_sum: Params, params: Params) -> None:
        self.counts[self.models] += self.joined
        if self.basis is None:
            return
        others = batch.weight * (batch.index != self.row)
        residual = flatten(noisy_sum) - flatten(self.step.clipped_sum(params, batch.index, others))
        self.obs[-1][:, t] = residual @ self.basis


@dataclass(frozen=True, kw_only=True)
class CandidateDraw:
    """The reconstruction game's draw (module docstring): ``candidates`` (n, P) flattened gradient records,
    ``chosen[r]`` the index of run ``r``'s target record among them, and ``basis`` (P, k) orthonormal columns
    to record the per-step residuals in (None: only the final parameters are recorded)."""

    candidates: np.ndarray
    chosen: np.ndarray
    basis: np.ndarray | None = None


def train_candidate_runs(data: Dataset, train_index: np.ndarray, config: TrainConfig, seeds: list[int],
                         draw: CandidateDraw, *, device: torch.device | str = "cpu",
                         step_type: type[DPSGDStep] = DPSGDStep, progress: bool = False) -> CandidateRuns:
    """Train ``len(seeds)`` runs of ``config`` on ``data[train_index]`` plus run ``r``'s target record
    ``draw.candidates[draw.chosen[r]]`` (module docstring); ``draw.basis`` (P, k) orthonormal columns records
    the per-step residuals, None records only the final parameters. ``step_type`` replaces the step (the
    deliberately broken controls of :mod:`targets.dpsgd_controls`). Runs are trained by
    :func:`targets.training.train_models`; a run's result depends only on its seed and candidate."""
    candidates, chosen, basis = draw.candidates, draw.chosen, draw.basis
    if config.clip_norm is None or config.momentum:
        raise ValueError("the reconstruction game needs clipped DP-SGD steps without momentum")
    shapes = param_shapes(config.arch, data)
    dev = torch.device(device)
    cand = torch.as_tensor(np.asarray(candidates, dtype=np.float32), device=dev)
    if cand.ndim != 2 or cand.shape[1] != sum(int(np.prod(s)) for s in shapes.values()):
        raise ValueError("candidates must be (n, P) flattened parameter vectors")
    rows = data.subset(np.sort(np.asarray(train_index)))
    n = len(rows)
    train = Dataset(np.concatenate([rows.X, np.zeros((1, *data.shape), dtype=rows.X.dtype)]),
                    np.append(rows.y, 0).astype(rows.y.dtype), data.name, data.n_classes, data.shape, data.source)
    masks = np.zeros((len(seeds), n + 1), dtype=bool)
    masks[:, :n] = True
    masks[:, n] = config.sampling == "shuffle"  # the slot the target record holds in the permutation
    U = None if basis is None else torch.as_tensor(np.asarray(basis, dtype=np.float32), device=dev)
    hook = CandidateHook(config, list(seeds), cand, np.asarray(chosen, dtype=np.int64), U, n, shapes)
    final = train_models(train, masks, config, list(seeds), device=dev, progress=progress, desc="reconstruction runs",
                         options=StepOptions(hook=hook, step_type=step_type))
    residuals = None if U is None else torch.cat(hook.obs).cpu().numpy().astype(np.float64)
    return CandidateRuns(torch.cat(hook.initial), flatten(final), residuals, hook.counts)
