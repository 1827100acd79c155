"""DP-SGD / full-batch DP-GD audit runs: a canary and an observer hooked into the one DP-SGD step.

A thin layer over :func:`targets.training.train_models` — the trainer of every target, shadow and
reference model — for the multi-run DP audits of ``run dp`` (Nasr et al. 2021, "Adversary
instantiation"; Nasr et al. 2023, "Tight auditing of differentially private machine learning").
``train_audit_runs`` trains ``R`` runs of one target with the project's DP-SGD step
(:class:`targets.dpsgd_step.DPSGDStep`: sampling, clipping, noise, division by the expected batch
size) and instruments it with a :class:`CanaryHook` that adds one canary to the runs where
``included[r]`` is True:

* an **input canary** (an example ``(x, y)``) is one more training row, sampled like every other
  row, its gradient computed and clipped like every other example's;
* a **gradient canary** (Nasr et al. 2021, Sec. 4.2) is a fixed vector ``g`` of parameter size
  that takes part exactly like one more example whose per-example gradient is ``g`` at every
  parameter value (:meth:`CanaryHook.extra_examples`): under Poisson sampling it joins each step
  with probability ``q`` (every step for full-batch DP-GD) by a coin from its own generator
  ``np.random.default_rng([seed, 3])`` — so a canary that never joins leaves the run exactly as
  :func:`targets.training.train_models` trains it — and under ``"shuffle"`` sampling it takes one
  slot of the permutation; it goes through the same clipping (``||g|| = C`` leaves it unchanged)
  and is summed before the noise.

What the auditor sees (``observe``, :meth:`CanaryHook.observe`):

* ``"final"``: the final parameters (stacked, for the white-box and black-box threat models);
* ``"updates"``: additionally, at every step, the noisy gradient sum that produced the update,
  recovered from two consecutive parameter vectors as ``(theta_t - theta_{t+1}) * B / lr`` (the
  step hands it to the hook: it is the same number), projected on the canary direction ``d_t``
  and divided by ``C``. For a gradient canary ``d_t = g / ||g||``; for an input canary ``d_t`` is
  the direction of the canary's clipped gradient at ``theta_t`` (computable by the adversary, who
  knows ``theta_t``). For full-batch DP-GD (``q = 1``) the adversary also knows every other
  example's clipped gradient at ``theta_t`` (it knows the dataset and the parameters) and subtracts
  their clipped sum (computed with the step's own clipping); under Poisson sampling the batch is
  secret, so nothing is subtracted. With the canary in, the observation is therefore
  ``b_t ||clip(g_t)||/C + (natural part) + N(0, sigma^2)``, ``b_t ~ Bernoulli(q)``; without it,
  ``(natural part) + N(0, sigma^2)``.

**Replace-one pair on a crafted dataset** (``replace_pair=True``, with a gradient canary ``g``): the
worst case for shuffled batches (Chua et al. 2024, "How private are DP-SGD implementations?",
the ABLQ lower-bound pair; Annamalai et al. 2024 audit it in the same gradient form). The
adversary chooses the whole dataset — DP must hold for every pair of neighbouring datasets — so
every one of the ``n`` training records has per-example gradient ``-g``; the audited record (the
last row, present in both worlds) has ``+g`` with the canary in and ``-g`` without, when it looks
like every other record (:meth:`CanaryHook.data_gradients` replaces the data rows' gradients). The
per-step observation adds the expected batch size ``q n`` (public) to the projection: under
shuffling the batch size is exactly ``q n``, so the observation is ``2 + N(0, sigma^2)`` at the one
step per epoch that holds the audited record (canary in) and ``N(0, sigma^2)`` otherwise; under
Poisson sampling the secret batch size adds Binomial noise.

Momentum must be 0 (the per-step observation would otherwise mix earlier noise in).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch
from torch.func import grad, vmap

from audit.errors import UserError
from targets.datasets import Dataset
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
from targets.models import Architecture, Params, get_architecture
from targets.training import train_models

__all__ = ["AuditRuns", "CanaryHook", "CanaryPlan", "train_audit_runs", "canary_direction", "flatten", "unflatten",
           "param_shapes", "dead_coordinate"]


def param_shapes(arch_name: str, data: Dataset) -> dict[str, tuple[int, ...]]:
    """Shapes of one model's parameters, in the (fixed) order used to flatten them."""
    return dict(get_architecture(arch_name).shapes(data.shape, data.n_classes))


