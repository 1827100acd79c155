"""A small hand-written DP-SGD loop with the two hooks of :mod:`targets.audit_hooks` (softmax regression,
200 parameters, 1,200 rows), as a trainer plugin: the loop the one-run and console tests audit
(imported as ``from hooked_softmax import hooked_plugin``)."""

from __future__ import annotations

import numpy as np
import torch

from audit.theory.dpsgd import calibrate_noise_multiplier
from targets.audit_hooks import add_canary, report_update

EPS, DELTA, Q, EPOCHS, C, N, FEATURES, CLASSES = 4.0, 1e-5, 0.05, 1, 1.0, 1200, 20, 10
STEPS = int(round(EPOCHS / Q))
SIGMA = float(calibrate_noise_multiplier(EPS, DELTA, Q, STEPS))


def _data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(N, FEATURES)).astype(np.float32), rng.integers(0, CLASSES, N)


def _loop(epochs: int = EPOCHS):
    """A hand-written DP-SGD loop with the two hooks: Poisson rate Q, per-example clipping to C, the noisy sum."""
    def train(X, y, seed):
        gen = torch.manual_seed(seed)
        X, y = torch.as_tensor(X), torch.as_tensor(y)
        w = torch.zeros(X.shape[1], CLASSES)
        for _ in range(int(round(epochs / Q))):
            batch = torch.nonzero(torch.rand(len(X), generator=gen) < Q).reshape(-1)
            p = torch.softmax(X[batch] @ w, 1)
            g = X[batch][:, :, None] * (p - torch.nn.functional.one_hot(y[batch], CLASSES))[:, None, :]
            norms = g.flatten(1).norm(dim=1).clamp(min=1e-12)
            summed = (g * (C / norms).clamp(max=1.0)[:, None, None]).sum(0)
            add_canary(summed, clip_norm=C, sample_rate=Q, batch=batch)
            noisy = summed + SIGMA * C * torch.randn(summed.shape, generator=gen)
            report_update(noisy)
            w = w - 0.5 * noisy / (Q * N)  # a normaliser fixed in advance
        return lambda Z: torch.softmax(torch.as_tensor(Z, dtype=torch.float32) @ w, 1).numpy()

    return train


def hooked_plugin(name: str, epochs: int = EPOCHS) -> dict:
    return {"kind": "trainer", "name": name, "dataset": _data(), "train": _loop(epochs),
            "claim": {"epsilon": EPS, "delta": DELTA}}
