"""Hand-written DP-SGD loops with the audit hooks, each with one real mistake, beside its twin.

The loop (:func:`train`) is softmax regression (a weight matrix and a bias, 650 parameters) on the
first 300 rows of scikit-learn's digits, DP-SGD as Abadi et al. 2016, Alg. 1 writes it: sample each
record by its own coin with rate ``q``, clip each example's gradient to ``C``, add Gaussian noise of
standard deviation ``sigma C`` to the sum, divide by the expected batch size ``q n``. :class:`Loop`
names every place where real code goes wrong; each mistake below sets one of them, and its twin
(``NAME_twin``) is the same loop with that place right. Every plugin claims (2, 1e-5)-DP; the
noise multiplier a correct loop needs is :func:`sigma_for` (our PLD accountant). Sources of each
mistake: docs/reference/bug-zoo.md and docs/references.md ("Bug zoo").
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import torch

from audit.theory.dpsgd import calibrate_noise_multiplier
from targets.audit_hooks import add_canary, report_update
from targets.datasets import load_digits

EPS, DELTA, Q, STEPS, C, N, LR = 2.0, 1e-5, 0.1, 20, 1.0, 300, 2.0
EPOCHS = int(round(STEPS * Q))


@functools.lru_cache(maxsize=16)
def sigma_for(q: float = Q, steps: int = STEPS, delta: float = DELTA) -> float:
    """The noise multiplier DP-SGD at rate ``q`` over ``steps`` steps needs for (EPS, ``delta``)-DP (PLD)."""
    return float(calibrate_noise_multiplier(EPS, delta, q, steps))


@dataclass(frozen=True)
class Loop:
    """The DP-SGD one hand-written loop runs; the defaults are the correct loop.

    ``rate``: the Poisson rate it samples with; ``declared_rate``: the rate it tells ``add_canary``
    (and its accounting); ``sampling``: "poisson", "shuffled" (fixed-size batches of a new
    permutation each epoch) or "shuffled-once" (one permutation for every epoch); ``clipping``:
    "per-example" or "none"; ``declared_clip``: the clip norm it tells ``add_canary`` and scales the
    noise by (None: ``clip``); ``noise``: "gaussian", "laplace", "uniform" (both of the Gaussian's
    variance), "reused" (drawn at the first step, added again at every step), "constant-seed" (a
    generator seeded with 0, whatever the training's seed) or "cross-tensor" (the bias given the weight's
    first noise values at every step); ``scale``: the noise's standard deviation, "sigma*C", "sigma" (the
    clip norm forgotten) or "sigma*C/qn" (scaled for the mean gradient, added to the sum); ``unnoised``:
    parameter tensors left without noise; ``unnoised_column``: an input column of the weight left without
    noise (None: none); ``noiseless_steps``: warm-up steps without noise.
    """

    sigma: float
    rate: float = Q
    declared_rate: float = Q
    steps: int = STEPS
    clip: float = C
    declared_clip: float | None = None
    sampling: str = "poisson"
    clipping: str = "per-example"
    noise: str = "gaussian"
    scale: str = "sigma*C"
    unnoised: tuple[str, ...] = ()
    unnoised_column: int | None = None
    noiseless_steps: int = 0


def _batches(loop: Loop, n: int, gen: torch.Generator) -> list[torch.Tensor]:
    """The record indices of every step."""
    if loop.sampling == "poisson":
        return [torch.nonzero(torch.rand(n, generator=gen) < loop.rate).reshape(-1) for _ in range(loop.steps)]
    size, per_epoch = int(round(loop.rate * n)), int(round(1 / loop.rate))
    order = torch.randperm(n, generator=gen)
    batches = []
    for t in range(loop.steps):
        if loop.sampling == "shuffled" and t % per_epoch == 0 and t > 0:
            order = torch.randperm(n, generator=gen)         # a new permutation each epoch
        start = (t % per_epoch) * size
        batches.append(order[start:start + size])
    return batches


def _clipped_sum(loop: Loop, W: torch.Tensor, b: torch.Tensor, x: torch.Tensor, t: torch.Tensor) -> list:
    """Sum over the batch of each example's gradient (weight, bias), clipped to C unless the loop forgets."""
    err = torch.softmax(x @ W.T + b, 1) - torch.nn.functional.one_hot(t, W.shape[0])
    gW, gb = err[:, :, None] * x[:, None, :], err
    if loop.clipping == "per-example":
        norms = torch.sqrt(gW.flatten(1).pow(2).sum(1) + gb.pow(2).sum(1))
        factor = (loop.clip / (norms + 1e-12)).clamp(max=1.0)
        gW, gb = gW * factor[:, None, None], gb * factor[:, None]
    return [gW.sum(0), gb.sum(0)]


