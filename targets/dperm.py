"""DP-ERM by output perturbation: L2-regularised logistic regression + Gaussian noise.

Chaudhuri, Monteleoni, Sarwate 2011 ("Differentially private empirical risk minimization", JMLR),
Sec. 3 / Cor. 8: for records with ||x|| <= 1 and labels y in {-1, +1}, the minimiser of

    F_D(theta) = (1/n) sum_i log(1 + exp(-y_i theta.x_i)) + (lambda/2) ||theta||^2

has L2 sensitivity 2/(n lambda) under replacement of one record (the loss is 1-Lipschitz in
theta.x and F is lambda-strongly convex). We add N(0, sigma^2 I) with sigma from the analytic
Gaussian mechanism (Balle & Wang 2018) for (eps, delta); the release is then exactly mu-GDP with
mu = sensitivity / sigma (Dong, Roth, Su 2019, Thm. 2.7), which is the claim audited.

Feature handling (per record, data-independent, so it does not affect the sensitivity proof):
each raw feature vector is scaled to unit L2 norm (the zero vector stays zero) and a constant
bias feature is appended, and the result is divided by sqrt(2): x' = [x/||x||, 1]/sqrt(2), so
||x'|| <= 1. (Scaling by a data-dependent maximum norm would itself leak.)

Labels: ``digits`` is made binary as "digit >= 5" (+1) versus "digit <= 4" (-1), which is balanced
(906 vs 891) and not linearly trivial; ``breast_cancer`` uses scikit-learn's target (1 = benign
-> +1, 0 = malignant -> -1).

Optimisation precision: the minimiser is computed by L-BFGS then polished with Newton steps until
||grad F|| <= ``grad_tol`` (default 1e-10); by strong convexity ||theta - theta*|| <= grad_tol/lambda,
so the noise is calibrated to the effective sensitivity 2/(n lambda) + 2 grad_tol/lambda, which
covers the optimisation error on both neighbouring datasets rigorously. A fit that does not reach
the tolerance raises instead of releasing.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import numpy as np
from scipy import optimize, special

from audit.errors import UserError
from audit.theory.checks import check_delta, check_epsilon
from audit.theory.claims import ApproxDPClaim, GaussianClaim, Neighbouring, PrivacyClaim
from audit.theory.gaussian import analytic_gaussian_sigma
from targets.datasets import load_dataset
from targets.mechanisms import Mechanism

__all__ = ["prepare_features", "binary_labels", "fit_logreg", "predict_proba", "DPERM", "DPERMMechanism",
           "DPERM_TARGETS", "make_dperm", "crafted_canary", "crafted_pair", "DPERM_AUDIT_TARGETS"]


def prepare_features(X: np.ndarray, intercept: bool = True) -> np.ndarray:
    """x' = [x/||x||, 1]/sqrt(2) per record (zero rows give [0, 1]/sqrt(2)); ||x'|| <= 1.

    ``intercept=False``: x' = x/||x|| (no bias feature; zero rows stay zero)."""
    X = np.asarray(X, dtype=np.float64)
    X = X.reshape(X.shape[0], -1)
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    Xn = np.divide(X, norms, out=np.zeros_like(X), where=norms > 0)
    if not intercept:
        return Xn
    return np.hstack([Xn, np.ones((X.shape[0], 1))]) / math.sqrt(2.0)


def binary_labels(dataset: str, y: np.ndarray) -> np.ndarray:
    """Labels in {-1, +1}: digits -> +1 iff digit >= 5; breast_cancer/synthetic (2 classes) -> 2y - 1."""
    y = np.asarray(y)
    if dataset == "digits":
        return np.where(y >= 5, 1.0, -1.0)
    if set(np.unique(y).tolist()) <= {0, 1}:
        return np.where(y == 1, 1.0, -1.0)
    if set(np.unique(y).tolist()) <= {-1, 1}:
        return y.astype(np.float64)
    raise UserError(f"DP-ERM is binary; dataset {dataset!r} has labels {np.unique(y)[:10]}; "
                    "use digits or a 2-class set")


