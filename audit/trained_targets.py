"""The project's trained targets as the inversion, extraction and membership runs train them:
the ``--quick`` preset, the seeded member split, and one model trained through the run's executor
and the model cache (:func:`audit.executors.train_cached_models`, so ``--workers``/``--executor``
apply and the cache key is built in one place)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from audit.errors import UserError
from audit.executors import CachedExecutor, TrainingCall, train_cached_models
from audit.run_context import RunPaths
from targets.catalogue import trained_target
from targets.datasets import Dataset
from targets.registry import TrainedTarget
from targets.training import TrainConfig


def quick_target(target: TrainedTarget) -> TrainedTarget:
    """The --quick preset: a third of the data and a few epochs (same model and claim)."""
    return replace(target, n_train=min(target.n_train, 500), batch_size=min(target.batch_size, 128),
                   epochs=min(target.epochs, 10))


def member_split(n: int, n_train: int, seed: int) -> np.ndarray:
    """A seeded permutation of range(n); its first ``n_train`` entries are the target's members."""
    if n_train >= n:
        raise UserError(f"the target needs {n_train} training records but the dataset has only {n}; "
                        f"use a larger dataset (--data-dir) or a smaller target")
    return np.random.default_rng([int(seed), 7919]).permutation(n)


def train_cached(opts: Any, paths: RunPaths, data: Dataset, mask: np.ndarray, config: TrainConfig, seed: int,
                 device, desc: str):
    """Train one model on ``data[mask]`` on the executor of ``opts`` (``--workers``, ``--executor``), or
    reuse the cached one keyed by everything that determines it."""
    with opts.make_executor() as executor:
        runner = CachedExecutor(executor=executor, cache_dir=paths.cache_dir, log=paths.log)
        (params,) = train_cached_models(runner, data, config, [TrainingCall(desc, mask[None], [int(seed)])], device,
                                        progress=not opts.quiet)
    return params


def resolve_trained(name: str, epsilon: float | None, delta: float | None, quick: bool) -> TrainedTarget:
    """The registry target with the requested privacy, shrunk by --quick (as the membership run does)."""
    target = trained_target(name).with_privacy(epsilon, delta)
    return quick_target(target) if quick else target