def _draw(loop: Loop, shape: torch.Size, std: float, gen: torch.Generator) -> torch.Tensor:
    """One noise tensor of standard deviation ``std`` from the loop's distribution."""
    if loop.noise == "laplace":                                # Laplace(b), variance 2 b^2
        u = torch.rand(shape, generator=gen) - 0.5
        return -std / math.sqrt(2) * torch.sign(u) * torch.log1p(-2 * u.abs())
    if loop.noise == "uniform":                                # U(-a, a), variance a^2 / 3
        return std * math.sqrt(3) * (2 * torch.rand(shape, generator=gen) - 1)
    return std * torch.randn(shape, generator=gen)


def train(X: np.ndarray, y: np.ndarray, seed: int, loop: Loop):
    """DP-SGD as ``loop`` says (class docstring); returns ``predict_proba``."""
    gen = torch.manual_seed(seed)
    noise_gen = torch.Generator().manual_seed(0) if loop.noise == "constant-seed" else gen
    X, y = torch.as_tensor(X, dtype=torch.float32), torch.as_tensor(y)
    W, b = torch.zeros(10, X.shape[1]), torch.zeros(10)
    clip = loop.clip if loop.declared_clip is None else loop.declared_clip
    std = {"sigma*C": loop.sigma * clip, "sigma": loop.sigma,
           "sigma*C/qn": loop.sigma * clip / (loop.declared_rate * len(X))}[loop.scale]
    first_noise = None
    for step, batch in enumerate(_batches(loop, len(X), gen)):
        grad_sum = _clipped_sum(loop, W, b, X[batch], y[batch])
        add_canary(grad_sum, clip_norm=clip, sample_rate=loop.declared_rate, batch=batch)
        noise = [_draw(loop, g.shape, std, noise_gen) for g in grad_sum]
        if loop.noise == "reused":
            first_noise = first_noise or noise
            noise = first_noise
        if loop.noise == "cross-tensor":                       # the bias reuses the weight's first draws
            noise[1] = noise[0].reshape(-1)[:noise[1].numel()].clone().reshape(noise[1].shape)
        if loop.unnoised_column is not None:                   # one input column of the weight skipped
            noise[0][:, loop.unnoised_column] = 0.0
        for name, z in zip(("weight", "bias"), noise, strict=True):
            if name in loop.unnoised or step < loop.noiseless_steps:
                z.zero_()
        noisy = [g + z for g, z in zip(grad_sum, noise, strict=True)]
        report_update(noisy)
        W = W - LR * noisy[0] / (loop.declared_rate * len(X))
        b = b - LR * noisy[1] / (loop.declared_rate * len(X))
    return lambda Z: torch.softmax(torch.as_tensor(Z, dtype=torch.float32) @ W.T + b, 1).numpy()


def plugin(name: str, loop: Loop, description: str, rows: int = N) -> dict:
    """The trainer plugin of ``loop``: the first ``rows`` digits, claiming (EPS, DELTA)."""
    digits = load_digits()
    return {"kind": "trainer", "name": f"zoo_{name}", "dataset": (digits.X[:rows], digits.y[:rows]),
            "train": lambda X, y, seed: train(X, y, seed, loop), "description": description,
            "claim": {"epsilon": EPS, "delta": DELTA}}


def correct() -> dict:
    """The correct loop every twin below varies."""
    return plugin("correct", Loop(sigma_for()), "correct hooked DP-SGD loop")


# --- sampling ---------------------------------------------------------------------------------

def declared_rate_too_small() -> dict:
    """Samples at 0.3, tells add_canary (and its accounting) 0.1."""
    return plugin("declared_rate_too_small", Loop(sigma_for(), rate=0.3),
                  "samples each record with rate 0.3, declares and accounts 0.1")


