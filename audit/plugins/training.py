"""Calling a user's trainer plugin: its ``train(X, y, seed) -> predict_proba`` (the randomness
argument adapted to what it takes, :mod:`targets.plugins.rng`; run under the plugin thread policy,
:mod:`targets.threads`), its dataset, and its probabilities checked. Shared by every audit kind that
trains a plugin: ``run dp`` (black-box, :mod:`audit.dp.plugins.blackbox`), ``run membership``,
``run inversion`` and ``run extraction``. The user's exceptions leave as
:class:`audit.errors.TargetCodeError` (exit 3), its wrong outputs as one-line user errors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from audit.errors import TargetCodeError, UserError
from targets.catalogue import is_language_model
from targets.datasets import Dataset, load_dataset
from targets.plugins.loading import TrainerPlugin, load_plugin
from targets.plugins.rng import trainer_args
from targets.threads import thread_limit

#: Largest training set drawn from the plugin's dataset in the many-run games (the rest is the
#: canary pool, the members' complement or the shadows' data).
MAX_TRAIN = 1000
#: Default training runs of a plugin's many-run game under ``--quick`` (else 200 black-box, 1000 updates).
QUICK_RUNS = 50


def plugin_dataset(plugin: TrainerPlugin, data_dir: str | None) -> Dataset:
    """The plugin's dataset as a :class:`targets.datasets.Dataset`."""
    if isinstance(plugin.dataset, str):
        return load_dataset(plugin.dataset, data_dir)
    X, y = plugin.dataset
    return Dataset(X, y, f"user data of {plugin.spec}", int(y.max()) + 1, tuple(X.shape[1:]), "plugin factory")


def canary_log_prob(plugin: TrainerPlugin, model, x: np.ndarray, label: int) -> float:
    """log P(label | x) under the user's ``predict_proba``; bad outputs are one-line errors."""
    proba = predictions(plugin, model, x[None])
    if proba.ndim != 2 or proba.shape[0] != 1 or proba.shape[1] <= label or not np.all(np.isfinite(proba)):
        raise UserError(f"predict_proba of plugin {plugin.spec} must return finite probabilities of shape "
                        f"(n, n_classes); got shape {proba.shape}")
    return float(np.log(max(proba[0, label], 1e-300)))


def train_once(plugin: TrainerPlugin, X: np.ndarray, y: np.ndarray, seed: int):
    """One call of the plugin's ``train`` (copies of the data, its randomness from ``seed``, under the
    thread policy); returns its ``predict_proba``."""
    try:
        with thread_limit(plugin.threads):
            model = plugin.train(X.copy(), y.copy(), *trainer_args(plugin.rng, seed))
    except UserError:  # the audit's instrumentation refusing what the loop does (audit.plugins.probe)
        raise
    except (Exception, SystemExit) as exc:  # sys.exit in train ends no audit (docs/reliability.md)
        raise TargetCodeError(f"train of plugin {plugin.spec} raised {type(exc).__name__}: {exc}") from exc
    if not callable(model):
        raise UserError(f"train of plugin {plugin.spec} must return predict_proba, a function; got "
                        f"{type(model).__name__}")
    return model


def predictions(plugin: TrainerPlugin, model, X: np.ndarray) -> np.ndarray:
    """``model(X)`` as floats, under the thread policy; its exceptions are the target's own."""
    try:
        with thread_limit(plugin.threads):
            out = model(X)
    except Exception as exc:
        raise TargetCodeError(f"predict_proba of plugin {plugin.spec} raised {type(exc).__name__}: {exc}") from exc
    try:
        return np.asarray(out, dtype=np.float64)
    except (TypeError, ValueError):
        raise UserError(f"predict_proba of plugin {plugin.spec} must return an array of probabilities (n, n_classes); "
                        f"got {type(out).__name__}") from None


def trainer_plugin(opts: Any) -> TrainerPlugin:
    """The trainer plugin ``opts.target`` names; a mechanism plugin or ``--epsilon``/``--delta`` are
    one-line errors (a plugin's factory states its claim)."""
    if opts.epsilon is not None or opts.delta is not None:
        raise UserError("--epsilon/--delta do not apply to a plugin: its factory states the claim")
    plugin = load_plugin(opts.target)
    if not isinstance(plugin, TrainerPlugin):
        raise UserError(f"plugin {opts.target} is a mechanism; this attack needs a trainer plugin")
    if is_language_model(plugin):
        raise UserError(f"plugin {opts.target} is a language-model trainer: this attack needs class probabilities; "
                        f"audit it with python -m audit run dp --target {opts.target} --one-run")
    return plugin


def probability_api(plugin: TrainerPlugin, model: Any, shape: tuple[int, ...], n_classes: int) -> Callable:
    """``predict_proba`` on inputs of any leading shape reshaped to the plugin's input ``shape``, checked."""
    def api(X: np.ndarray) -> np.ndarray:
        proba = predictions(plugin, model, np.asarray(X, dtype=np.float32).reshape(len(X), *shape))
        if proba.shape != (len(X), n_classes) or not np.all(np.isfinite(proba)):
            raise UserError(f"predict_proba of plugin {plugin.spec} must return finite probabilities of shape "
                            f"(n, {n_classes}); got {proba.shape}")
        return proba

    return api
