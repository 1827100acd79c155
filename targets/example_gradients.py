"""Per-example gradient norms of one trained model: what the gradient-max canaries of the membership game
(:mod:`audit.membership.crafted`) are chosen by. Sources: docs/references.md, "Canaries and threat models"
(Boglioni et al. 2026).

The model is one of a stack (leading axis of length 1, as :func:`targets.training.train_models` returns them); the
gradients are ``vmap(grad)`` of the per-example cross-entropy, :data:`GRADIENT_CHUNK` examples at a time, so that the
(n, P) gradients never exist at once.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.func import grad, vmap

from targets.dpsgd_audit import flatten
from targets.dpsgd_step import example_loss
from targets.models import Params, get_architecture

#: Inputs whose per-example gradients are materialised at once (a CNN on MNIST: about 100 MB).
GRADIENT_CHUNK = 1000


def gradient_norms(arch_name: str, params: Params, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(n,) the norm of each example's per-example loss gradient under model 0 of ``params``."""
    arch = get_architecture(arch_name)
    one = {k: v[0].detach().float() for k, v in params.items()}
    per_example = vmap(grad(example_loss(arch)), in_dims=(None, 0, 0))
    norms = []
    with torch.no_grad():
        for start in range(0, len(X), GRADIENT_CHUNK):
            x = torch.as_tensor(np.asarray(X[start:start + GRADIENT_CHUNK], dtype=np.float32))
            t = torch.as_tensor(np.asarray(y[start:start + GRADIENT_CHUNK]), dtype=torch.long)
            norms.append(flatten(per_example(one, x, t)).double().norm(dim=1).numpy())
    return np.concatenate(norms) if norms else np.zeros(0)
