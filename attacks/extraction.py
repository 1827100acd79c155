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
system per class (Sec. 4.1.1, "equation-solving"). Rounded outputs break the equations: most
probabilities of a model with many features round to 0 or 1 (MNIST, d = 784), and a log-ratio of
a rounded output carries an error. Tramèr et al. then solve over more queries (Sec. 4.1; the
effect of rounding, Sec. 6.4). :func:`rounded_extraction` chooses the queries to avoid saturation
(:func:`informative_box`: the largest box about the least saturated input in which the rounded
outputs stay non-zero), solves the log-ratio equations by weighted least squares, each weighted by
the inverse of its first-order (delta-method) standard deviation under uniform rounding error
``u ~ U(-10^-K/2, 10^-K/2)`` (``sd(log p) ~ 10^-K / (sqrt(12) p)``), and doubles the queries until
the solution stops moving (relative change below ``tol`` between successive doublings, a rule the
thief can apply without knowing the model). The label-only baseline (Sec. 5, "uniform retraining")
queries only the predicted labels of uniform random inputs and fits a logistic regression to them.

Fidelity figures (Sec. 4 / Jagielski et al. 2020): agreement of predicted labels on test data and
on uniform random inputs (``1 - R_test``, ``1 - R_unif``) and the mean total-variation distance
between the two models' output distributions.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize

from audit.errors import UserError

FeatureMap = Callable[[np.ndarray], np.ndarray]

__all__ = ["PredictionAPI", "ExtractedModel", "linear_features", "softmax", "canonical", "equation_solving",
           "rounded_extraction", "label_only_retraining", "informative_box", "agreement", "tv_distance",
           "relative_error", "uniform_inputs"]

#: Rounded extraction stops when a doubling of the queries moves the fit by less than this (relative).
ROUNDED_TOL = 0.01
#: ... or when it has used this many multiples of dim phi in fitting queries.
ROUNDED_MAX_FACTOR = 64


def linear_features(X: np.ndarray) -> np.ndarray:
    """phi(x) = [x, 1]: the feature map of a plain (multinomial) logistic regression.

    Args:
        X: inputs (n, d).

    Returns:
        Features (n, d + 1).
    """
    X = np.asarray(X, dtype=np.float64).reshape(len(X), -1)
    return np.hstack([X, np.ones((X.shape[0], 1))])


def softmax(logits: np.ndarray) -> np.ndarray:
    """Numerically stable softmax over the last axis (float64).

    Args:
        logits: logits (..., K).

    Returns:
        Probabilities (..., K), float64.
    """
    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def canonical(theta: np.ndarray) -> np.ndarray:
    """Canonical parameters ``theta_k - theta_0`` (rows 1..K-1) of a (K, p) softmax parameter matrix.

    Args:
        theta: a (K, p) parameter matrix.

    Returns:
        The (K - 1, p) canonical parameters.
    """
    theta = np.asarray(theta, dtype=np.float64)
    return theta[1:] - theta[:1]


