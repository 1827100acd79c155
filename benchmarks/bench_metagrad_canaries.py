"""Can canaries optimised by metagradient descent lift the flagship's released-model bound? (issue 42, item 1)

``run membership --target dpsgd_mnist`` certifies ε ≥ 1.124 at seed 0 with its 6,000 sparse canaries per side; 1.5
needs the canaries' losses separated at an AUC of about 0.68-0.69 where the sparse ones give 0.61-0.65
(``benchmarks/bench_one_run_separation.py``, ``benchmarks/bench_flagship_scores.py``). Boglioni, Liu, Ilyas and Wu
(ICLR 2026, arXiv 2507.15836) optimise the canaries' pixels by metagradient descent: through a surrogate training on
public data, the gradient of "the included canaries' final loss minus the excluded canaries' final loss". This
benchmark builds such canaries for the flagship at the flagship's budget (about a minute of this 2-core CPU for its
13,000 crafted inputs: the target's 6,000, the shadows' 6,000 and RMIA's population of 1,000) and plays the
flagship's own game with them (the same split, coins, DP-SGD training of the target, shadow and reference models,
attacks, guesses chosen on the calibration games and primary attack as ``run membership`` chooses them).

Two constructions, both from the game's public rows only (the shadow pool, which the target never trains on), the
audit's seed and fresh random inputs; never the target's records, coins or models. Both start from the flagship's
sparse canaries (:data:`audit.membership.game.SPARSE_PIXELS` pixels at full intensity, uniformly random labels, which
stay fixed; the very canaries the sparse game of the same seed plays, so the comparison is paired) and keep each
canary sparse: after every pixel step a canary keeps its ``SPARSE_PIXELS`` brightest pixels (dense perturbations add
faint pixels shared by every canary, and the canaries, two thirds of the target's training set, then pull each
other's losses: target loss AUC 0.59-0.63 without the projection in exploration at seed 0).

* ``unrolled`` (the paper's method): the surrogate is the recipe's DP-SGD continued for
  :attr:`Design.surrogate_steps` full-batch steps from a model trained by the recipe on the public rows, on
  :data:`SURROGATE_PUBLIC` public rows plus the canaries whose (design) coin is heads, in groups of
  :data:`GROUP` canaries, with the recipe's per-record pull ``lr q / B`` per step, its noise, and per-example clipping
  approximated by dividing each loss by its output factor ``||p - e_y||`` times the gradient-to-output-factor ratio
  measured on the public model (detached). The objective is differentiated through every unrolled step
  (reverse mode, ``torch.autograd.grad(create_graph=True)``). Antithetic coins: each group trains twice, on the heads
  and on the tails, from the same start and noise, and the objective sums, per canary, its loss in the training that
  included it minus its loss in the one that did not (the paper's objective with its two sides paired, which removes
  the canary's own direct term from the estimate's noise). A canary's pixels move by :attr:`Design.pixel_step` at
  their largest (its metagradient scaled by its maximum), clipped to [0, 1]. ``unrolled`` takes one metagradient
  step (about 20 s of an idle 2-core CPU for the 13,000 inputs), ``unrolled-4`` four (four times that, near the
  design budget of a 3-minute audit), ``unrolled-10`` and ``unrolled-20`` one step through 10 or 20 unrolled
  surrogate steps; each step's objective is measured on its own fresh coins and noise before it moves the pixels, so
  the steps after the first show whether the previous one gained on a new draw.
* ``linearised``: the same objective to first order in one canary's updates (the metagradient of the training's
  linearisation around a surrogate trajectory): a canary included at step ``t`` lowers its final loss by
  ``lr/B <grad l(theta_T), clip(grad l(theta_t))>``, and DP noise moves that loss by ``lr/B sigma C sqrt(T)
  ||grad l(theta_T)||``, so the separation per inclusion is ``min(||grad l(theta_t)||, C) cos(grad l(theta_t), grad
  l(theta_T))``. The objective is its sum over :attr:`Design.checkpoints` checkpoints of one surrogate training by the
  recipe (public rows plus :data:`FRESH_CANARIES` fresh sparse canaries, half included: the audited training is
  two-thirds canaries), its exact per-example gradient inner products formed layer by layer (a linear layer's from
  its input and backprop signal, a convolution's from its materialised per-example gradient), differentiable in the
  canary's pixels; :attr:`Design.pixel_step` as above, :attr:`Design.meta_steps` steps. The objective is also
  measured, before and after, on a held-out surrogate trajectory (the same rows, another seed): how much of the gain
  is the design's rather than that trajectory's.

Per design and seed: the design's time, the surrogate objective before and after, the target's loss AUC, in/out loss
means and spread, every attack's AUC and bound at the guesses chosen on its calibration games, the primary attack
(highest calibration mean, as the audit picks it) and its bound. The sparse and gradient-max baselines at the same
seeds are read from ``benchmarks/results_flagship_canaries.json`` (``run membership`` end to end) and copied into the
output with their date; ``--kinds sparse gradmax`` plays them here too.

Usage: ``python benchmarks/bench_metagrad_canaries.py [--kinds unrolled unrolled-4 linearised] [--seeds 0 1 2] [--json
benchmarks/results_metagrad_canaries.json] [--add]`` (1 to 6 minutes per design and seed on a 2-core CPU, with the
load; ``--add`` keeps the file's other rows). Sources:
docs/references.md, "Canaries and threat models" and "One-run auditing".
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.metrics import roc_auc_score

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from attacks.membership import run_attacks  # noqa: E402
from attacks.names import expand_attacks  # noqa: E402
from audit.io import write_json  # noqa: E402
from audit.membership.bounds import choose_guesses, one_run  # noqa: E402
from audit.membership.crafted import canary_crafter  # noqa: E402
from audit.membership.game import SPARSE_PIXELS, build_canary_game, synthetic_canaries  # noqa: E402
from audit.membership.options import MembershipOptions  # noqa: E402
from audit.membership.runner import GAME_SIZES, attack_inputs, train_game_models  # noqa: E402
from audit.membership.subjects import membership_subject  # noqa: E402
from audit.run_context import RunContext, host_info, utc_now  # noqa: E402
from targets.datasets import Dataset  # noqa: E402
from targets.dpsgd_step import StepHook, StepOptions, TrainConfig  # noqa: E402
from targets.example_gradients import gradient_norms  # noqa: E402
from targets.ghost_clipping import stacked_forward, unfold_patches  # noqa: E402
from targets.models import Linear, Params, get_architecture  # noqa: E402
from targets.registry import TARGETS  # noqa: E402
from targets.training import train_models  # noqa: E402

DELTA, CONFIDENCE = 1e-5, 0.95
TARGET = "dpsgd_mnist"
#: Canaries per unrolled surrogate (the target's game: 6,000 canaries, half included, beside its natural records).
GROUP = 2000
#: Public rows in each unrolled surrogate.
SURROGATE_PUBLIC = 300
#: Public rows and canaries (each) the unrolled surrogate's clipping ratio is measured on.
RATIO_SAMPLE = 250
#: Fresh sparse canaries (half included) beside the public rows in the linearised design's surrogate trajectory.
FRESH_CANARIES = 6000
#: Canaries whose linearised objective is evaluated at once.
CHUNK = 1000
#: The game's route for crafted canaries: ``build_canary_game`` sends a crafted kind to the crafter it is given
#: (here this benchmark's designs); the kind only names that route in the game's summary.
CRAFTED_ROUTE = "gradmax"
BASELINES = ROOT / "benchmarks" / "results_flagship_canaries.json"


@dataclass(frozen=True)
class Design:
    """One design's effort: metagradient steps, unrolled surrogate steps, surrogate checkpoints (linearised) and how
    far one step moves a canary's largest pixel."""

    meta_steps: int
    pixel_step: float
    surrogate_steps: int = 3
    checkpoints: int = 3