def _objective(theta: np.ndarray, X: np.ndarray, y: np.ndarray, lam: float) -> tuple[float, np.ndarray]:
    m = y * (X @ theta)
    loss = float(np.mean(np.logaddexp(0.0, -m))) + 0.5 * lam * float(theta @ theta)
    w = special.expit(-m)  # -(d/dm) log(1 + e^-m)
    grad = -(X.T @ (y * w)) / X.shape[0] + lam * theta
    return loss, grad


def fit_logreg(X: np.ndarray, y: np.ndarray, l2_reg: float, grad_tol: float = 1e-10,
               max_newton: int = 50) -> tuple[np.ndarray, float]:
    """Exact minimiser of F (see module docstring) on prepared features X and labels in {-1, +1}.

    L-BFGS-B (scipy) to get close, then Newton steps with the exact Hessian
    (1/n) sum_i s(m_i)(1 - s(m_i)) x_i x_i^T + lambda I. Returns (theta, ||grad F(theta)||).
    Raises RuntimeError if ||grad|| > grad_tol at the end.
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if l2_reg <= 0:
        raise UserError(f"DP-ERM needs l2_reg > 0 for strong convexity (got {l2_reg})")
    n, d = X.shape
    res = optimize.minimize(_objective, np.zeros(d), args=(X, y, l2_reg), jac=True, method="L-BFGS-B",
                            options={"maxiter": 5000, "gtol": 1e-12, "ftol": 0.0})
    theta = res.x
    _, g = _objective(theta, X, y, l2_reg)
    for _ in range(max_newton):
        if np.linalg.norm(g) <= grad_tol:
            break
        m = y * (X @ theta)
        s = special.expit(m)
        H = (X.T * (s * (1.0 - s))) @ X / n + l2_reg * np.eye(d)
        theta = theta - np.linalg.solve(H, g)
        _, g = _objective(theta, X, y, l2_reg)
    gnorm = float(np.linalg.norm(g))
    if gnorm > grad_tol:
        raise RuntimeError(f"DP-ERM optimiser stopped at ||grad|| = {gnorm:.3g} > {grad_tol:g}; not releasing")
    return theta, gnorm


class DPERM:
    """Output-perturbation DP-ERM for (eps, delta) with L2 regulariser ``l2_reg`` on n records."""

    neighbouring = Neighbouring.REPLACE

    def __init__(self, epsilon: float, delta: float, l2_reg: float, n: int, grad_tol: float = 1e-10,
                 intercept: bool = True) -> None:
        check_epsilon(epsilon, "DP-ERM epsilon", positive=True)
        check_delta(delta, "DP-ERM delta", positive=True)
        if not (l2_reg > 0):
            raise UserError(f"DP-ERM l2_reg must be positive (got {l2_reg!r})")
        if int(n) != n or n < 1:
            raise UserError(f"DP-ERM needs a positive number of records (got {n!r})")
        self.epsilon = float(epsilon)
        self.delta = float(delta)
        self.l2_reg = float(l2_reg)
        self.n = int(n)
        self.grad_tol = float(grad_tol)
        self.intercept = bool(intercept)
        self.sigma = analytic_gaussian_sigma(self.epsilon, self.delta, self.effective_sensitivity)

    @property
    def sensitivity(self) -> float:
        """2/(n lambda): L2 sensitivity of the exact minimiser (Chaudhuri et al. 2011, Cor. 8)."""
        return 2.0 / (self.n * self.l2_reg)

    @property
    def effective_sensitivity(self) -> float:
        """Sensitivity plus the certified optimisation error on both datasets, 2 grad_tol / lambda."""
        return self.sensitivity + 2.0 * self.grad_tol / self.l2_reg

    @property
    def mu(self) -> float:
        return self.effective_sensitivity / self.sigma

    @property
    def claim(self) -> PrivacyClaim:
        return GaussianClaim(self.mu, neighbouring=Neighbouring.REPLACE,
                             accountant="exact Gaussian DP of output perturbation (mu = sensitivity / sigma)")

    @property
    def nominal_claim(self) -> PrivacyClaim:
        return ApproxDPClaim(self.epsilon, self.delta, neighbouring=Neighbouring.REPLACE,
                             accountant="analytic Gaussian calibration")

    def minimiser(self, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Exact (to grad_tol) non-private minimiser on raw features X and labels in {-1, +1}."""
        Xp = prepare_features(X, self.intercept)
        if Xp.shape[0] != self.n:
            raise UserError(f"this DP-ERM was calibrated for n={self.n} records but got {Xp.shape[0]}")
        return fit_logreg(Xp, y, self.l2_reg, self.grad_tol)[0]

    def release(self, X: np.ndarray, y: np.ndarray, rng: np.random.Generator | int | None,
                n_draws: int = 1) -> np.ndarray:
        """Private parameters: minimiser + N(0, sigma^2 I); shape (d+1,) or (n_draws, d+1)."""
        g = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        theta = self.minimiser(X, y)
        noise = g.normal(0.0, self.sigma, size=(n_draws, theta.size))
        out = theta[None, :] + noise
        return out[0] if n_draws == 1 else out

    def params(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "delta": self.delta, "l2_reg": self.l2_reg, "n": self.n,
                "sensitivity": self.sensitivity, "effective_sensitivity": self.effective_sensitivity,
                "sigma": self.sigma, "mu": self.mu, "grad_tol": self.grad_tol, "intercept": self.intercept}


