"""Model extraction through a prediction API [Tramèr, Zhang, Juels, Reiter, Ristenpart 2016,
"Stealing Machine Learning Models via Prediction APIs", USENIX Security].

The victim is a (multinomial) logistic regression over a public feature map ``phi(x)`` (for a
plain model ``phi(x) = [x, 1]``; for DP-ERM the per-record normalisation of :mod:`targets.dperm`),
served as class-probability vectors, possibly rounded to ``K`` decimals. Softmax regression has
``p_k(x) = exp(theta_k . phi(x)) / sum_j exp(theta_j . phi(x))`` (binary LR is the case of two
classes with ``theta_0 = 0``), so every log-ratio is linear in the unknowns (Tramèr et al. Sec. 4.1):

    log p_k(x) - log p_r(x) = (theta_k - theta_r) . phi(x).

The parameters are identifiable only up to a common shift of all ``theta_k``; we recover the
canonical form ``theta_k - theta_0`` (``K - 1`` rows), which determines the model's outputs
exactly. With exact outputs ``p = dim phi`` (``d + 1``) queries at random inputs give a square
system per class (Sec. 4.1.1, "equation-solving"). With rounded outputs each log-ratio carries an
error; we use weighted least squares over more queries, weighting each equation by the inverse of
its first-order (delta-method) standard deviation under uniform rounding error
``u ~ U(-10^-K/2, 10^-K/2)`` (``sd(log p) ~ 10^-K / (sqrt(12) p)``), and drop outputs rounded to 0
(they carry only an inequality). The label-only baseline (Sec. 5, "uniform retraining") queries
only the predicted labels of uniform random inputs and fits a logistic regression to them.

Fidelity figures (Sec. 4 / Jagielski et al. 2020): agreement of predicted labels on test data and
on uniform random inputs (``1 - R_test``, ``1 - R_unif``) and the mean total-variation distance
between the two models' output distributions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from audit.errors import UserError

FeatureMap = Callable[[np.ndarray], np.ndarray]

__all__ = ["PredictionAPI", "ExtractedModel", "linear_features", "softmax", "canonical", "equation_solving",
           "label_only_retraining", "informative_box", "agreement", "tv_distance", "relative_error", "uniform_inputs"]


def linear_features(X: np.ndarray) -> np.ndarray:
    """phi(x) = [x, 1]: the feature map of a plain (multinomial) logistic regression."""
    X = np.asarray(X, dtype=np.float64).reshape(len(X), -1)
    return np.hstack([X, np.ones((X.shape[0], 1))])


def softmax(logits: np.ndarray) -> np.ndarray:
    """Numerically stable softmax over the last axis (float64)."""
    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def canonical(theta: np.ndarray) -> np.ndarray:
    """Canonical parameters ``theta_k - theta_0`` (rows 1..K-1) of a (K, p) softmax parameter matrix."""
    theta = np.asarray(theta, dtype=np.float64)
    return theta[1:] - theta[:1]


def uniform_inputs(n: int, low: np.ndarray, high: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``n`` inputs drawn uniformly from the box [low, high] (per feature)."""
    low = np.asarray(low, dtype=np.float64)
    high = np.asarray(high, dtype=np.float64)
    return low + (high - low) * rng.random((int(n), low.size))


class PredictionAPI:
    """A black-box prediction API: class-probability vectors for a batch of inputs.

    ``predict_proba`` maps raw inputs (n, d) to probabilities (n, K). When ``round_decimals`` is
    set, outputs are rounded to that many decimals, as deployed APIs do (Tramèr et al. Sec. 6.1).
    Every row sent is counted in ``queries``; ``labels`` returns only the arg-max class (a
    label-only API) and counts the same way.
    """

    def __init__(self, predict_proba: Callable[[np.ndarray], np.ndarray], n_features: int, n_classes: int,
                 round_decimals: int | None = None) -> None:
        if round_decimals is not None and not 0 <= int(round_decimals) <= 15:
            raise UserError(f"--round must be between 0 and 15 decimals, got {round_decimals}")
        self._predict = predict_proba
        self.n_features = int(n_features)
        self.n_classes = int(n_classes)
        self.round_decimals = None if round_decimals is None else int(round_decimals)
        self.queries = 0

    def __call__(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64).reshape(-1, self.n_features)
        self.queries += X.shape[0]
        p = np.asarray(self._predict(X), dtype=np.float64)
        return p if self.round_decimals is None else np.round(p, self.round_decimals)

    def labels(self, X: np.ndarray) -> np.ndarray:
        """Predicted labels only (label-only API)."""
        X = np.asarray(X, dtype=np.float64).reshape(-1, self.n_features)
        self.queries += X.shape[0]
        return np.asarray(self._predict(X)).argmax(axis=1)