def uniform_inputs(n: int, low: np.ndarray, high: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``n`` inputs drawn uniformly from the box [low, high] (per feature).

    Args:
        n: the number of inputs.
        low: the smallest value of each feature (d,).
        high: the largest value of each feature (d,).
        rng: the generator.

    Returns:
        Inputs (n, d).
    """
    low = np.asarray(low, dtype=np.float64)
    high = np.asarray(high, dtype=np.float64)
    return low + (high - low) * rng.random((int(n), low.size))


class PredictionAPI:
    """A black-box prediction API: class-probability vectors for a batch of inputs.

    ``predict_proba`` maps raw inputs (n, d) to probabilities (n, K). When ``round_decimals`` is
    set, outputs are rounded to that many decimals, as deployed APIs do (Tramèr et al. Sec. 6.1).
    Every row sent is counted in ``queries``; ``labels`` returns only the arg-max class (a
    label-only API) and counts the same way.

    Args:
        predict_proba: the model, inputs (n, d) to probabilities (n, K).
        n_features: d.
        n_classes: K.
        round_decimals: the decimals outputs are rounded to (0 to 15), or None for exact outputs.

    Raises:
        UserError: a number of decimals outside 0 to 15.
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
        """Predicted labels only (label-only API).

        Args:
            X: inputs (n, d).

        Returns:
            The arg-max classes (n,).
        """
        X = np.asarray(X, dtype=np.float64).reshape(-1, self.n_features)
        self.queries += X.shape[0]
        return np.asarray(self._predict(X)).argmax(axis=1)


@dataclass
class ExtractedModel:
    """A stolen softmax regression in canonical form: ``theta`` (K-1, p) over ``feature_map``.

    Attributes:
        theta: the canonical parameters, (K-1, p).
        feature_map: phi, the feature map the parameters act on.
        queries: the queries the extraction spent (probes included).
        method: the extraction method.
        details: method-specific figures (rounds, convergence, ...).
    """

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


def _normal_equations(F: np.ndarray, P: np.ndarray, decimals: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Normal equations of the weighted least squares over the log-ratios against each query's arg-max class.

    Unknowns: canonical rows theta_1..theta_{K-1} (theta_0 = 0). Equation for query i, class k != r_i
    (r_i = arg-max) with p_ik > 0: (theta_k - theta_{r_i}) . phi_i = log p_ik - log p_ir_i, weight
    1 / sd with sd = u sqrt(1/p_ik^2 + 1/p_ir^2), u = 10^-K / sqrt(12) (delta method). Outputs rounded
    to 0 carry only an inequality and are dropped. Returns (A^T W^2 A, A^T W^2 b, equations used),
    assembled block by block without forming A: an equation between classes a and r contributes
    w^2 phi phi^T to blocks (a, a) and (r, r) and minus it to (a, r) and (r, a); block 0 is fixed.
    """
    n, p = F.shape
    K = P.shape[1]
    u = 10.0 ** (-decimals) / math.sqrt(12.0)
    ref = P.argmax(axis=1)
    p_ref = P[np.arange(n), ref]
    normal = np.zeros(((K - 1) * p, (K - 1) * p))
    rhs = np.zeros((K - 1) * p)
    used = 0
    for a in range(K):
        for r in range(K):
            sel = np.flatnonzero((P[:, a] > 0) & (ref == r) & (ref != a))
            if sel.size == 0:
                continue
            used += sel.size
            b = np.log(P[sel, a]) - np.log(p_ref[sel])
            w2 = 1.0 / (u * u * (1.0 / P[sel, a] ** 2 + 1.0 / p_ref[sel] ** 2))
            Fs = F[sel]
            M = (Fs * w2[:, None]).T @ Fs
            v = Fs.T @ (w2 * b)
            for x, y, sign in ((a, a, 1.0), (r, r, 1.0), (a, r, -1.0), (r, a, -1.0)):
                if x > 0 and y > 0:
                    normal[(x - 1) * p:x * p, (y - 1) * p:y * p] += sign * M
            if a > 0:
                rhs[(a - 1) * p:a * p] += v
            if r > 0:
                rhs[(r - 1) * p:r * p] -= v
    return normal, rhs, used


def _solve_normal(normal: np.ndarray, rhs: np.ndarray, p: int) -> np.ndarray:
    """The weighted least-squares solution (K-1, p); UserError when some class is not determined."""
    try:
        sol = np.linalg.solve(normal, rhs)
    except np.linalg.LinAlgError:
        sol = None
    if sol is None or not np.all(np.isfinite(sol)):
        raise UserError("the rounded outputs do not determine every class's parameters (too few non-zero "
                        "probabilities); use more queries (--queries) or more decimals (--round)")
    return sol.reshape(-1, p)


def _spread(P: np.ndarray) -> np.ndarray:
    """Sort key of rounded outputs by how much they say: non-zero classes first, then entropy."""
    with np.errstate(divide="ignore", invalid="ignore"):
        entropy = -np.where(P > 0, P * np.log(P), 0.0).sum(axis=1)
    return (P > 0).sum(axis=1) + entropy / (1.0 + np.log(P.shape[1]))


def informative_box(api: PredictionAPI, low: np.ndarray, high: np.ndarray, rng: np.random.Generator,
                    probe: int = 20, target: float = 0.99,
                    max_shrinks: int = 60) -> tuple[np.ndarray, np.ndarray, float]:
    """Choose a query box in which rounded outputs are not saturated.

    A probability rounded to 0 gives no equation, and dropping it biases the others (a saturated model
    on uniform inputs, e.g. softmax regression on 784 MNIST pixels, rounds most to 0 or 1). The centre
    is the point of the diagonal ``low + t (high - low)`` (t = 0, 2^-10, ..., 1/2, 1) whose rounded
    output keeps the most classes non-zero (then the largest entropy); if every one is saturated, a
    point near a decision boundary, found by bisection on the segment between two probe inputs with
    different labels (the line search of Tramèr et al. 2016, Sec. 4.2). The box about the centre
    (clipped to [low, high]) then shrinks by a factor sqrt(2) until, on ``probe`` random queries, at
    least ``target`` of the centre's non-zero classes stay non-zero: the largest box, so the largest
    signal per query, without saturation. Every probe is counted by the API. Returns (low, high, scale).

    Args:
        api: the prediction API (it counts the queries).
        low: the smallest value of each feature (d,).
        high: the largest value of each feature (d,).
        rng: the generator of the queries.
        probe: the random queries per trial box.
        target: the fraction of the centre's non-zero classes that must stay non-zero.
        max_shrinks: the most times the box shrinks.

    Returns:
        (low, high, scale) of the box.
    """
    low = np.asarray(low, dtype=np.float64)
    high = np.asarray(high, dtype=np.float64)
    half = (high - low) / 2
    diagonal = low + np.concatenate([[0.0], np.geomspace(2.0 ** -10, 1.0, 11)])[:, None] * (high - low)
    P = api(diagonal)
    best = int(np.argmax(_spread(P)))
    centre, alive = diagonal[best], P[best] > 0
    if alive.sum() < 2:
        for _ in range(max_shrinks):  # probe until two labels are seen
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
                if (P[0] > 0).sum() >= 2:
                    centre, alive = mid, P[0] > 0
                    break
                if P[0].argmax() == labels[0]:
                    a = mid
                else:
                    b = mid
    scale = 1.0
    for _ in range(max_shrinks):
        box_low, box_high = np.maximum(low, centre - scale * half), np.minimum(high, centre + scale * half)
        if (api(uniform_inputs(probe, box_low, box_high, rng))[:, alive] > 0).mean() >= target:
            break
        scale /= math.sqrt(2.0)
    return np.maximum(low, centre - scale * half), np.minimum(high, centre + scale * half), scale


def equation_solving(api: PredictionAPI, feature_map: FeatureMap, low: np.ndarray, high: np.ndarray,
                     rng: np.random.Generator, n_queries: int | None = None) -> ExtractedModel:
    """Equation-solving extraction (Tramèr et al. 2016, Sec. 4.1.1) of a softmax / binary LR from exact
    outputs: ``n_queries`` uniform random inputs from [low, high] (default ``p = dim phi``, i.e. d + 1)
    and the log-ratio equations solved exactly (least squares when overdetermined). Rounded outputs:
    :func:`rounded_extraction`.

    Args:
        api: the prediction API (it counts the queries).
        feature_map: phi, inputs (n, d) to features (n, p), the last the constant bias feature.
        low: the smallest value of each feature (d,).
        high: the largest value of each feature (d,).
        rng: the generator of the queries.
        n_queries: the number of queries (default p).

    Returns:
        The extracted model.

    Raises:
        UserError: fewer than p queries, or zero probabilities in the outputs.
        ValueError: an API that rounds its outputs.
    """
    if api.round_decimals is not None:
        raise ValueError("the API rounds its outputs: use rounded_extraction")
    p = feature_map(np.asarray(low, dtype=np.float64)[None]).shape[1]
    n = int(n_queries) if n_queries is not None else p
    if n < p:
        raise UserError(f"equation solving needs at least {p} queries (d + 1) for this model, got {n}")
    start = api.queries
    X = uniform_inputs(n, low, high, rng)
    F = feature_map(X)
    theta = _solve_exact(F, api(X))
    details = {"equations": n * (api.n_classes - 1), "solver": "linear solve" if n == p else "least squares",
               "condition_number": float(np.linalg.cond(F))}
    return ExtractedModel(theta, feature_map, api.queries - start, "equation-solving", details)


def rounded_extraction(api: PredictionAPI, feature_map: FeatureMap, low: np.ndarray, high: np.ndarray,
                       rng: np.random.Generator, n_queries: int | None = None, tol: float = ROUNDED_TOL,
                       max_queries: int | None = None) -> ExtractedModel:
    """Extraction from rounded outputs (Tramèr et al. 2016, Sec. 4.1 with rounding, Sec. 6.4): queries
    drawn uniformly from the unsaturated box of :func:`informative_box`, log-ratio equations solved by
    weighted least squares (:func:`_normal_equations`).

    With ``n_queries`` exactly that many queries are used. Otherwise the thief starts with ``2 p``
    queries (``p = dim phi``) and doubles them, adding each batch to the normal equations, until the
    solution moves by less than ``tol`` (relative) — a rule it can apply without knowing the model — or
    ``max_queries`` (default ``ROUNDED_MAX_FACTOR p``) equation queries are used. ``queries`` counts
    the probes that sized the box too; ``details["rounds"]`` lists each round's cumulative equation
    queries and relative change, ``details["converged"]`` whether the rule stopped it.

    Args:
        api: the prediction API (it counts the queries).
        feature_map: phi, inputs (n, d) to features (n, p), the last the constant bias feature.
        low: the smallest value of each feature (d,).
        high: the largest value of each feature (d,).
        rng: the generator of the queries.
        n_queries: exactly this many equation queries; None to double until the solution settles.
        tol: the relative change at which the doubling stops.
        max_queries: the most equation queries (default ``ROUNDED_MAX_FACTOR p``).

    Returns:
        The extracted model.

    Raises:
        UserError: fewer than p queries, or outputs that do not determine every class.
        ValueError: an API with exact outputs.
    """
    if api.round_decimals is None:
        raise ValueError("the API returns exact outputs: use equation_solving")
    p = feature_map(np.asarray(low, dtype=np.float64)[None]).shape[1]
    if n_queries is not None and n_queries < p:
        raise UserError(f"rounded extraction needs at least {p} queries (d + 1) for this model, got {n_queries}")
    limit = int(max_queries) if max_queries is not None else ROUNDED_MAX_FACTOR * p
    start = api.queries
    box_low, box_high, scale = informative_box(api, low, high, rng)
    probes = api.queries - start
    normal, rhs, equations, used, rounds = 0.0, 0.0, 0, 0, []
    theta, batch = None, int(n_queries) if n_queries is not None else 2 * p
    while True:
        X = uniform_inputs(batch, box_low, box_high, rng)
        part = _normal_equations(feature_map(X), api(X), api.round_decimals)
        normal, rhs, equations, used = normal + part[0], rhs + part[1], equations + part[2], used + batch
        fitted = _solve_normal(normal, rhs, p)
        change = None if theta is None else relative_error(fitted, theta)
        theta = fitted
        rounds.append({"queries": used, "relative_change": change})
        if n_queries is not None or (change is not None and change < tol) or 2 * used > limit:
            break
        batch = used
    converged = change is not None and change < tol
    details = {"round_decimals": api.round_decimals, "solver": "weighted least squares on log-ratios",
               "equations": equations, "box_scale": scale, "probe_queries": probes, "equation_queries": used,
               "rounds": rounds, "tol": tol, "converged": converged}
    return ExtractedModel(theta, feature_map, api.queries - start, "rounded equation solving", details)


def label_only_retraining(api: PredictionAPI, feature_map: FeatureMap, low: np.ndarray, high: np.ndarray,
                          rng: np.random.Generator, n_queries: int, l2: float = 1e-4) -> ExtractedModel:
    """Label-only baseline (Tramèr et al. 2016, Sec. 5, uniform retraining): query the labels of
    ``n_queries`` uniform random inputs and fit an L2-regularised (weight ``l2`` per query, i.e.
    nearly unregularised) multinomial logistic regression on phi(x) to them.

    The last column of phi must be the constant bias feature (true of :func:`linear_features` and of
    DP-ERM's feature map). Classes never returned get a bias 1000 below the others, so the stolen
    model never predicts them.

    Args:
        api: the prediction API (it counts the queries).
        feature_map: phi, inputs (n, d) to features (n, p), the last the constant bias feature.
        low: the smallest value of each feature (d,).
        high: the largest value of each feature (d,).
        rng: the generator of the queries.
        n_queries: the number of label queries.
        l2: the L2 weight per query.

    Returns:
        The extracted model.
    """

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
    """||theta_hat - theta||_F / ||theta||_F.

    Args:
        theta_hat: the stolen parameters.
        theta: the true parameters, of the same shape.

    Returns:
        The relative Frobenius error.
    """
    theta = np.asarray(theta, dtype=np.float64)
    return float(np.linalg.norm(np.asarray(theta_hat) - theta) / max(np.linalg.norm(theta), 1e-300))


def agreement(p: np.ndarray, q: np.ndarray) -> float:
    """Fraction of inputs on which two models predict the same label (1 - R, Tramèr et al. Sec. 4).

    Args:
        p: one model's probabilities (n, K).
        q: the other's (n, K).

    Returns:
        The fraction in [0, 1].
    """
    return float((np.asarray(p).argmax(axis=1) == np.asarray(q).argmax(axis=1)).mean())


def tv_distance(p: np.ndarray, q: np.ndarray) -> float:
    """Mean total-variation distance 0.5 ||p(x) - q(x)||_1 between two models' output distributions.

    Args:
        p: one model's probabilities (n, K).
        q: the other's (n, K).

    Returns:
        The mean distance in [0, 1].
    """
    return float(0.5 * np.abs(np.asarray(p) - np.asarray(q)).sum(axis=1).mean())
