"""A user's trainer plugin as the target of ``run inversion``: MI-FACE without gradients (finite
differences, 2d queries per step; Fredrikson et al. 2015's black-box variant) through its
``predict_proba``, on the target and on a reference model the same ``train`` fits to the
non-members."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from audit.inversion.target import InversionTarget
from audit.plugins.probe import resolved_claim
from audit.plugins.training import MAX_TRAIN, plugin_dataset, probability_api, train_once, trainer_plugin
from audit.run_context import RunPaths
from targets.plugins.loading import plugin_config


def inversion_target(opts: Any) -> Any:
    """The :class:`audit.inversion.target.InversionTarget` of a trainer plugin (black-box only): members and
    non-members of a third of the data each (up to MAX_TRAIN), the rest auxiliary."""
    plugin = trainer_plugin(opts)
    data = plugin_dataset(plugin, opts.data_dir)
    n = min(MAX_TRAIN, len(data) // 3)

    def fit(paths: RunPaths, mask: np.ndarray, seed: int, desc: str) -> Any:
        model = train_once(plugin, data.X[mask], data.y[mask], seed)
        paths.log(f"{desc}: trained by the plugin's train on {int(mask.sum())} records")
        return model

    def probabilities(model: Any) -> Callable[[torch.Tensor], torch.Tensor]:
        api = probability_api(plugin, model, data.shape, data.n_classes)
        return lambda x: torch.as_tensor(api(x.detach().cpu().numpy()), dtype=torch.float32)

    return InversionTarget(name=plugin.name, description=plugin.description, data=data, n_train=n,
                           model=f"user trainer {plugin.spec}",
                           claim=resolved_claim(plugin, data.X[:n], data.y[:n], opts.seed), delta=plugin.delta,
                           params={"plugin": plugin.spec, "n_train": n} | plugin.params,
                           config={"plugin": plugin_config(plugin)}, white_box=False, fit=fit,
                           probabilities=probabilities)