@dataclass
class ExtractedModel:
    """A stolen softmax regression in canonical form: ``theta`` (K-1, p) over ``feature_map``."""

    theta: np.ndarray
    feature_map: FeatureMap
    queries: int
    method: str
    details: dict = field(default_factory=dict)

    def logits(self, X: np.ndarray) -> np.ndarray:
        z = self.feature_map(X) @ self.theta.T
        return np.hstack([np.zeros((z.shape[0], 1)), z])

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        return softmax(self.logits(X))

    def predict(self, X: np.ndarray) -> np.ndarray:
        return self.logits(X).argmax(axis=1)


def _solve_exact(F: np.ndarray, P: np.ndarray) -> np.ndarray:
    """Square or overdetermined unweighted system F theta_k = log p_k - log p_0 for every class k."""
    if np.any(P <= 0):
        raise UserError("the API returned zero probabilities, so log-ratios are undefined; "
                        "pass --round K to use least squares over more queries")
    L = np.log(P[:, 1:]) - np.log(P[:, :1])
    if F.shape[0] == F.shape[1]:
        return np.linalg.solve(F, L).T
    return np.linalg.lstsq(F, L, rcond=None)[0].T


def _solve_rounded(F: np.ndarray, P: np.ndarray, decimals: int) -> tuple[np.ndarray, int]:
    """Weighted least squares over the log-ratios against each query's arg-max class.

    Unknowns: canonical rows theta_1..theta_{K-1} (theta_0 = 0). Equation for query i, class k != r_i
    (r_i = arg-max) with p_ik > 0: (theta_k - theta_{r_i}) . phi_i = log p_ik - log p_ir_i, weight
    1 / sd with sd = u sqrt(1/p_ik^2 + 1/p_ir^2), u = 10^-K / sqrt(12) (delta method).
    Returns (theta, number of equations used).
    """
    n, p = F.shape
    K = P.shape[1]
    u = 10.0 ** (-decimals) / math.sqrt(12.0)
    ref = P.argmax(axis=1)
    p_ref = P[np.arange(n), ref]
    rows, cols_pos, cols_neg, rhs, weight = [], [], [], [], []
    for k in range(K):
        use = (P[:, k] > 0) & (ref != k)
        idx = np.flatnonzero(use)
        rows.append(idx)
        cols_pos.append(np.full(idx.size, k))
        cols_neg.append(ref[idx])
        rhs.append(np.log(P[idx, k]) - np.log(p_ref[idx]))
        weight.append(1.0 / (u * np.sqrt(1.0 / P[idx, k] ** 2 + 1.0 / p_ref[idx] ** 2)))
    rows_a = np.concatenate(rows)
    kpos, kneg = np.concatenate(cols_pos), np.concatenate(cols_neg)
    b = np.concatenate(rhs)
    w = np.concatenate(weight)
    m = rows_a.size
    if m < (K - 1) * p:
        raise UserError(f"only {m} usable equations for {(K - 1) * p} unknowns (outputs rounded to 0); "
                        f"use more queries (--queries) or fewer rounding decimals")
    involved = np.bincount(kpos, minlength=K) + np.bincount(kneg, minlength=K)
    short = [k for k in range(1, K) if involved[k] < p]
    if short:
        raise UserError(f"the rounded outputs do not determine classes {short} (fewer than {p} equations involve "
                        f"each); use more queries (--queries) or more decimals (--round)")
    # Normal equations A^T W^2 A theta = A^T W^2 b without forming A: an equation between classes a and r
    # contributes w^2 phi phi^T to blocks (a, a) and (r, r) and minus it to (a, r) and (r, a); block 0 is fixed.
    normal = np.zeros(((K - 1) * p, (K - 1) * p))
    rhs_n = np.zeros((K - 1) * p)
    w2 = w * w
    for a in range(K):
        for r in range(K):
            sel = np.flatnonzero((kpos == a) & (kneg == r))
            if sel.size == 0:
                continue
            Fs = F[rows_a[sel]]
            M = (Fs * w2[sel, None]).T @ Fs
            v = Fs.T @ (w2[sel] * b[sel])
            for x, y, sign in ((a, a, 1.0), (r, r, 1.0), (a, r, -1.0), (r, a, -1.0)):
                if x > 0 and y > 0:
                    normal[(x - 1) * p:x * p, (y - 1) * p:y * p] += sign * M
            if a > 0:
                rhs_n[(a - 1) * p:a * p] += v
            if r > 0:
                rhs_n[(r - 1) * p:r * p] -= v
    try:
        sol = np.linalg.solve(normal, rhs_n)
    except np.linalg.LinAlgError:
        raise UserError("the rounded outputs do not determine every class's parameters (too few non-zero "
                        "probabilities); use more queries (--queries) or more decimals (--round)") from None
    return sol.reshape(K - 1, p), m


