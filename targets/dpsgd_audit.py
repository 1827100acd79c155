"""DP-SGD / full-batch DP-GD training runs with a canary, observed by an auditor.

A dedicated small trainer for DP audits (Nasr et al. 2021, "Adversary instantiation"; Nasr et al.
2023, "Tight auditing of differentially private machine learning"). It trains ``R`` runs of one
target at once (``vmap`` over the run axis, chunked), exactly like
:func:`targets.training.train_models` — Poisson sampling with rate ``q``, per-example gradients
clipped to ``C`` by the project's clipping function :func:`targets.training._clipped_sum`, Gaussian
noise ``N(0, sigma^2 C^2 I)``, division by the fixed expected batch size — and adds one canary to
the runs where ``included[r]`` is True:

* an **input canary** (an example ``(x, y)``) is one more training row, Poisson-sampled like every
  other row, its gradient computed and clipped like every other example's;
* a **gradient canary** (Nasr et al. 2021, Sec. 4.2) is a fixed vector ``g`` of parameter size
  that takes part exactly like one more example whose per-example gradient is ``g`` at every
  parameter value: it joins each step with probability ``q`` (every step for full-batch DP-GD),
  goes through the same clipping (``||g|| = C`` leaves it unchanged) and is summed before the noise.

What the auditor sees (``observe``):

* ``"final"``: the final parameters (stacked, for the white-box and black-box threat models);
* ``"updates"``: additionally, at every step, the noisy gradient sum that produced the update,
  recovered from two consecutive parameter vectors as ``(theta_t - theta_{t+1}) * B / lr`` (the
  trainer computes it directly: it is the same number), projected on the canary direction ``d_t``
  and divided by ``C``. For a gradient canary ``d_t = g / ||g||``; for an input canary ``d_t`` is
  the direction of the canary's clipped gradient at ``theta_t`` (computable by the adversary, who
  knows ``theta_t``). For full-batch DP-GD (``q = 1``) the adversary also knows every other
  example's clipped gradient at ``theta_t`` (it knows the dataset and the parameters) and subtracts
  their projection; under Poisson sampling the batch is secret, so nothing is subtracted. With the
  canary in, the observation is therefore ``b_t ||clip(g_t)||/C + (natural part) + N(0, sigma^2)``,
  ``b_t ~ Bernoulli(q)``; without it, ``(natural part) + N(0, sigma^2)``.

Batch sampling follows ``config.sampling`` (:class:`targets.training.BatchSampler`): under
``"shuffle"`` an input canary is one more row of the permutation and a gradient canary takes one
slot of it, so each joins exactly one step per epoch (instead of a coin per step).

**Replace-one pair on a crafted dataset** (``replace_pair=True``, with a gradient canary ``g``): the
worst case for shuffled batches (Chua et al. 2024, "How private are DP-SGD implementations?",
the ABLQ lower-bound pair; Annamalai et al. 2024 audit it in the same gradient form). The
adversary chooses the whole dataset — DP must hold for every pair of neighbouring datasets — so
every one of the ``n`` training records has per-example gradient ``-g``; the audited record (the
last row, present in both worlds) has ``+g`` with the canary in and ``-g`` without, when it looks
like every other record. The per-step observation adds the expected batch size ``q n`` (public)
to the projection: under shuffling the batch size is exactly ``q n``, so the observation is
``2 + N(0, sigma^2)`` at the one step per epoch that holds the audited record (canary in) and
``N(0, sigma^2)`` otherwise; under Poisson sampling the secret batch size adds Binomial noise.

Momentum must be 0 (the per-step observation would otherwise mix earlier noise in).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch.func import grad, vmap

from audit.errors import UserError
from targets.datasets import Dataset
from targets.models import Params, get_architecture, init_params
from targets.training import BatchSampler, TrainConfig, _clipped_sum, _example_loss

__all__ = ["AuditRuns", "train_audit_runs", "flatten", "unflatten", "param_shapes", "dead_coordinate"]


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
    """What the trainer returns.

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


