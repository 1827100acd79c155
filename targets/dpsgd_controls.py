"""DP-SGD trainers written the way a user would (torch, trainer-plugin form), one correct and two
deliberately broken, all claiming (1, 1e-5)-DP — controls for black-box audits.

Each factory returns the trainer plugin dict of :mod:`targets.plugins`; audit one with
``python -m audit run dp --target targets.dpsgd_controls:no_clipping --threat black-box
--canary crafted`` or ``audit.testing.assert_private``. The model is softmax regression on
scikit-learn's digits (raw intensities 0..16); DP-SGD [Abadi et al. 2016, Alg. 1] with Poisson
sampling at rate q = 0.1, clip norm C = 1, 5 epochs (T = 50 steps), noise multiplier calibrated
to (1, 1e-5) by the PLD accountant, and the sum divided by the expected batch size. Per-example
gradients of a linear softmax model are outer products (p_i - e_{y_i}) [x_i, 1], whose norm is the
product of the two norms, so clipping needs no per-example autograd.

* ``correct``: as above.
* ``no_clipping``: the per-example gradients are summed unclipped (a classic bug: clipping
  skipped); the Gaussian noise no longer covers an example whose gradient is larger than C.
* ``noise_over_batch``: noise std sigma C / B instead of sigma C — the noise is added *after*
  averaging with the formula for the sum, a bug that divides the noise by the batch size.

The third DP-SGD control, shuffled batches accounted as Poisson, is not visible to a black-box
audit of the final model: it is the registry target ``dpsgd_control_shuffle_as_poisson``
(:mod:`targets.registry`), caught from the training updates by ``run dp --canary dirac-replace``.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from targets.datasets import load_dataset

#: The claim every control makes.
CLAIM = {"epsilon": 1.0, "delta": 1e-5}
SAMPLE_RATE = 0.1
EPOCHS = 5
CLIP = 1.0
LR = 1.0
N_TRAIN_NOMINAL = 1000


@functools.lru_cache(maxsize=1)
def noise_multiplier() -> float:
    """sigma for (1, 1e-5)-DP at q = 0.1, T = 50 steps (PLD accountant)."""
    from audit.theory.dpsgd import calibrate_noise_multiplier

    return float(calibrate_noise_multiplier(CLAIM["epsilon"], CLAIM["delta"], SAMPLE_RATE,
                                            int(round(EPOCHS / SAMPLE_RATE))))


def _digits() -> tuple[np.ndarray, np.ndarray]:
    """Digits with pixel intensities 0..16 as scikit-learn ships them: unnormalised inputs have
    gradient norms far above C, so clipping (or its absence) matters."""
    data = load_dataset("digits")  # scaled to [0, 1] by the loader; undo it
    return (data.X.reshape(len(data), -1) * 16.0).astype(np.float32), data.y


def make_trainer(clip: bool = True, noise_divisor: str = "none"):
    """A DP-SGD trainer ``train(X, y, seed) -> predict_proba`` with the given (possibly broken) parts."""
    sigma = noise_multiplier()
    steps = int(round(EPOCHS / SAMPLE_RATE))

    def train(X: np.ndarray, y: np.ndarray, seed: int):
        g = torch.Generator().manual_seed(int(seed))
        Xb = torch.cat([torch.as_tensor(X, dtype=torch.float64).reshape(len(X), -1),
                        torch.ones(len(X), 1, dtype=torch.float64)], dim=1)
        Y = torch.nn.functional.one_hot(torch.as_tensor(y, dtype=torch.int64), 10).double()
        n, d = Xb.shape
        W = torch.zeros(d, 10, dtype=torch.float64)
        batch = SAMPLE_RATE * N_TRAIN_NOMINAL  # fixed normaliser: the expected batch size
        for _ in range(steps):
            rows = torch.nonzero(torch.rand(n, generator=g, dtype=torch.float64) < SAMPLE_RATE).flatten()
            x, e = Xb[rows], Y[rows]
            residual = torch.softmax(x @ W, dim=1) - e  # per-example gradient = x_i^T residual_i
            if clip:
                norms = x.norm(dim=1) * residual.norm(dim=1)
                residual = residual * torch.clamp(CLIP / norms.clamp_min(1e-12), max=1.0)[:, None]
            grad_sum = x.T @ residual
            std = sigma * CLIP / (batch if noise_divisor == "batch" else 1.0)
            noise = torch.randn(d, 10, generator=g, dtype=torch.float64) * std
            W = W - LR * (grad_sum + noise) / batch
        final = W.clone()

        def predict_proba(Z: np.ndarray) -> np.ndarray:
            z = torch.as_tensor(np.asarray(Z, dtype=np.float64)).reshape(len(Z), -1)
            z = torch.cat([z, torch.ones(len(z), 1, dtype=torch.float64)], dim=1)
            return torch.softmax(z @ final, dim=1).numpy()

        return predict_proba

    return train


def _plugin(name: str, description: str, **kinds) -> dict:
    return {"kind": "trainer", "name": name, "description": description, "dataset": _digits(),
            "train": make_trainer(**kinds), "claim": dict(CLAIM)}


def correct() -> dict:
    return _plugin("dpsgd_control_correct", "DP-SGD softmax regression on digits, correct, claims (1, 1e-5)")


def no_clipping() -> dict:
    return _plugin("dpsgd_control_no_clipping", "BROKEN DP-SGD: per-example clipping skipped, claims (1, 1e-5)",
                   clip=False)


def noise_over_batch() -> dict:
    return _plugin("dpsgd_control_noise_over_batch", "BROKEN DP-SGD: noise std divided by the batch size, claims "
                   "(1, 1e-5)", noise_divisor="batch")