def predict_proba(theta: np.ndarray, X: np.ndarray, intercept: bool = True) -> np.ndarray:
    """P(y = +1 | x) for raw features X (prepared as in training)."""
    return special.expit(prepare_features(X, intercept) @ np.asarray(theta))


def crafted_canary(X: np.ndarray, intercept: bool = True) -> np.ndarray:
    """A raw canary feature vector along the direction the data use least: the right singular vector
    of the normalised features with the smallest singular value (for digits, a pixel that is always
    0). Its two labels make a neighbouring pair whose minimisers differ far more than for a random
    replacement (docs/references.md, "Pitfalls": random replacements are far from the sensitivity bound)."""
    Xn = prepare_features(X, intercept)
    Xn = Xn[:, :-1] if intercept else Xn
    _, _, vt = np.linalg.svd(Xn, full_matrices=True)
    u = vt[-1]
    return u / np.linalg.norm(u)


_PAIR_CACHE: dict[str, dict[str, Any]] = {}

#: Angles (radians) tried by :func:`crafted_pair`.
PAIR_ANGLES = (0.2, 0.25, 0.29, 0.33, 0.38, 0.45, 0.6)


def crafted_pair(X: np.ndarray, y: np.ndarray, l2_reg: float, intercept: bool = True,
                 angles: tuple[float, ...] = PAIR_ANGLES, grad_tol: float = 1e-10) -> dict[str, Any]:
    """A replace-one canary pair crafted to push the minimiser close to the sensitivity 2/(n lambda).

    The sensitivity proof (Chaudhuri et al. 2011, Cor. 8) bounds ||theta0 - theta1|| by
    ||grad l(z0) - grad l(z1)|| / (n lambda) <= 2/(n lambda) with the gradients at a common point.
    A label flip of one input reaches only half of it: ``grad l(x, +1) - grad l(x, -1) = x``.
    To approach 2 we need both canaries' loss gradients near unit norm (both *misclassified* at the
    optimum) and pointing in opposite directions along a direction ``u`` where the data have no
    curvature (so strong convexity is only lambda there). Take ``u`` = the least-used direction
    (:func:`crafted_canary`) and ``v`` = minus the non-private minimiser's direction (so
    ``theta . v << 0``), and replace ``z0 = (cos a u + sin a v, +1)`` by ``z1 = (cos a u - sin a v, -1)``:
    both have margin about ``-||theta|| sin a`` and gradients ``-x0`` and ``+x1`` whose difference is
    ``2 cos a u``. The angle ``a`` trades the margin against ``cos a``; the best of ``angles`` is
    kept by fitting both minimisers (the audit is white-box: the auditor knows the data).

    Returns {"x0", "y0", "x1", "y1", "angle", "shift", "theta0", "theta1"} (raw features, labels
    in {-1, +1}; n = len(X) + 1 records per world).
    """
    X = np.asarray(X, dtype=np.float64).reshape(len(X), -1)
    y = np.asarray(y, dtype=np.float64)
    key = hashlib.sha256(X.tobytes() + y.tobytes() + repr((float(l2_reg), bool(intercept), tuple(angles),
                                                             float(grad_tol))).encode()).hexdigest()
    if key in _PAIR_CACHE:  # the minimisers do not depend on epsilon: a sweep crafts once
        return dict(_PAIR_CACHE[key])
    u = crafted_canary(X, intercept)
    theta, _ = fit_logreg(prepare_features(X, intercept), y, l2_reg, grad_tol)
    v = -(theta[:-1] if intercept else theta)
    v = v - (v @ u) * u
    if np.linalg.norm(v) < 1e-12:
        raise UserError("the base data give a zero minimiser; cannot craft a canary pair")
    v = v / np.linalg.norm(v)
    best: dict[str, Any] | None = None
    for a in angles:
        x0 = math.cos(a) * u + math.sin(a) * v
        x1 = math.cos(a) * u - math.sin(a) * v
        t0, _ = fit_logreg(prepare_features(np.vstack([X, x0]), intercept), np.append(y, 1.0), l2_reg, grad_tol)
        t1, _ = fit_logreg(prepare_features(np.vstack([X, x1]), intercept), np.append(y, -1.0), l2_reg, grad_tol)
        shift = float(np.linalg.norm(t1 - t0))
        if best is None or shift > best["shift"]:
            best = {"x0": x0, "y0": 1.0, "x1": x1, "y1": -1.0, "angle": float(a), "shift": shift,
                    "theta0": t0, "theta1": t1}
    _PAIR_CACHE[key] = best
    return dict(best)


