"""A user's trainer plugin as the victim of ``run extraction`` and ``run inversion``: its ``train``
fits the model on the members, and its ``predict_proba`` is the only access — a probability API
(Tramèr et al. 2016 query one; Fredrikson et al. 2015's black-box MI-FACE does too).

* :func:`extraction_victim` — equation-solving extraction (:mod:`attacks.extraction`) assumes a
  (multinomial) logistic regression on the flattened inputs; for any other model it fits the closest
  one the queries allow, and the agreement figures say how close. The plugin's parameters are not
  visible, so no parameter error is reported.
* :func:`inversion_target` — MI-FACE without gradients (finite differences, 2d queries per step),
  on the target and on a reference model the same ``train`` fits to the non-members.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

import numpy as np
import torch

from audit.errors import UserError
from audit.membership_subjects import MAX_PLUGIN_TRAIN
from audit.plugin_trainer import plugin_dataset, predictions, train_once
from audit.run_context import RunPaths
from targets.datasets import Dataset
from targets.plugins import TrainerPlugin, load_plugin, plugin_config


def _plugin(opts: Any) -> TrainerPlugin:
    if opts.epsilon is not None or opts.delta is not None:
        raise UserError("--epsilon/--delta do not apply to a plugin: its factory states the claim")
    plugin = load_plugin(opts.target)
    if not isinstance(plugin, TrainerPlugin):
        raise UserError(f"plugin {opts.target} is a mechanism; this attack needs a trainer plugin")
    return plugin


def _claim(plugin: TrainerPlugin, data: Dataset, n: int, seed: int) -> Any:
    from audit.plugin_updates import resolved_claim

    return resolved_claim(plugin, data.X[:n], data.y[:n], seed)


def probability_api(plugin: TrainerPlugin, model: Any, shape: tuple[int, ...], n_classes: int) -> Callable:
    """``predict_proba`` on inputs of any leading shape reshaped to the plugin's input ``shape``, checked."""
    def api(X: np.ndarray) -> np.ndarray:
        proba = predictions(plugin, model, np.asarray(X, dtype=np.float32).reshape(len(X), *shape))
        if proba.shape != (len(X), n_classes) or not np.all(np.isfinite(proba)):
            raise UserError(f"predict_proba of plugin {plugin.spec} must return finite probabilities of shape "
                            f"(n, {n_classes}); got {proba.shape}")
        return proba

    return api


def extraction_victim(opts: Any, paths: RunPaths) -> Any:
    """The :class:`audit.run_extraction.Victim` of a trainer plugin: trained once on a seeded member set
    (up to MAX_PLUGIN_TRAIN records, at most half the data), served through its ``predict_proba``."""
    from attacks.extraction import linear_features
    from audit.run_extraction import Victim, member_split

    plugin = _plugin(opts)
    data = plugin_dataset(plugin, opts.data_dir)
    n = min(MAX_PLUGIN_TRAIN, len(data) // 2)
    perm = member_split(len(data), n, opts.seed)
    seed = int(np.random.SeedSequence(opts.seed).generate_state(1)[0])
    model = train_once(plugin, data.X[perm[:n]], data.y[perm[:n]], seed)
    paths.log(f"target model: trained by the plugin's train on {n} members")
    flat = replace(data, X=data.X.reshape(len(data), -1), shape=(int(np.prod(data.shape)),))
    claim = _claim(plugin, data, n, opts.seed)
    test = perm[n:]
    return Victim(plugin.name, plugin.description, flat, None, linear_features, flat.X[test], flat.y[test],
                  f"{test.size} held-out records", claim is not None, None, None,
                  claim.epsilon(plugin.delta) if claim else None, plugin.delta if claim else None,
                  claim.description if claim else None, plugin.neighbouring,
                  {"plugin": plugin.spec, "n_train": n} | plugin.params,
                  {"plugin": plugin_config(plugin), "seed": seed},
                  api=probability_api(plugin, model, data.shape, data.n_classes))


def inversion_target(opts: Any) -> Any:
    """The :class:`audit.run_inversion.InversionTarget` of a trainer plugin (black-box only): members and
    non-members of a third of the data each (up to MAX_PLUGIN_TRAIN), the rest auxiliary."""
    from audit.run_inversion import InversionTarget

    plugin = _plugin(opts)
    data = plugin_dataset(plugin, opts.data_dir)
    n = min(MAX_PLUGIN_TRAIN, len(data) // 3)

    def fit(paths: RunPaths, mask: np.ndarray, seed: int, desc: str) -> Any:
        model = train_once(plugin, data.X[mask], data.y[mask], seed)
        paths.log(f"{desc}: trained by the plugin's train on {int(mask.sum())} records")
        return model

    def probabilities(model: Any) -> Callable[[torch.Tensor], torch.Tensor]:
        api = probability_api(plugin, model, data.shape, data.n_classes)
        return lambda x: torch.as_tensor(api(x.detach().cpu().numpy()), dtype=torch.float32)

    return InversionTarget(plugin.name, plugin.description, data, n, f"user trainer {plugin.spec}",
                           _claim(plugin, data, n, opts.seed), plugin.delta,
                           {"plugin": plugin.spec, "n_train": n} | plugin.params, {"plugin": plugin_config(plugin)},
                           False, fit, probabilities)