def informative_box(api: PredictionAPI, low: np.ndarray, high: np.ndarray, rng: np.random.Generator,
                    probe: int = 20, target: float = 0.75, max_halvings: int = 30) -> tuple[np.ndarray, np.ndarray, float]:
    """Choose a query box in which rounded outputs carry information.

    A rounded output whose runner-up probabilities all round to 0 gives no equation (a saturated
    model on uniform inputs, e.g. softmax regression on 784 MNIST pixels). If the box centre is
    saturated, we move the centre to a point near a decision boundary, found by bisection on the
    segment between two probe inputs with different labels (the line search of Tramèr et al.
    2016, Sec. 4.2); then we halve the box about the centre (clipped to [low, high]) until at least
    ``target`` of ``probe`` random queries have two or more non-zero probabilities. Every probe is
    counted by the API. Returns (low, high, scale) of the chosen box.
    """
    low = np.asarray(low, dtype=np.float64)
    high = np.asarray(high, dtype=np.float64)
    centre, half = (low + high) / 2, (high - low) / 2

    def informative(P: np.ndarray) -> np.ndarray:
        return (P > 0).sum(axis=1) >= 2

    if not informative(api(centre[None]))[0]:
        for _ in range(max_halvings):  # probe until two labels are seen
            X = uniform_inputs(probe, low, high, rng)
            labels = api(X).argmax(axis=1)
            other = np.flatnonzero(labels != labels[0])
            if other.size:
                break
        if other.size:
            a, b = X[0], X[other[0]]
            for _ in range(60):
                mid = (a + b) / 2
                P = api(mid[None])
                if informative(P)[0]:
                    centre = mid
                    break
                if P[0].argmax() == labels[0]:
                    a = mid
                else:
                    b = mid
    scale = 1.0
    for _ in range(max_halvings):
        box_low, box_high = np.maximum(low, centre - scale * half), np.minimum(high, centre + scale * half)
        if informative(api(uniform_inputs(probe, box_low, box_high, rng))).mean() >= target:
            break
        scale /= 2
    return np.maximum(low, centre - scale * half), np.minimum(high, centre + scale * half), scale


