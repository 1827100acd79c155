"""What ``run inversion`` inverts (:class:`InversionTarget`): a registry target trained as the
membership run trains it (cached, on the run's executor), or a plugin (:mod:`audit.inversion.plugins.blackbox`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from audit.audited_model import AuditedModel
from audit.run_context import RunPaths
from audit.trained_targets import resolve_trained, train_cached
from targets.datasets import load_dataset
from targets.models import get_architecture
from targets.training import resolve_device


@dataclass(kw_only=True)
class InversionTarget(AuditedModel):
    """The model family inverted (the fields of :class:`audit.audited_model.AuditedModel`, then:)
    ``fit(paths, mask, seed, desc)`` trains one model on ``data[mask]``,
    ``probabilities(model)`` is its API for MI-FACE (a batch of inputs to class probabilities);
    ``white_box``: its gradients are available (else every inversion is black-box)."""

    config: dict
    white_box: bool
    fit: Callable[[RunPaths, np.ndarray, int, str], Any]
    probabilities: Callable[[Any], Callable[[torch.Tensor], torch.Tensor]]


def registry_inversion_target(opts: Any) -> InversionTarget:
    """A registry target, trained as the membership run trains it (cached)."""
    target = resolve_trained(opts.target, opts.epsilon, opts.delta, opts.quick)
    device = resolve_device(opts.device)
    sigma = target.noise_multiplier()
    train_config = target.train_config(sigma)
    data = load_dataset(target.dataset, opts.data_dir)
    arch = get_architecture(target.arch)

    def fit(paths: RunPaths, mask: np.ndarray, seed: int, desc: str) -> Any:
        return train_cached(opts, paths, data, mask, train_config, seed, device, desc)

    def probabilities(params: Any) -> Callable[[torch.Tensor], torch.Tensor]:
        one = {k: v[0].to(device) for k, v in params.items()}
        return lambda x: torch.softmax(arch.forward(one, x.to(device)), dim=-1).cpu()

    return InversionTarget(name=target.name, description=target.description, data=data, n_train=target.n_train,
                           model=target.arch, claim=target.claim(sigma), delta=target.delta,
                           params={"noise_multiplier": sigma, "clip_norm": target.clip_norm,
                                   "sample_rate": target.sample_rate, "steps": target.steps,
                                   "epochs": target.epochs, "lr": target.lr, "n_train": target.n_train},
                           config={"target": asdict(target), "train_config": train_config.to_dict()}, white_box=True,
                           fit=fit, probabilities=probabilities)