def declared_rate_too_small_twin() -> dict:
    return plugin("declared_rate_too_small_twin", Loop(sigma_for(0.3), rate=0.3, declared_rate=0.3),
                  "samples with rate 0.3, declares and accounts 0.3")


def shuffled_batches() -> dict:
    """Fixed-size batches of a permutation drawn each epoch, accounted as Poisson sampling."""
    return plugin("shuffled_batches", Loop(sigma_for(), sampling="shuffled"),
                  "fixed-size shuffled batches accounted as Poisson sampling")


def shuffled_batches_twin() -> dict:
    return plugin("shuffled_batches_twin", Loop(sigma_for()), "Poisson sampling, accounted as Poisson")


def shuffled_once() -> dict:
    """One permutation drawn before training, its batches replayed every epoch, accounted as Poisson."""
    return plugin("shuffled_once", Loop(sigma_for(), sampling="shuffled-once"),
                  "one permutation replayed every epoch, accounted as Poisson sampling")


def shuffled_once_twin() -> dict:
    return plugin("shuffled_once_twin", Loop(sigma_for()), "Poisson sampling, accounted as Poisson")


# --- clipping ---------------------------------------------------------------------------------

def no_clipping() -> dict:
    """The per-example clipping left out (or done after the noise): the raw gradient sum gets the noise."""
    return plugin("no_clipping", Loop(sigma_for(), clipping="none"), "no per-example clipping")


def no_clipping_twin() -> dict:
    return plugin("no_clipping_twin", Loop(sigma_for()), "per-example clipping to C")


def clip_norm_mismatch() -> dict:
    """Clips each example to 4 while the noise and the accounting use the declared clip norm 1: the
    sensitivity is larger than declared."""
    return plugin("clip_norm_mismatch", Loop(sigma_for(), clip=4.0, declared_clip=1.0),
                  "clips to 4, declares (and scales the noise by) clip norm 1")


def clip_norm_mismatch_twin() -> dict:
    return plugin("clip_norm_mismatch_twin", Loop(sigma_for(), clip=1.0, declared_clip=1.0),
                  "clips to the declared clip norm 1")


# --- noise --------------------------------------------------------------------------------------

def noise_without_clip_norm() -> dict:
    """Noise of standard deviation sigma where sigma x C is needed (C = 5)."""
    return plugin("noise_without_clip_norm", Loop(sigma_for(), clip=5.0, scale="sigma"),
                  "clip norm 5, noise of standard deviation sigma instead of sigma x C")


def noise_without_clip_norm_twin() -> dict:
    return plugin("noise_without_clip_norm_twin", Loop(sigma_for(), clip=5.0), "clip norm 5, noise sigma x C")


def noise_for_the_mean() -> dict:
    """Noise scaled for the mean gradient (sigma C / qn) added to the sum: off by the batch size."""
    return plugin("noise_for_the_mean", Loop(sigma_for(), scale="sigma*C/qn"),
                  "noise scaled for the mean gradient, added to the sum")


def noise_for_the_mean_twin() -> dict:
    return plugin("noise_for_the_mean_twin", Loop(sigma_for()), "noise sigma x C added to the sum")


def bias_without_noise() -> dict:
    """No noise on the bias (10 of 650 coordinates)."""
    return plugin("bias_without_noise", Loop(sigma_for(), unnoised=("bias",)), "the bias gets no noise")


def bias_without_noise_twin() -> dict:
    return plugin("bias_without_noise_twin", Loop(sigma_for()), "every parameter tensor gets noise")


def noise_reused() -> dict:
    """The noise drawn once, at the first step, and added again at every step."""
    return plugin("noise_reused", Loop(sigma_for(), noise="reused"), "one noise draw reused at every step")


def noise_reused_twin() -> dict:
    return plugin("noise_reused_twin", Loop(sigma_for()), "fresh noise at every step")


def cross_tensor_noise() -> dict:
    """The bias's noise is the weight's first 10 noise values at every step (noise reused across tensors)."""
    return plugin("cross_tensor_noise", Loop(sigma_for(), noise="cross-tensor"),
                  "the bias gets the weight tensor's first noise values")


def cross_tensor_noise_twin() -> dict:
    return plugin("cross_tensor_noise_twin", Loop(sigma_for()), "each tensor gets its own noise")


