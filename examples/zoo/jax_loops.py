"""JAX DP-SGD loops with the JAX audit hooks, each with one real mistake, beside its twin.

The loop (:func:`train`) is the torch zoo's (:mod:`examples.zoo.hooked`) written in JAX: softmax
regression (650 parameters: a weight matrix and a bias, one pytree) on the first 300 rows of
scikit-learn's digits, DP-SGD as Abadi et al. 2016, Alg. 1 writes it — each record in a step by its own
coin with rate ``q`` (a boolean mask drawn with ``jax.random``), each example's gradient
(``jax.vmap(jax.grad(...))``) clipped to ``C``, Gaussian noise of standard deviation ``sigma C`` added to
the sum, the sum divided by the expected batch size ``q n`` — one step compiled by
:func:`targets.jax_hooks.jit` with the hooks inside it. :func:`ok` is the correct loop; each mistake sets
one field of :class:`Loop`, and its twin (``NAME_twin``) is the same loop with that field right. Every
plugin claims (2, 1e-5)-DP, with the torch zoo's sizes and noise (:func:`examples.zoo.hooked.sigma_for`).
The mistakes are those of the torch zoo that apply to JAX, under its names, and the one JAX adds: a PRNG
key used at every step without being split (``key_not_split``). Sources: docs/reference/bug-zoo.md.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from examples.zoo.hooked import DELTA, EPS, LR, STEPS, C, N, Q, sigma_for
from targets import jax_hooks
from targets.datasets import load_digits


@dataclass(frozen=True)
class Loop:
    """The DP-SGD one JAX loop runs; the defaults are the correct loop.

    ``rate``: the Poisson rate it samples with; ``declared_rate``: the rate it tells ``add_canary`` (and its
    accounting); ``clip``: the clip norm; ``scale``: the noise's standard deviation, "sigma*C" or "sigma"
    (the clip norm forgotten); ``key``: how the PRNG key is handled, "split" (a key from the seed, split at
    every step), "constant" (``jax.random.key(0)`` for the noise, whatever the seed), "not-split" (the seed's
    key passed to every step unchanged: the same batch and the same noise at every step) or "noise-once"
    (one noise pytree drawn before training and added at every step); ``unnoised``: parameters left without
    noise.
    """

    sigma: float
    rate: float = Q
    declared_rate: float = Q
    clip: float = C
    scale: str = "sigma*C"
    key: str = "split"
    unnoised: tuple[str, ...] = ()


def _loss(params: dict, x: jax.Array, label: jax.Array) -> jax.Array:
    """Cross-entropy of one example under softmax regression."""
    logits = params["weight"] @ x + params["bias"]
    return -jax.nn.log_softmax(logits)[label]


def _clipped_sum(params: dict, X: jax.Array, y: jax.Array, mask: jax.Array, clip: float) -> dict:
    """Sum over the rows the mask holds of each example's gradient clipped to ``clip``."""
    grads = jax.vmap(jax.grad(_loss), in_axes=(None, 0, 0))(params, X, y)
    norms = jnp.sqrt(sum(jnp.sum(g.reshape(len(X), -1) ** 2, axis=1) for g in jax.tree.leaves(grads)))
    factor = mask * jnp.minimum(1.0, clip / (norms + 1e-12))
    return jax.tree.map(lambda g: jnp.tensordot(factor, g, axes=1), grads)


def _gaussian(key: jax.Array, like: dict) -> dict:
    """Independent N(0, 1) draws for every coordinate of ``like``, a fresh key per parameter."""
    keys = dict(zip(sorted(like), jax.random.split(key, len(like)), strict=True))
    return {name: jax.random.normal(keys[name], value.shape, value.dtype) for name, value in like.items()}


@functools.partial(jax_hooks.jit, static_argnames=("clip", "declared_rate"))
def _step(params: dict, keys: tuple[jax.Array, jax.Array], X: jax.Array, y: jax.Array, rate: float, noise: dict, *,
          clip: float, declared_rate: float) -> dict:
    """One DP-SGD step, the hooks around the noise: ``keys`` for the batch and the noise, ``noise`` the
    standard deviation per parameter; the rates and stds are traced, so the loops share their compilations."""
    mask = jax.random.uniform(keys[0], (X.shape[0],)) < rate
    grads = _clipped_sum(params, X, y, mask, clip)
    grads = jax_hooks.add_canary(grads, clip_norm=clip, sample_rate=declared_rate, batch=mask, params=params)
    drawn = _gaussian(keys[1], grads)
    noisy = {name: g + noise[name] * drawn[name] for name, g in grads.items()}
    new = jax.tree.map(lambda p, g: p - LR * g / (declared_rate * X.shape[0]), params, noisy)
    jax_hooks.report_update(noisy, params=new)
    return new


def _keys(loop: Loop, seed: int) -> list[tuple[jax.Array, jax.Array]]:
    """The (batch, noise) keys of every step, as the loop handles its PRNG keys (class docstring)."""
    key, noise_key, once = jax.random.split(jax.random.key(seed), 3)
    if loop.key == "constant":
        noise_key = jax.random.key(0)
    if loop.key == "not-split":
        return [(key, noise_key)] * STEPS
    keys = []
    for _ in range(STEPS):
        key, step_key = jax.random.split(key)
        noise_key, step_noise = jax.random.split(noise_key)
        keys.append((step_key, once if loop.key == "noise-once" else step_noise))
    return keys