def equation_solving(api: PredictionAPI, feature_map: FeatureMap, low: np.ndarray, high: np.ndarray,
                     rng: np.random.Generator, n_queries: int | None = None) -> ExtractedModel:
    """Equation-solving extraction (Tramèr et al. 2016, Sec. 4.1) of a softmax / binary LR.

    Queries ``n_queries`` uniform random inputs from [low, high] (default: ``p = dim phi`` queries,
    i.e. d + 1, when outputs are exact; 20 p when rounded) and solves the log-ratio equations:
    exactly when outputs are exact, by weighted least squares when they are rounded. With rounded
    outputs the box is first shrunk by :func:`informative_box` (its probes are counted too).
    """
    p = feature_map(np.asarray(low, dtype=np.float64)[None]).shape[1]
    rounded = api.round_decimals is not None
    n = int(n_queries) if n_queries is not None else (20 * p if rounded else p)
    if n < p:
        raise UserError(f"equation solving needs at least {p} queries (d + 1) for this model, got {n}")
    start = api.queries
    scale = 1.0
    if rounded:
        low, high, scale = informative_box(api, low, high, rng)
    X = uniform_inputs(n, low, high, rng)
    P = api(X)
    F = feature_map(X)
    if rounded:
        theta, used = _solve_rounded(F, P, api.round_decimals)
        details = {"equations": used, "round_decimals": api.round_decimals, "solver": "weighted least squares",
                   "box_scale": scale, "probe_queries": api.queries - start - n}
    else:
        theta = _solve_exact(F, P)
        details = {"equations": n * (api.n_classes - 1),
                   "solver": "linear solve" if n == p else "least squares", "condition_number": float(np.linalg.cond(F))}
    return ExtractedModel(theta, feature_map, api.queries - start, "equation-solving", details)


def label_only_retraining(api: PredictionAPI, feature_map: FeatureMap, low: np.ndarray, high: np.ndarray,
                          rng: np.random.Generator, n_queries: int, l2: float = 1e-4) -> ExtractedModel:
    """Label-only baseline (Tramèr et al. 2016, Sec. 5, uniform retraining): query the labels of
    ``n_queries`` uniform random inputs and fit an L2-regularised (weight ``l2`` per query, i.e.
    nearly unregularised) multinomial logistic regression on phi(x) to them.

    The last column of phi must be the constant bias feature (true of :func:`linear_features` and of
    DP-ERM's feature map). Classes never returned get a bias 1000 below the others, so the stolen
    model never predicts them.
    """
    from scipy import optimize

    start = api.queries
    X = uniform_inputs(int(n_queries), low, high, rng)
    y = api.labels(X)
    F = feature_map(X)
    n, p = F.shape
    K = api.n_classes
    Y = np.zeros((n, K))
    Y[np.arange(n), y] = 1.0
    seen = np.unique(y)

    def objective(flat: np.ndarray) -> tuple[float, np.ndarray]:
        theta = flat.reshape(len(seen), p)
        Z = F @ theta.T
        Z = Z - Z.max(axis=1, keepdims=True)
        logp = Z - np.log(np.exp(Z).sum(axis=1, keepdims=True))
        Ys = Y[:, seen]
        loss = -float((Ys * logp).sum()) / n + 0.5 * l2 * float(flat @ flat)
        g = ((np.exp(logp) - Ys).T @ F) / n + l2 * theta
        return loss, g.ravel()

    if len(seen) == 1:
        full = np.zeros((K, p))
    else:
        res = optimize.minimize(objective, np.zeros(len(seen) * p), jac=True, method="L-BFGS-B",
                                options={"maxiter": 1000})
        full = np.zeros((K, p))
        full[seen] = res.x.reshape(len(seen), p)
    unseen = np.setdiff1d(np.arange(K), seen)
    if unseen.size:
        full[unseen, p - 1] = full[seen, p - 1].min() - 1e3
    theta = canonical(full)
    return ExtractedModel(theta, feature_map, api.queries - start, "label-only retraining",
                          {"classes_seen": int(len(seen)), "l2": l2})


def relative_error(theta_hat: np.ndarray, theta: np.ndarray) -> float:
    """||theta_hat - theta||_F / ||theta||_F."""
    theta = np.asarray(theta, dtype=np.float64)
    return float(np.linalg.norm(np.asarray(theta_hat) - theta) / max(np.linalg.norm(theta), 1e-300))


def agreement(p: np.ndarray, q: np.ndarray) -> float:
    """Fraction of inputs on which two models predict the same label (1 - R, Tramèr et al. Sec. 4)."""
    return float((np.asarray(p).argmax(axis=1) == np.asarray(q).argmax(axis=1)).mean())


def tv_distance(p: np.ndarray, q: np.ndarray) -> float:
    """Mean total-variation distance 0.5 ||p(x) - q(x)||_1 between two models' output distributions."""
    return float(0.5 * np.abs(np.asarray(p) - np.asarray(q)).sum(axis=1).mean())