class DPERMMechanism(Mechanism):
    """DP-ERM as an auditable mechanism on a fixed base dataset with a crafted canary.

    ``dataset`` arguments are tuples (X, y) with labels in {-1, +1}. D0 = base + (canary, +1),
    D1 = base + (canary, -1) (replace-one neighbours: same n). ``score`` is the projection of the
    released parameters on theta*(D1) - theta*(D0): the Neyman-Pearson test for the Gaussian pair.
    ``pair_claim`` is G_{||theta*(D1) - theta*(D0)|| / sigma}, exact for the pair.
    """

    neighbouring = Neighbouring.REPLACE
    output_kind = "vector"
    gaussian_output = True

    def __init__(self, name: str, X: np.ndarray, y: np.ndarray, epsilon: float = 1.0, delta: float = 1e-5,
                 l2_reg: float = 1e-2, intercept: bool = True, pair: str = "label-flip") -> None:
        if pair not in ("label-flip", "crafted-pair"):
            raise UserError(f"unknown DP-ERM canary pair {pair!r}; use label-flip or crafted-pair")
        self.name = name
        X = np.asarray(X, dtype=np.float64).reshape(len(X), -1)
        y = np.asarray(y, dtype=np.float64)
        self.base_X = X
        self.base_y = y
        self.pair = pair
        self.canary = crafted_canary(X, intercept)
        self.erm = DPERM(epsilon, delta, l2_reg, n=X.shape[0] + 1, intercept=intercept)
        self._theta: dict[int, np.ndarray] = {}
        self._pair: dict[str, Any] | None = None
        if pair == "crafted-pair":
            self._pair = crafted_pair(X, y, l2_reg, intercept, grad_tol=self.erm.grad_tol)
            self._theta = {0: self._pair["theta0"], 1: self._pair["theta1"]}

    @property
    def sensitivity(self) -> float:
        return self.erm.sensitivity

    @property
    def claim(self) -> PrivacyClaim:
        return self.erm.claim

    @property
    def nominal_claim(self) -> PrivacyClaim:
        return self.erm.nominal_claim

    def neighbouring_pair(self) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
        if self._pair is not None:
            p = self._pair
            return ((np.vstack([self.base_X, p["x0"][None, :]]), np.append(self.base_y, p["y0"])),
                    (np.vstack([self.base_X, p["x1"][None, :]]), np.append(self.base_y, p["y1"])))
        X = np.vstack([self.base_X, self.canary[None, :]])
        return (X, np.append(self.base_y, 1.0)), (X, np.append(self.base_y, -1.0))

    def _pair_thetas(self) -> tuple[np.ndarray, np.ndarray]:
        if not self._theta:
            d0, d1 = self.neighbouring_pair()
            self._theta[0] = self.erm.minimiser(*d0)
            self._theta[1] = self.erm.minimiser(*d1)
        return self._theta[0], self._theta[1]

    def minimiser_shift(self) -> float:
        """||theta*(D1) - theta*(D0)||, at most the sensitivity 2/(n lambda)."""
        t0, t1 = self._pair_thetas()
        return float(np.linalg.norm(t1 - t0))

    def sample(self, dataset: tuple[np.ndarray, np.ndarray], n: int,
               rng: np.random.Generator | int | None) -> np.ndarray:
        X, y = dataset
        return self.erm.release(X, y, rng, n_draws=int(n)).reshape(int(n), -1)

    def score(self, outputs: np.ndarray) -> np.ndarray:
        t0, t1 = self._pair_thetas()
        u = (t1 - t0) / max(np.linalg.norm(t1 - t0), 1e-300)
        return np.asarray(outputs, dtype=np.float64) @ u

    def pair_claim(self) -> PrivacyClaim:
        return GaussianClaim(self.minimiser_shift() / self.erm.sigma, neighbouring=Neighbouring.REPLACE,
                             accountant="exact (Gaussian pair at the crafted canary)")

    def params(self) -> dict[str, Any]:
        p = self.erm.params()
        p["minimiser_shift"] = self.minimiser_shift()
        p["canary_pair"] = self.pair
        if self._pair is not None:
            p["pair_angle"] = self._pair["angle"]
        return p

    @property
    def description(self) -> str:
        return (f"DP-ERM logistic regression (lambda={self.erm.l2_reg:g}, n={self.erm.n}), Gaussian output "
                f"perturbation for ({self.erm.epsilon:g}, {self.erm.delta:g})-DP, replace-one")