def train(X: np.ndarray, y: np.ndarray, seed: int, loop: Loop):
    """DP-SGD as ``loop`` says (class docstring); returns ``predict_proba``."""
    X, y = jnp.asarray(X, dtype=jnp.float32), jnp.asarray(y)
    params = {"weight": jnp.zeros((10, X.shape[1])), "bias": jnp.zeros(10)}
    std = loop.sigma * loop.clip if loop.scale == "sigma*C" else loop.sigma
    noise = {name: 0.0 if name in loop.unnoised else std for name in params}
    for keys in _keys(loop, seed):
        params = _step(params, keys, X, y, loop.rate, noise, clip=loop.clip, declared_rate=loop.declared_rate)
    return softmax_predictor(params)


def softmax_predictor(params: dict) -> Callable[[np.ndarray], np.ndarray]:
    """``predict_proba`` of the softmax regression ``params`` (``weight``, ``bias``), in numpy."""
    W, b = np.asarray(params["weight"]), np.asarray(params["bias"])

    def predict_proba(Z: np.ndarray) -> np.ndarray:
        logits = np.asarray(Z, dtype=np.float64).reshape(len(Z), -1) @ W.T + b
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    return predict_proba


def plugin(name: str, loop: Loop, description: str) -> dict:
    """The trainer plugin of ``loop``: the first N digits, claiming (EPS, DELTA)."""
    digits = load_digits()
    return {"kind": "trainer", "name": f"jax_zoo_{name}", "dataset": (digits.X[:N], digits.y[:N]),
            "train": lambda X, y, seed: train(X, y, seed, loop), "description": description,
            "claim": {"epsilon": EPS, "delta": DELTA}}


def ok() -> dict:
    """The correct JAX loop every twin below varies."""
    return plugin("ok", Loop(sigma_for()), "correct JAX DP-SGD loop (targets.jax_hooks.jit)")


def declared_rate_too_small() -> dict:
    """Samples at 0.3, tells add_canary (and its accounting) 0.1."""
    return plugin("declared_rate_too_small", Loop(sigma_for(), rate=0.3),
                  "samples each record with rate 0.3, declares and accounts 0.1")


def declared_rate_too_small_twin() -> dict:
    return plugin("declared_rate_too_small_twin", Loop(sigma_for(0.3), rate=0.3, declared_rate=0.3),
                  "samples with rate 0.3, declares and accounts 0.3")


def noise_without_clip_norm() -> dict:
    """Noise of standard deviation sigma where sigma x C is needed (C = 5)."""
    return plugin("noise_without_clip_norm", Loop(sigma_for(), clip=5.0, scale="sigma"),
                  "clip norm 5, noise of standard deviation sigma instead of sigma x C")


def noise_without_clip_norm_twin() -> dict:
    return plugin("noise_without_clip_norm_twin", Loop(sigma_for(), clip=5.0), "clip norm 5, noise sigma x C")


def bias_without_noise() -> dict:
    """No noise on the bias (10 of 650 coordinates)."""
    return plugin("bias_without_noise", Loop(sigma_for(), unnoised=("bias",)), "the bias gets no noise")


def bias_without_noise_twin() -> dict:
    return plugin("bias_without_noise_twin", Loop(sigma_for()), "every parameter gets noise")


def noise_reused() -> dict:
    """One noise pytree drawn before training and added at every step."""
    return plugin("noise_reused", Loop(sigma_for(), key="noise-once"), "one noise draw reused at every step")


def noise_reused_twin() -> dict:
    return plugin("noise_reused_twin", Loop(sigma_for()), "fresh noise at every step")


def noise_constant_seed() -> dict:
    """The noise from ``jax.random.key(0)``: the same noise whatever the training's seed."""
    return plugin("noise_constant_seed", Loop(sigma_for(), key="constant"),
                  "noise from a constant PRNG key, jax.random.key(0)")


def noise_constant_seed_twin() -> dict:
    return plugin("noise_constant_seed_twin", Loop(sigma_for()), "noise from a key made from the training's seed")


def key_not_split() -> dict:
    """The seed's keys passed to every step without a split: the same batch and the same noise each step."""
    return plugin("key_not_split", Loop(sigma_for(), key="not-split"),
                  "the same PRNG keys at every step (never split)")


def key_not_split_twin() -> dict:
    return plugin("key_not_split_twin", Loop(sigma_for()), "the PRNG keys split at every step")


#: Every mistake of this module (its twin is ``NAME + "_twin"``).
MISTAKES = ("declared_rate_too_small", "noise_without_clip_norm", "bias_without_noise", "noise_reused",
            "noise_constant_seed", "key_not_split")

__all__ = ["Loop", "train", "plugin", "ok", "MISTAKES", *MISTAKES, *(f"{m}_twin" for m in MISTAKES)]