def sparse_projection(X: torch.Tensor) -> torch.Tensor:
    """Each canary with only its :data:`SPARSE_PIXELS` brightest pixels kept (the others set to 0; pixels tied with
    the last one kept stay too)."""
    flat = X.flatten(1)
    threshold = flat.topk(SPARSE_PIXELS, dim=1).values[:, -1:]
    return (flat * (flat >= threshold)).view_as(X)


def pixel_step(X: torch.Tensor, grad: torch.Tensor, step: float) -> torch.Tensor:
    """``X`` moved along ``grad`` (ascent), each canary's largest pixel by ``step``, clipped to [0, 1] and projected
    back to :data:`SPARSE_PIXELS` pixels."""
    scale = grad.flatten(1).abs().amax(1).clamp_min(1e-12).view(-1, *([1] * (X.dim() - 1)))
    return sparse_projection((X + step * grad / scale).clamp(0.0, 1.0))


class Checkpoints(StepHook):
    """Keeps the parameters of a one-model training at the steps ``at`` (before their update)."""

    def __init__(self, at: list[int]) -> None:
        self.at, self.kept = set(at), {}

    def observe(self, t: int, batch, noisy_sum: Params, params: Params) -> None:
        if t in self.at:
            self.kept[t] = {k: v[0].detach().clone() for k, v in params.items()}