DPERM_TARGETS: dict[str, dict[str, Any]] = {
    "dperm_digits": {"dataset": "digits", "epsilon": 1.0, "delta": 1e-5, "l2_reg": 1e-2,
                     "description": "DP-ERM logistic regression on digits (>= 5 vs <= 4), (1, 1e-5)-DP"},
    "dperm_breast_cancer": {"dataset": "breast_cancer", "epsilon": 1.0, "delta": 1e-5, "l2_reg": 1e-2,
                            "description": "DP-ERM logistic regression on breast cancer (benign vs malignant), "
                                           "(1, 1e-5)-DP"},
}

#: DP-ERM variants used by the tightness audits (``run dp``), kept apart from DPERM_TARGETS because
#: their feature map differs (no intercept): code that prepares features for DPERM_TARGETS keeps working.
DPERM_AUDIT_TARGETS: dict[str, dict[str, Any]] = {
    "dperm_digits_nobias": {"dataset": "digits", "epsilon": 1.0, "delta": 1e-5, "l2_reg": 3e-4, "intercept": False,
                            "description": "DP-ERM logistic regression on digits without intercept (lambda 3e-4), "
                                           "(1, 1e-5)-DP; the audit target for tight crafted-pair audits"},
}


def make_dperm(name: str, epsilon: float | None = None, delta: float | None = None,
               l2_reg: float | None = None, pair: str = "label-flip") -> DPERMMechanism:
    """Build a registered DP-ERM target on its full scikit-learn dataset plus the crafted canary."""

    specs = DPERM_TARGETS | DPERM_AUDIT_TARGETS
    if name not in specs:
        raise UserError(f"unknown DP-ERM target {name!r}; choose one of {', '.join(specs)}")
    spec = specs[name]
    ds = load_dataset(spec["dataset"])
    y = binary_labels(spec["dataset"], ds.y)
    return DPERMMechanism(name, ds.X, y, epsilon=spec["epsilon"] if epsilon is None else epsilon,
                          delta=spec["delta"] if delta is None else delta,
                          l2_reg=spec["l2_reg"] if l2_reg is None else l2_reg,
                          intercept=spec.get("intercept", True), pair=pair)