def train_audit_runs(
    data: Dataset,
    train_index: np.ndarray,
    config: TrainConfig,
    seeds: list[int],
    included: np.ndarray,
    *,
    grad_canary: np.ndarray | None = None,
    input_canary: tuple[np.ndarray, int] | None = None,
    observe: str = "final",
    device: torch.device | str = "cpu",
    chunk: int = 512,
    replace_pair: bool = False,
) -> AuditRuns:
    """Train ``len(seeds)`` DP-SGD runs on ``data[train_index]``; run ``r`` adds the canary iff ``included[r]``.

    Exactly one of ``grad_canary`` (flattened vector of the parameter size, norm <= C expected)
    and ``input_canary`` (features of one example with ``data``'s shape, label) must be given;
    ``replace_pair`` (gradient canary only) trains on the crafted replace-one dataset of the module
    docstring instead of ``data[train_index]`` (whose size still sets ``n``).
    Runs are independent: each has its own generators seeded from its seed (initialisation,
    Poisson coins — the canary's coin is drawn after the data's — and noise), so chunking does not
    change results. See the module docstring for what ``observe="updates"`` records.
    """
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
    device = torch.device(device)
    finals, inits, obs, counts = [], [], [], []
    for start in range(0, len(seeds), chunk):
        part = slice(start, start + chunk)
        f, i, o, c = _train_chunk(data, np.asarray(train_index), config, seeds[part], included[part],
                                  grad_canary, input_canary, observe, device, replace_pair)
        finals.append(f)
        inits.append(i)
        obs.append(o)
        counts.append(c)
    step_obs = np.concatenate(obs) if observe == "updates" else None
    return AuditRuns(torch.cat(inits), torch.cat(finals), step_obs, np.concatenate(counts),
                     subtracted_known=config.sample_rate >= 1.0 or replace_pair)


def _logreg_per_example(params: Params, xb: torch.Tensor, yb: torch.Tensor) -> Params:
    """Per-example cross-entropy gradients of softmax regression in closed form, (R, B, ...):
    d/dW = (softmax - onehot) x^T, d/db = softmax - onehot. Equal to ``vmap(vmap(grad(loss)))`` of
    :func:`targets.training._example_loss` (tested) and several times faster on a CPU."""
    x = xb.flatten(2)
    logits = torch.einsum("rbd,rkd->rbk", x, params["weight"]) + params["bias"][:, None, :]
    err = torch.softmax(logits, dim=-1)
    err = err - torch.nn.functional.one_hot(yb, err.shape[-1]).to(err.dtype)
    return {"weight": torch.einsum("rbk,rbd->rbkd", err, x), "bias": err}


