"""Canaries for DP audits (Nasr et al. 2021, Sec. 4; Jagielski, Ullman, Oprea 2020).

Input canaries (an example that enters training like any other):

* ``natural``: a held-out example with its true label;
* ``mislabelled``: a held-out example with a wrong label (fixed: the next class);
* ``crafted``: for logistic models the clipping-aware low-variance direction of Jagielski et al.
  2020 (ClipBKD): the input along the training data's direction of least variance (the last right
  singular vector of the centred features), scaled to the largest training-input norm, with the
  last class as label. Data gradients barely move the parameters along it, so the canary's own
  (clipped) gradient stands out of the noise of the other examples.
* ``blank``: the all-zero input with a fixed label (the last class) — the canary of Annamalai & De
  Cristofaro 2024 (Sec. 4), who audit black-box DP-SGD from worst-case (pre-trained) initial
  parameters: its gradient touches only the biases for linear models, and a pre-trained model
  gives it a large, steady loss.

Gradient canaries (DP-SGD only: a fixed vector of norm C that takes part like one more example):

* ``gradient``: a fixed random direction (seeded);
* ``dirac``: all its mass on one coordinate, chosen as a weight that no training example ever
  gives a gradient (:func:`targets.dpsgd_audit.dead_coordinate`).
* ``dirac-replace``: a Dirac canary ``g`` (first parameter) in the replace-one pair on a crafted
  dataset of Chua et al. 2024: every training record's gradient is ``-g``, the audited record's
  ``+g`` (in) or ``-g`` (out) (:mod:`targets.dpsgd_audit`). Compared with the claimed DP-SGD's
  replace-one guarantee; the pair that separates shuffled batches from Poisson sampling.
"""

from __future__ import annotations

import numpy as np

from audit.choices import GRADIENT_CANARIES, INPUT_CANARIES
from audit.errors import UserError
from targets.datasets import Dataset


def input_canary(kind: str, data: Dataset, train_index: np.ndarray, pool_index: np.ndarray,
                 rng: np.random.Generator) -> tuple[np.ndarray, int, dict]:
    """(features with ``data.shape``, label, info) of an input canary of ``kind``."""
    if kind in ("natural", "mislabelled"):
        if len(pool_index) == 0:
            raise UserError("no held-out example left for a natural/mislabelled canary; use --canary crafted")
        i = int(rng.choice(pool_index))
        label = int(data.y[i])
        if kind == "mislabelled":
            label = (label + 1) % data.n_classes
        return np.asarray(data.X[i], dtype=np.float32), label, {"row": i, "true_label": int(data.y[i]),
                                                                "label": label}
    if kind == "crafted":
        X = np.asarray(data.X[train_index], dtype=np.float64).reshape(len(train_index), -1)
        _, _, vt = np.linalg.svd(X - X.mean(axis=0), full_matrices=True)
        v = vt[-1]
        scale = float(np.linalg.norm(X, axis=1).max())
        x = (v * scale).astype(np.float32).reshape(data.shape)
        label = data.n_classes - 1
        return x, label, {"rule": "least-variance direction of the training inputs (ClipBKD)", "norm": scale,
                          "label": label}
    if kind == "blank":
        label = data.n_classes - 1
        return np.zeros(data.shape, dtype=np.float32), label, {"rule": "all-zero input (Annamalai & De Cristofaro "
                                                                       "2024)", "label": label}
    raise UserError(f"unknown input canary {kind!r}; choose one of {', '.join(INPUT_CANARIES)}")


def gradient_canary(kind: str, n_params: int, clip_norm: float, dead_index: int | None,
                    rng: np.random.Generator) -> tuple[np.ndarray, dict]:
    """A flattened gradient canary of norm ``clip_norm``: ``dirac`` at ``dead_index`` or a random direction."""
    g = np.zeros(n_params, dtype=np.float64)
    if kind == "dirac-replace":
        g[0] = clip_norm
        return g.astype(np.float32), {"coordinate": 0, "norm": clip_norm,
                                      "dataset": "crafted: every record's gradient is -g (Chua et al. 2024)"}
    if kind == "dirac":
        if dead_index is None:
            raise UserError("a Dirac canary needs a parameter no data gradient touches")
        g[dead_index] = clip_norm
        return g.astype(np.float32), {"coordinate": int(dead_index), "norm": clip_norm}
    if kind == "gradient":
        g = rng.normal(size=n_params)
        g *= clip_norm / np.linalg.norm(g)
        return g.astype(np.float32), {"direction": "seeded random unit vector", "norm": clip_norm}
    raise UserError(f"unknown gradient canary {kind!r}; choose one of {', '.join(GRADIENT_CANARIES)}")