def trajectory(data: Dataset, rows: np.ndarray, config: TrainConfig, seed: int, at: list[int]) -> list[Params]:
    """Parameters at the steps ``at`` and at the end of one training by ``config`` on ``data``'s ``rows``."""
    mask = np.zeros(len(data), dtype=bool)
    mask[rows] = True
    hook = Checkpoints(at)
    final = train_models(data, mask[None], config, [seed], progress=False, options=StepOptions(hook=hook))
    return [hook.kept[t] for t in sorted(hook.kept)] + [{k: v[0] for k, v in final.items()}]


# --- unrolled: the paper's objective through an unrolled surrogate -------------------------------------------------

def output_factor(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``||softmax(logits) - e_y||`` per example (the gradient's output factor)."""
    p = logits.softmax(-1)
    return (p - F.one_hot(y, p.shape[-1]).to(p.dtype)).norm(dim=-1)


def unrolled_training(config: TrainConfig, start: Params, X: torch.Tensor, y: torch.Tensor, noise: list[Params],
                      ratio: float) -> Params:
    """The surrogate's final parameters after ``len(noise)`` full-batch steps from ``start``, differentiable in
    ``X``: each record pulled by ``lr q / B`` times its approximately clipped gradient per step, plus the noise."""
    arch = get_architecture(config.arch)
    pull = config.lr * config.sample_rate / config.expected_batch_size
    params = {k: v.clone().requires_grad_(True) for k, v in start.items()}
    for eps in noise:
        logits = arch.forward(params, X)
        with torch.no_grad():
            clip = torch.clamp(config.clip_norm / (ratio * output_factor(logits, y) + 1e-12), max=1.0)
        loss = (F.cross_entropy(logits, y, reduction="none") * clip).sum()
        grads = torch.autograd.grad(loss, list(params.values()), create_graph=True)
        params = {k: v - pull * g - eps[k] for (k, v), g in zip(params.items(), grads, strict=True)}
    return params


def unrolled_group(config: TrainConfig, design: Design, public: tuple[torch.Tensor, torch.Tensor],
                   canaries: tuple[torch.Tensor, torch.Tensor], start: Params, ratio: float,
                   gen: torch.Generator) -> tuple[torch.Tensor, list[float]]:
    """One group's canaries after ``design.meta_steps`` metagradient steps (antithetic coins), and the objective
    (mean over canaries of out-loss minus in-loss) at each step."""
    arch = get_architecture(config.arch)
    (Xp, yp), (z, yc) = public, canaries
    std = config.lr / config.expected_batch_size * config.noise_multiplier * config.clip_norm
    history = []
    for _ in range(design.meta_steps):
        coins = torch.rand(len(z), generator=gen) < 0.5
        noise = [{k: torch.randn(v.shape, generator=gen) * std for k, v in start.items()}
                 for _ in range(design.surrogate_steps)]
        zz = z.clone().requires_grad_(True)
        gap = 0.0
        for side in (coins, ~coins):  # every canary is in one of the two surrogates and out of the other
            final = unrolled_training(config, start, torch.cat([Xp, zz[side]]), torch.cat([yp, yc[side]]), noise,
                                      ratio)
            loss = F.cross_entropy(arch.forward(final, zz), yc, reduction="none")
            gap = gap + (loss * torch.where(side, -1.0, 1.0)).sum()
        (grad,) = torch.autograd.grad(gap, zz)
        history.append(float(gap.detach()) / len(z))
        z = pixel_step(z, grad, design.pixel_step)
    return z, history


def unrolled_design(config: TrainConfig, design: Design, public: Dataset, X0: np.ndarray, y: np.ndarray,
                    seed: int) -> tuple[np.ndarray, dict]:
    """The ``unrolled`` canaries (module docstring) from the initial ones ``(X0, y)`` and the public records."""
    [start] = trajectory(public, np.arange(len(public)), config, seed, [])
    Xp = torch.as_tensor(public.X[:SURROGATE_PUBLIC])
    yp = torch.as_tensor(public.y[:SURROGATE_PUBLIC]).long()
    sample = np.random.default_rng([seed, 1]).choice(len(X0), size=min(len(X0), RATIO_SAMPLE), replace=False)
    norms = gradient_norms(config.arch, {k: v[None] for k, v in start.items()},
                           np.concatenate([public.X[:RATIO_SAMPLE], X0[sample]]),
                           np.concatenate([public.y[:RATIO_SAMPLE], y[sample]]))
    with torch.no_grad():
        Xs = torch.as_tensor(np.concatenate([public.X[:RATIO_SAMPLE], X0[sample]]))
        ys = torch.as_tensor(np.concatenate([public.y[:RATIO_SAMPLE], y[sample]])).long()
        factor = output_factor(get_architecture(config.arch).forward(start, Xs), ys).numpy()
    ratio = float(np.median(norms / np.maximum(factor, 1e-6)))
    gen = torch.Generator().manual_seed(seed)
    out, history = [], []
    for first in range(0, len(X0), GROUP):
        part = slice(first, first + GROUP)
        z, h = unrolled_group(config, design, (Xp, yp), (torch.as_tensor(X0[part]), torch.as_tensor(y[part]).long()),
                              start, ratio, gen)
        out.append(z.numpy())
        history.append(h)
    return np.concatenate(out), {"clip_ratio": ratio, "objective_per_group_and_step": history}


# --- linearised: the objective to first order, per canary ---------------------------------------------------------

def gradient_pieces(arch_name: str, params: Params, x: torch.Tensor, y: torch.Tensor) -> list[tuple]:
    """Per-example gradient pieces at ``params``, differentiable in ``x``: per layer ("linear", input, backprop
    signal) or ("conv", materialised weight gradient, bias gradient)."""
    layers = get_architecture(arch_name).layers
    stacked = {k: v[None] for k, v in params.items()}
    taps = []
    logits = stacked_forward(layers, stacked, x[None], taps)
    signals = torch.autograd.grad(F.cross_entropy(logits[0], y, reduction="sum"), [t.z for t in taps],
                                  create_graph=True)
    pieces = []
    for tap, g in zip(taps, signals, strict=True):
        if isinstance(tap.layer, Linear):
            pieces.append(("linear", tap.a[0], g[0]))
        else:
            patches = unfold_patches(tap.layer, tap.a, stacked[tap.layer.weight].shape[-1])[0]  # (B, T, D)
            signal = g[0].flatten(2)  # (B, O, T)
            pieces.append(("conv", torch.bmm(signal, patches).flatten(1), signal.sum(-1)))
    return pieces


def inner(a: list[tuple], b: list[tuple]) -> torch.Tensor:
    """Per-example inner products of two sets of gradient pieces (:func:`gradient_pieces`)."""
    total = 0.0
    for (kind, u1, g1), (_, u2, g2) in zip(a, b, strict=True):
        bias = (g1 * g2).sum(-1)
        total = total + ((u1 * u2).sum(-1) * bias if kind == "linear" else (u1 * u2).sum(-1)) + bias
    return total


def alignment(arch_name: str, checkpoints: list[Params], x: torch.Tensor, y: torch.Tensor,
              clip_norm: float) -> torch.Tensor:
    """Per canary, ``sum_t min(||g_t||, C) cos(g_t, g_T)`` over the checkpoints but the last (``T``)."""
    pieces = [gradient_pieces(arch_name, p, x, y) for p in checkpoints]
    final = pieces[-1]
    final_norm = inner(final, final).clamp_min(1e-12).sqrt()
    total = 0.0
    for piece in pieces[:-1]:
        norm = inner(piece, piece).clamp_min(1e-12).sqrt()
        total = total + norm.clamp(max=clip_norm) * inner(piece, final) / (norm * final_norm)
    return total


def mean_alignment(arch_name: str, checkpoints: list[Params], X: torch.Tensor, y: torch.Tensor, clip_norm: float,
                   step: float = 0.0) -> tuple[float, torch.Tensor]:
    """The mean :func:`alignment` of the canaries ``(X, y)`` and, with ``step`` > 0, the canaries after one pixel step
    up its gradient (:func:`pixel_step`), :data:`CHUNK` at a time."""
    values, moved = [], X.clone()
    for first in range(0, len(X), CHUNK):
        x = X[first:first + CHUNK].clone().requires_grad_(step > 0)
        with torch.enable_grad():  # the per-example gradients need autograd even when X does not move
            value = alignment(arch_name, checkpoints, x, y[first:first + CHUNK], clip_norm)
        values.append(value.detach())
        if step > 0:
            (grad,) = torch.autograd.grad(value.sum(), x)
            moved[first:first + CHUNK] = pixel_step(X[first:first + CHUNK], grad, step)
    return float(torch.cat(values).mean()), moved


def linearised_design(config: TrainConfig, design: Design, public: Dataset, X0: np.ndarray, y: np.ndarray,
                      seed: int) -> tuple[np.ndarray, dict]:
    """The ``linearised`` canaries (module docstring) from the initial ones ``(X0, y)`` and the public records, and
    the objective at each step and, before and after, on a held-out surrogate trajectory (another seed)."""
    rng = np.random.default_rng([seed, 2])
    fX, fy = synthetic_canaries("sparse", FRESH_CANARIES, public.shape, public.n_classes, rng)
    data = Dataset(np.concatenate([public.X, fX]), np.concatenate([public.y, fy]).astype(public.y.dtype), public.name,
                   public.n_classes, public.shape, public.source)
    rows = np.concatenate([np.arange(len(public)), len(public) + np.flatnonzero(rng.random(FRESH_CANARIES) < 0.5)])
    at = [config.steps * (i + 1) // (design.checkpoints + 1) for i in range(design.checkpoints)]
    checkpoints = trajectory(data, rows, config, seed, at)
    X, labels = torch.as_tensor(X0).clone(), torch.as_tensor(y).long()
    history = []
    for _ in range(design.meta_steps):
        value, X = mean_alignment(config.arch, checkpoints, X, labels, config.clip_norm, design.pixel_step)
        history.append(value)
    history.append(mean_alignment(config.arch, checkpoints, X, labels, config.clip_norm)[0])
    held_out = trajectory(data, rows, config, seed + 1, at)
    transfer = [mean_alignment(config.arch, held_out, Z, labels, config.clip_norm)[0]
                for Z in (torch.as_tensor(X0), X)]
    return X.numpy(), {"checkpoints_at": at, "objective_per_step": history,
                       "objective_held_out_trajectory_before_after": transfer}


#: The designs measured: (construction, effort). ``unrolled`` at one metagradient step is about 20 s of an idle 2-core
#: CPU for the flagship's 13,000 inputs; ``unrolled-4`` (four steps) four times that (163-255 s at load 3-5);
#: ``unrolled-10`` and ``unrolled-20`` one step through a surrogate of 10 or 20 unrolled steps instead of 3 (about 40 s
#: and 80 s idle).
DESIGNS: dict[str, tuple[Callable, Design]] = {
    "unrolled": (unrolled_design, Design(meta_steps=1, pixel_step=0.5)),
    "unrolled-4": (unrolled_design, Design(meta_steps=4, pixel_step=0.25)),
    "unrolled-10": (unrolled_design, Design(meta_steps=1, pixel_step=0.5, surrogate_steps=10)),
    "unrolled-20": (unrolled_design, Design(meta_steps=1, pixel_step=0.5, surrogate_steps=20)),
    "linearised": (linearised_design, Design(meta_steps=4, pixel_step=0.3)),
}


def design_crafter(kind: str, config: TrainConfig, subject, seed: int, log: dict):
    """The game's crafter of ``kind`` canaries: sparse initial canaries from the game's stream, designed on the first
    ``n_train`` public rows; each call's time and objective go to ``log``."""

    def craft(public: np.ndarray, count: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        X0, y = synthetic_canaries("sparse", count, subject.data.shape, subject.data.n_classes, rng)
        rows = np.asarray(public)[:subject.n_train]
        data = subject.data
        public_data = Dataset(data.X[rows], data.y[rows], data.name, data.n_classes, data.shape, data.source)
        design_seed = int(np.random.SeedSequence([seed, 12, count]).generate_state(1)[0])
        t0 = time.perf_counter()
        construction, effort = DESIGNS[kind]
        X, info = construction(config, effort, public_data, X0, y, design_seed)
        log[str(count)] = info | {"design_s": time.perf_counter() - t0, "mean_pixel": float(X.mean()),
                                  "initial_mean_pixel": float(X0.mean())}
        return X.astype(np.float32), y

    return craft


def play(kind: str, seed: int, out: str) -> dict:
    """The flagship's game at ``seed`` with ``kind`` canaries: the target's loss statistics, each attack's AUC and
    bound at its chosen guesses, and the primary attack's bound."""
    opts = MembershipOptions(target=TARGET, canary="sparse", seed=seed, quiet=True, out=out)
    m, shadows, references = GAME_SIZES["default"]
    subject = membership_subject(opts, m)
    recipe = TARGETS[TARGET]
    config = recipe.train_config(recipe.noise_multiplier())
    names = expand_attacks(("all",))
    log: dict = {}
    with RunContext(out, "membership", subject.name, seed=seed, quiet=True) as ctx:
        t0 = time.perf_counter()
        if kind == "sparse":
            route, crafter = "sparse", None
        elif kind == "gradmax":
            route, crafter = "gradmax", canary_crafter(subject, ctx.paths, seed, ctx.say)
        else:
            route, crafter = CRAFTED_ROUTE, design_crafter(kind, config, subject, seed, log)
        game = build_canary_game(subject.data, subject.n_train, m, shadows, route, seed, references=references,
                                 crafter=crafter)
        canaries_s = time.perf_counter() - t0
        seeds = np.random.SeedSequence(seed).generate_state(1 + shadows + references).tolist()
        models = train_game_models(ctx, subject, game, seeds, shadows, references)
        inputs, model_info = attack_inputs(subject, game, models, names)
        scored = run_attacks(names, inputs, "auto", None)
    member = game.target_in
    attacks = {}
    for name, sc in scored.items():
        chosen = choose_guesses(sc.calibration, sc.calibration_in, DELTA, CONFIDENCE)
        attacks[name] = {"auc": float(roc_auc_score(member, sc.target)), "chosen": asdict(chosen),
                         "epsilon": one_run(chosen, sc.target, member, DELTA, CONFIDENCE).epsilon}
    primary = max(attacks, key=lambda n: attacks[n]["chosen"]["shadow_mean_epsilon"])
    loss = -inputs.target_lp[np.arange(m), inputs.labels]
    out_loss, in_loss = loss[~member], loss[member]
    return {"kind": kind, "seed": seed, "epsilon_lb": attacks[primary]["epsilon"], "primary_attack": primary,
            "loss_auc": float(roc_auc_score(member, -loss)), "loss_out_mean": float(out_loss.mean()),
            "loss_out_sd": float(out_loss.std()), "loss_in_mean": float(in_loss.mean()),
            "loss_in_sd": float(in_loss.std()),
            "separation": float((out_loss.mean() - in_loss.mean()) / out_loss.std()),
            "test_accuracy": model_info["test_accuracy"], "canaries_s": canaries_s, "design": log,
            "attacks": attacks}


def baselines(seeds: list[int]) -> dict:
    """The sparse and gradient-max rows of :data:`BASELINES` at ``seeds`` (``run membership`` end to end)."""
    if not BASELINES.exists():
        return {}
    stored = json.loads(BASELINES.read_text())
    rows = [{k: r[k] for k in ("kind", "seed", "epsilon_lb", "attack", "auc", "wall_s", "cpu_s")}
            for r in stored["rows"] if r["seed"] in seeds]
    return {"source": str(BASELINES.relative_to(ROOT)), "when": stored.get("when"), "host": stored.get("host"),
            "rows": rows}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--kinds", nargs="+", default=list(DESIGNS),
                   choices=["sparse", "gradmax", *DESIGNS])
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--json", default=str(ROOT / "benchmarks" / "results_metagrad_canaries.json"))
    p.add_argument("--add", action="store_true",
                   help="keep the rows of the existing --json file (those of the kinds and seeds played now replaced)")
    args = p.parse_args(argv)
    kept = []
    if args.add and Path(args.json).exists():
        kept = [r for r in json.loads(Path(args.json).read_text())["rows"]
                if not (r["kind"] in args.kinds and r["seed"] in args.seeds)]
    rows = []
    with tempfile.TemporaryDirectory() as out:
        for kind in args.kinds:
            for seed in args.seeds:
                load, t0 = os.getloadavg()[0], time.perf_counter()
                rows.append(play(kind, seed, out) | {"load_1min_before": load, "when": utc_now()})
                r = rows[-1] | {"wall_s": time.perf_counter() - t0}
                rows[-1] = r
                print(f"{kind:10s} seed {seed}: epsilon >= {r['epsilon_lb']:.3f} ({r['primary_attack']}), loss AUC "
                      f"{r['loss_auc']:.3f}, canaries {r['canaries_s']:.0f} s, whole {r['wall_s']:.0f} s at load "
                      f"{load:.1f}", flush=True)
    result = {"benchmark": "bench_metagrad_canaries", "when": utc_now(), "host": host_info(), "target": TARGET,
              "designs": {k: {"construction": f.__name__} | asdict(d) for k, (f, d) in DESIGNS.items()},
              "group": GROUP, "surrogate_public": SURROGATE_PUBLIC, "fresh_canaries": FRESH_CANARIES,
              "rows": kept + rows,
              "baselines": baselines(sorted({r["seed"] for r in kept + rows})),
              "separation_formula": "(mean out loss - mean in loss) / sd out loss"}
    write_json(Path(args.json), result)
    return result


if __name__ == "__main__":
    main()