def flatten(params: Params) -> torch.Tensor:
    """Stacked parameters (R, ...) -> (R, P) in the architecture's parameter order."""
    return torch.cat([v.reshape(v.shape[0], -1) for v in params.values()], dim=1)


def unflatten(vec: torch.Tensor, shapes: dict[str, tuple[int, ...]]) -> Params:
    """Inverse of :func:`flatten`: (..., P) -> parameters of ``shapes`` with the same leading axes
    (a single vector (P,) or stacked runs (R, P))."""
    out, start = {}, 0
    for name, shape in shapes.items():
        size = int(np.prod(shape))
        out[name] = vec[..., start:start + size].reshape(*vec.shape[:-1], *shape)
        start += size
    return out


def dead_coordinate(arch_name: str, data: Dataset, train_index: np.ndarray) -> int:
    """A flattened parameter index that receives no gradient from the training data.

    For ``logreg`` and ``mlp`` (first layer) a weight attached to an input feature that is zero in
    every training example has gradient exactly 0 for every example at every parameter value, so a
    Dirac gradient canary there is observed against pure noise (Nasr et al. 2023 place their Dirac
    canary on such a coordinate). Raises UserError when no such feature exists.
    """
    if arch_name not in ("logreg", "mlp"):
        raise UserError(f"a Dirac canary needs a logreg or mlp model (got {arch_name}); use --canary gradient")
    X = np.asarray(data.X[train_index]).reshape(len(train_index), -1)
    zero = np.flatnonzero(np.all(X == 0, axis=0))
    if zero.size == 0:
        raise UserError("no input feature is zero in every training example, so no parameter is free of data "
                        "gradients; use --canary gradient")
    # weight row 0 (class 0 for logreg, hidden unit 0 for mlp), column of the first always-zero feature
    return int(zero[0])


@dataclass(frozen=True)
class AuditRuns:
    """What :func:`train_audit_runs` returns.

    ``initial``/``final``: (R, P) flattened parameters; ``step_obs``: (R, T) per-step
    observations (``observe="updates"``), else None; ``canary_steps``: (R,) how many steps the
    canary actually joined (0 for excluded runs); ``subtracted_known``: whether the adversary's
    known natural-gradient part was subtracted (full batch).
    """

    initial: torch.Tensor
    final: torch.Tensor
    step_obs: np.ndarray | None
    canary_steps: np.ndarray
    subtracted_known: bool


