"""Learning a test statistic for a mechanism whose likelihood ratio is unknown (user plugins).

A threshold test is most powerful when it thresholds the likelihood ratio p1/p0 of the two worlds
(Neyman–Pearson lemma). For a built-in mechanism we know a statistic monotone in that ratio; for a
user's black-box mechanism we estimate it from draws that are *not* used for the bound, so the
bound stays valid whatever the estimate's quality [the "fit on separate samples" step of
Ding et al. 2018 (StatDP) and Bichsel et al. 2021 (DP-Sniper)]:

1. Outputs are flattened to vectors. Vectors of several coordinates are projected on Fisher's
   discriminant direction ``(S + lambda I)^-1 (m1 - m0)`` (pooled covariance ``S``), a scalar.
2. The scalar's log-ratio is estimated by a histogram: each distinct value is its own bin when
   there are at most ``MAX_CATEGORIES`` of them (categorical outputs, exact), else pooled-quantile
   bins; log((count1 + 1/2) / (count0 + 1/2)) per bin (Jeffreys-smoothed).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from audit.errors import UserError

#: Up to this many distinct projected values the outputs are treated as categories.
MAX_CATEGORIES = 256
#: Number of quantile bins for continuous outputs.
BINS = 100


def as_matrix(outputs: np.ndarray, what: str) -> np.ndarray:
    """Outputs as a finite float matrix (n, m); a one-line error otherwise.

    Args:
        outputs: the outputs, one row (or number) per draw.
        what: how the error names them.

    Returns:
        A float64 matrix (n, m).

    Raises:
        UserError: outputs that are not numbers, or NaN or infinite values.
    """
    try:
        x = np.asarray(outputs, dtype=np.float64)
    except (TypeError, ValueError):
        raise UserError(f"{what}: outputs must be numbers or arrays of numbers") from None
    x = x.reshape(len(x), -1)
    if not np.all(np.isfinite(x)):
        raise UserError(f"{what}: outputs contain NaN or infinite values")
    return x


def fit_log_ratio_score(out0: np.ndarray, out1: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """A score (estimated log p1/p0) fitted on draws ``out0`` (world without) and ``out1`` (with).

    Args:
        out0: draws of the world without the record, (n, m) or (n,).
        out1: draws of the world with it, likewise.

    Returns:
        The score: a function from outputs (n, m) to an array of n scores.
    """
    x0, x1 = as_matrix(out0, "mechanism"), as_matrix(out1, "mechanism")
    if x0.shape[1] != x1.shape[1]:
        raise UserError(f"mechanism outputs have different sizes in the two worlds ({x0.shape[1]} vs {x1.shape[1]})")
    if x0.shape[1] == 1:
        direction = None
    else:
        pooled = np.cov(np.vstack([x0 - x0.mean(0), x1 - x1.mean(0)]).T)
        ridge = 1e-6 * max(float(np.trace(pooled)) / pooled.shape[0], 1e-12)
        direction = np.linalg.solve(pooled + ridge * np.eye(pooled.shape[0]), x1.mean(0) - x0.mean(0))

    def project(x: np.ndarray) -> np.ndarray:
        return x[:, 0] if direction is None else x @ direction

    p0, p1 = project(x0), project(x1)
    values = np.unique(np.concatenate([p0, p1]))
    if values.size <= MAX_CATEGORIES:
        edges = None
        c0 = np.array([np.sum(p0 == v) for v in values], dtype=np.float64)
        c1 = np.array([np.sum(p1 == v) for v in values], dtype=np.float64)
    else:
        edges = np.unique(np.quantile(np.concatenate([p0, p1]), np.linspace(0, 1, BINS + 1)[1:-1]))
        c0 = np.bincount(np.searchsorted(edges, p0, side="right"), minlength=edges.size + 1).astype(np.float64)
        c1 = np.bincount(np.searchsorted(edges, p1, side="right"), minlength=edges.size + 1).astype(np.float64)
    log_ratio = np.log((c1 + 0.5) / (c1.sum() + 0.5)) - np.log((c0 + 0.5) / (c0.sum() + 0.5))

    def score(outputs: np.ndarray) -> np.ndarray:
        p = project(as_matrix(outputs, "mechanism"))
        if edges is not None:
            return log_ratio[np.searchsorted(edges, p, side="right")]
        index = np.searchsorted(values, p)
        known = (index < values.size) & (values[np.minimum(index, values.size - 1)] == p)
        return np.where(known, log_ratio[np.minimum(index, values.size - 1)], 0.0)

    return score