def partly_noised() -> dict:
    """One input column of the weight (10 of 650 coordinates) never gets noise."""
    return plugin("partly_noised", Loop(sigma_for(), unnoised_column=3), "input column 3 of the weight gets no noise")


def partly_noised_twin() -> dict:
    return plugin("partly_noised_twin", Loop(sigma_for()), "every coordinate of the weight gets noise")


def noise_constant_seed() -> dict:
    """The noise from a generator seeded with 0: the same noise whatever the training's seed."""
    return plugin("noise_constant_seed", Loop(sigma_for(), noise="constant-seed"),
                  "noise from a generator seeded with a constant")


def noise_constant_seed_twin() -> dict:
    return plugin("noise_constant_seed_twin", Loop(sigma_for()), "noise from the training's seeded generator")


def laplace_noise() -> dict:
    """Laplace noise of the Gaussian's variance, accounted as Gaussian."""
    return plugin("laplace_noise", Loop(sigma_for(), noise="laplace"), "Laplace noise accounted as Gaussian")


def laplace_noise_twin() -> dict:
    return plugin("laplace_noise_twin", Loop(sigma_for()), "Gaussian noise accounted as Gaussian")


def uniform_noise() -> dict:
    """Uniform noise of the Gaussian's variance, accounted as Gaussian."""
    return plugin("uniform_noise", Loop(sigma_for(), noise="uniform"), "uniform noise accounted as Gaussian")


def uniform_noise_twin() -> dict:
    return plugin("uniform_noise_twin", Loop(sigma_for()), "Gaussian noise accounted as Gaussian")


def warmup_without_noise() -> dict:
    """The first step (a 'warm-up') without noise."""
    return plugin("warmup_without_noise", Loop(sigma_for(), noiseless_steps=1), "a first step without noise")


def warmup_without_noise_twin() -> dict:
    return plugin("warmup_without_noise_twin", Loop(sigma_for()), "noise at every step")


# --- accounting -----------------------------------------------------------------------------------

def epochs_as_steps() -> dict:
    """The noise calibrated for EPOCHS steps (the epoch count passed where the step count belongs)."""
    return plugin("epochs_as_steps", Loop(sigma_for(steps=EPOCHS)),
                  f"noise calibrated for {EPOCHS} steps (the epochs), trains {STEPS}")


def epochs_as_steps_twin() -> dict:
    return plugin("epochs_as_steps_twin", Loop(sigma_for(steps=STEPS)), f"noise calibrated for the {STEPS} steps")


# --- correct trainings at the sampling test's edges (twins without a mistake) ---------------------------

def two_steps_twin() -> dict:
    """Two steps at rate 0.1 on 300 records: two Poisson batches, often of one size."""
    return plugin("two_steps_twin", Loop(sigma_for(steps=2), steps=2), "two DP-SGD steps at rate 0.1, 300 records")


def two_steps_small_twin() -> dict:
    """Two steps at rate 0.2 on 37 records."""
    return plugin("two_steps_small_twin", Loop(sigma_for(0.2, 2), rate=0.2, declared_rate=0.2, steps=2),
                  "two DP-SGD steps at rate 0.2, 37 records", rows=37)


def rate_near_one_twin() -> dict:
    """Four steps at rate 0.99 on 100 records: nearly full batches."""
    return plugin("rate_near_one_twin", Loop(sigma_for(0.99, 4), rate=0.99, declared_rate=0.99, steps=4),
                  "four DP-SGD steps at rate 0.99, 100 records", rows=100)


#: Correct trainings without a mistake beside them (each must pass, as a twin does).
TWINS_ONLY = ("two_steps_twin", "two_steps_small_twin", "rate_near_one_twin")

#: Every mistake of this module (its twin is ``NAME + "_twin"``).
MISTAKES = ("declared_rate_too_small", "shuffled_batches", "shuffled_once", "no_clipping", "clip_norm_mismatch",
            "noise_without_clip_norm", "noise_for_the_mean", "bias_without_noise", "noise_reused",
            "cross_tensor_noise", "partly_noised", "noise_constant_seed", "laplace_noise", "uniform_noise",
            "warmup_without_noise", "epochs_as_steps")

__all__ = ["Loop", "train", "plugin", "sigma_for", "correct", "MISTAKES", "TWINS_ONLY",
           *MISTAKES, *(f"{m}_twin" for m in MISTAKES), *TWINS_ONLY]