def _train_chunk(data, train_index, config, seeds, included, grad_canary, input_canary, observe, device,
                 replace_pair=False):
    arch = get_architecture(config.arch)
    shapes = param_shapes(config.arch, data)
    R = len(seeds)
    C = float(config.clip_norm)
    q = config.sample_rate
    full_batch = q >= 1.0
    torch_gens = [torch.Generator(device="cpu").manual_seed(int(s)) for s in seeds]
    noise_gens = [torch.Generator(device=device).manual_seed(int(s) + 1) for s in seeds]
    batch_rngs = [np.random.default_rng([int(s), 2]) for s in seeds]
    inits = [init_params(arch, data.shape, data.n_classes, g) for g in torch_gens]
    params = {k: torch.stack([p[k] for p in inits]).to(device) for k in inits[0]}
    initial = flatten(params).detach().cpu()

    X = torch.as_tensor(np.asarray(data.X[train_index]), device=device)
    y = torch.as_tensor(np.asarray(data.y[train_index]), device=device)
    n = X.shape[0]
    shuffled = config.sampling == "shuffle"
    if input_canary is not None:
        cx = torch.as_tensor(np.asarray(input_canary[0], dtype=np.float32).reshape(data.shape), device=device)
        X = torch.cat([X, cx[None]])
        y = torch.cat([y, torch.tensor([int(input_canary[1])], device=device, dtype=y.dtype)])
        members = [np.arange(n + 1) if inc else np.arange(n) for inc in included]
        gvec = None
    else:
        # replace pair: n rows, the last one audited; shuffle: the canary holds slot n of the permutation
        members = ([np.arange(n)] * R if replace_pair or not shuffled
                   else [np.arange(n + 1) if inc else np.arange(n) for inc in included])
        gvec = torch.as_tensor(np.asarray(grad_canary, dtype=np.float32), device=device)
        if gvec.shape != (sum(int(np.prod(s)) for s in shapes.values()),):
            raise ValueError("grad_canary must be a flattened vector with one entry per model parameter")
        g_dir = gvec / gvec.norm().clamp_min(1e-12)
        g_params = unflatten(gvec, shapes)
        if replace_pair:  # +1 for the audited record with the canary in, -1 for every other record
            sign_of_audited = torch.as_tensor(np.where(included, 1.0, -1.0), dtype=torch.float32, device=device)
    per_example = (_logreg_per_example if config.arch == "logreg"
                   else vmap(vmap(grad(_example_loss(arch)), in_dims=(None, 0, 0)), in_dims=(0, 0, 0)))
    canary_grad = vmap(grad(_example_loss(arch)), in_dims=(0, None, None))
    scale = config.lr / config.expected_batch_size
    std = config.noise_multiplier * C
    observations = []
    counts = np.zeros(R, dtype=np.int64)
    sampler = BatchSampler(members, batch_rngs, q, config.sampling)
    for _ in range(config.steps):
        index_np, weight_np = sampler.next()
        index = torch.as_tensor(index_np, device=device)
        weight = torch.as_tensor(weight_np, device=device)
        if replace_pair:
            audited = ((index == n - 1).float() * weight)
            counts += audited.sum(1).cpu().numpy().astype(np.int64) * included
            sign = -1.0 + audited * (sign_of_audited[:, None] + 1.0)
            grads = {k: sign.reshape(*sign.shape, *[1] * g.dim()) * g for k, g in g_params.items()}
            canary_mask = audited
        elif gvec is not None:
            if shuffled:  # the canary's slot n is in this batch: it joins, and the slot is no data row
                coins = (index_np == n).any(axis=1) & included
                weight = weight * (index != n).float()
                index = torch.where(index == n, torch.zeros_like(index), index)
            else:
                coins = np.array([rng.random() < q for rng in batch_rngs]) & included
            counts += coins
            grads = per_example(params, X[index], y[index])
            cw = torch.as_tensor(coins.astype(np.float32), device=device)
            grads = {k: torch.cat([g, g_params[k].expand(R, 1, *g.shape[2:])], dim=1) for k, g in grads.items()}
            weight = torch.cat([weight, cw[:, None]], dim=1)
            canary_mask = torch.zeros_like(weight)
            canary_mask[:, -1] = 1.0
        else:
            grads = per_example(params, X[index], y[index])
            canary_mask = (index == n).float() * weight
            counts += canary_mask.sum(1).cpu().numpy().astype(np.int64)
        summed = _clipped_sum(grads, weight, C)
        if observe == "updates":
            if gvec is not None:
                direction = g_dir.expand(R, -1)
            else:  # clipped canary gradient at theta_t, as the adversary computes it
                cg = flatten(canary_grad(params, X[n], y[n]))
                direction = cg / cg.norm(dim=1, keepdim=True).clamp_min(1e-12)
            known = None
            if replace_pair:  # every other record gives -g: the expected batch size q n of them is public
                known = -config.expected_batch_size * gvec.expand(R, -1)
            elif full_batch:  # the adversary knows every other example's clipped gradient at theta_t
                known = flatten(_clipped_sum(grads, weight * (1.0 - canary_mask), C))
        for name, value in summed.items():
            summed[name] = value + std * torch.stack([torch.randn(value.shape[1:], generator=g, device=device)
                                                      for g in noise_gens])
        if observe == "updates":
            total = flatten(summed)
            if known is not None:
                total = total - known
            observations.append(((total * direction).sum(1) / C).detach().cpu().numpy())
        with torch.no_grad():
            for name in params:
                params[name] = params[name] - scale * summed[name]
    step_obs = np.stack(observations, axis=1).astype(np.float64) if observe == "updates" else None
    return flatten(params).detach().cpu(), initial, step_obs, counts