def canary_direction(arch: Architecture, params: Params, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Unit direction (R, P) of an input canary's gradient (hence of its clipped gradient) under each
    of R stacked models: what the adversary computes from ``theta``."""
    g = flatten(vmap(grad(example_loss(arch)), in_dims=(0, None, None))(params, x, y))
    return g / g.norm(dim=1, keepdim=True).clamp_min(1e-12)


class CanaryHook(StepHook):
    """The canary and the auditor of the module docstring, as hooks of :class:`targets.dpsgd_step.DPSGDStep`.

    ``row``: the training row the canary is about — the input canary's row, the permutation slot a
    gradient canary holds under shuffling, or the audited record of the replace-one pair.
    ``grad_canary``: the flattened gradient canary (None for an input canary). Collects, over the
    chunks of a training call, the initial parameters, the per-step observations (``updates``, kept
    on the device until the end) and how many steps the canary joined.
    """

    def __init__(self, config: TrainConfig, seeds: list[int], included: np.ndarray, row: int,
                 grad_canary: torch.Tensor | None, shapes: dict[str, tuple[int, ...]], updates: bool,
                 replace_pair: bool) -> None:
        self.config, self.seeds, self.included, self.row, self.updates = config, seeds, included, row, updates
        self.replaces_gradients = replace_pair
        self.clip = float(config.clip_norm)
        self.g = grad_canary
        if grad_canary is not None:
            self.g_params = unflatten(grad_canary, shapes)
            self.g_dir = grad_canary / grad_canary.norm().clamp_min(1e-12)
        self.initial: list[torch.Tensor] = []
        self.obs: list[torch.Tensor] = []
        self.counts = np.zeros(len(seeds), dtype=np.int64)

    def start(self, models: slice, step: DPSGDStep) -> None:
        self.models, self.step, self.inc = models, step, self.included[models]
        self.coin_rngs = [np.random.default_rng([int(s), 3]) for s in self.seeds[models]]
        self.joined = np.zeros(self.inc.shape, dtype=bool)
        self.initial.append(flatten(step.params).detach().cpu())
        if self.updates:
            self.obs.append(torch.zeros(self.inc.size, self.config.steps, device=step.device))
        if self.replaces_gradients:  # +1 for the audited record with the canary in, -1 for every other record
            self.sign = torch.as_tensor(np.where(self.inc, 1.0, -1.0), dtype=torch.float32, device=step.device)

    def _holds_row(self, batch: Batch) -> np.ndarray:
        """(R,) whether each run (with the canary) has the canary's row in this batch (host arrays: no device sync)."""
        return ((batch.rows == self.row) & (batch.weights > 0)).any(axis=1) & self.inc

    def extra_examples(self, t: int, batch: Batch, params: Params) -> ExtraExamples | None:
        """The gradient canary ``g`` joins by its own Poisson coin, or when the batch holds its slot."""
        if self.g is None or self.replaces_gradients:
            return None
        data_weight = None
        if self.config.sampling == "shuffle":  # its slot is in this batch: it joins, and the slot is no data row
            self.joined = self._holds_row(batch)
            data_weight = batch.weight * (batch.index != self.row)
        else:
            self.joined = np.array([rng.random() < self.config.sample_rate for rng in self.coin_rngs]) & self.inc
        weight = to_device(self.joined[:, None].astype(np.float32), self.step.device)
        grads = {k: v.expand(self.inc.size, 1, *v.shape) for k, v in self.g_params.items()}
        return ExtraExamples(grads, weight, data_weight)

    def data_gradients(self, params: Params, index: torch.Tensor) -> Params:
        """The crafted replace-one dataset: every record's gradient is ``-g``, the audited record's ``+g``
        with the canary in."""
        sign = (index == self.row).float() * (self.sign[:, None] + 1.0) - 1.0
        return {k: sign.reshape(*sign.shape, *[1] * g.dim()) * g for k, g in self.g_params.items()}

    def observe(self, t: int, batch: Batch, noisy_sum: Params, params: Params) -> None:
        if self.g is None or self.replaces_gradients:  # the canary's row is in the batch
            self.joined = self._holds_row(batch)
        self.counts[self.models] += self.joined
        if not self.updates:
            return
        total = flatten(noisy_sum)
        if self.replaces_gradients:  # every other record gives -g: the expected batch size q n of them is public
            total = total + self.config.expected_batch_size * self.g
        elif self.config.sample_rate >= 1.0:  # the adversary knows every other example's clipped gradient
            others = batch.weight * (batch.index != self.row)
            total = total - flatten(self.step.clipped_sum(params, batch.index, others))
        if self.g is not None:
            direction = self.g_dir
        else:  # the canary's clipped gradient at theta_t, as the adversary computes it
            direction = canary_direction(self.step.arch, params, self.step.X[self.row], self.step.y[self.row])
        self.obs[-1][:, t] = (total * direction).sum(1) / self.clip


@dataclass(frozen=True, kw_only=True)
class CanaryPlan:
    """The canary of :func:`train_audit_runs`, which runs insert it and what of it is observed.

    ``included[r]``: run ``r`` adds the canary. Exactly one of ``grad_canary`` (flattened vector of the
    parameter size, norm <= C expected) and ``input_canary`` (features of one example with the data's
    shape, label) must be given; ``replace_pair`` (gradient canary only) trains on the crafted
    replace-one dataset of the module docstring; ``observe``: ``"final"`` parameters only or also the
    per-step ``"updates"`` of the module docstring.
    """

    included: np.ndarray
    grad_canary: np.ndarray | None = None
    input_canary: tuple[np.ndarray, int] | None = None
    replace_pair: bool = False
    observe: str = "final"


def train_audit_runs(
    data: Dataset,
    train_index: np.ndarray,
    config: TrainConfig,
    seeds: list[int],
    plan: CanaryPlan,
    *,
    device: torch.device | str = "cpu",
    progress: bool = False,
    options: StepOptions | None = None,
) -> AuditRuns:
    """Train ``len(seeds)`` DP-SGD runs on ``data[train_index]`` with the canary of ``plan`` (:class:`CanaryPlan`).

    ``replace_pair`` trains on the crafted replace-one dataset instead of ``data[train_index]`` (whose
    size still sets ``n``). The runs are trained by :func:`targets.training.train_models` on the rows of
    ``train_index`` in increasing order plus the canary's row: a run whose canary never joins equals the
    model ``train_models`` trains with the same seed on those rows. ``progress`` and ``options``
    (:class:`targets.dpsgd_step.StepOptions` without a hook: e.g. ``max_memory`` and ``init``, a public
    starting point shared by every run such as pre-trained parameters) are passed on, with the canary's
    hook. See the module docstring for what ``observe="updates"`` records.
    """
    included, grad_canary, input_canary = plan.included, plan.grad_canary, plan.input_canary
    replace_pair, observe = plan.replace_pair, plan.observe
    options = StepOptions() if options is None else options
    if options.hook is not None:
        raise ValueError("the audit runs' step hook is their canary's; options must not carry one")
    if not config.private or config.clip_norm is None:
        raise UserError("DP audits need a DP-SGD target (clip norm and noise multiplier set)")
    if config.momentum:
        raise UserError("DP audits with per-step observation need momentum 0")
    if (grad_canary is None) == (input_canary is None):
        raise ValueError("give exactly one of grad_canary and input_canary")
    if replace_pair and grad_canary is None:
        raise ValueError("the replace-one crafted pair needs a gradient canary")
    if observe not in ("final", "updates"):
        raise ValueError(f"observe must be 'final' or 'updates', got {observe!r}")
    included = np.asarray(included, dtype=bool)
    if included.shape != (len(seeds),):
        raise ValueError(f"included must have one flag per seed ({len(seeds)}), got {included.shape}")
    shapes = param_shapes(config.arch, data)
    rows = data.subset(np.sort(np.asarray(train_index)))
    n = len(rows)
    g = None
    if input_canary is not None:  # one more row, a member of the runs that include it
        extra_x, extra_y = np.asarray(input_canary[0], dtype=np.float32).reshape(data.shape), int(input_canary[1])
        joins_as_row = True
    else:  # a row-shaped placeholder: the permutation slot a gradient canary holds under shuffling
        g = torch.as_tensor(np.asarray(grad_canary, dtype=np.float32), device=torch.device(device))
        if g.shape != (sum(int(np.prod(s)) for s in shapes.values()),):
            raise ValueError("grad_canary must be a flattened vector with one entry per model parameter")
        extra_x, extra_y = np.zeros(data.shape, dtype=np.float32), 0
        joins_as_row = config.sampling == "shuffle" and not replace_pair
    train = Dataset(np.concatenate([rows.X, extra_x[None]]), np.append(rows.y, extra_y).astype(rows.y.dtype),
                    data.name, data.n_classes, data.shape, data.source)
    masks = np.zeros((len(seeds), n + 1), dtype=bool)
    masks[:, :n] = True
    if joins_as_row:
        masks[:, n] = included
    hook = CanaryHook(config, list(seeds), included, n - 1 if replace_pair else n, g, shapes,
                      observe == "updates", replace_pair)
    final = train_models(train, masks, config, list(seeds), device=device, progress=progress, desc="audit runs",
                         options=replace(options, hook=hook))
    step_obs = torch.cat(hook.obs).cpu().numpy().astype(np.float64) if observe == "updates" else None
    return AuditRuns(torch.cat(hook.initial), flatten(final), step_obs, hook.counts,
                     subtracted_known=config.sample_rate >= 1.0 or replace_pair)
