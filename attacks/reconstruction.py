"""Reconstruction attacks of an informed adversary: scores and reconstructions only.

The informed adversary [Balle, Cherubin, Hayes, S&P 2022, "Reconstructing training data with
informed adversaries"] knows every training record but one (the target) and the training
algorithm, and reconstructs the target from the released output. Its success is what the ReRo
bound ``1 - f(kappa)`` of :mod:`audit.theory.rero` caps [Hayes, Mahloujifar, Balle, NeurIPS 2023].
Formulas and sources: docs/references.md, "Reconstruction robustness".

* DP-SGD with access to every noisy update (:func:`update_log_likelihoods`,
  :func:`informed_update_guess`): the adversary subtracts the known clipped sum of the other
  records and ranks candidates by the likelihood of the residuals under the subsampled Gaussian
  mechanism (the Bayes-optimal rule for a uniform prior over the candidates).
* Output-perturbed GLMs (:func:`reconstruct_glm_record`, :func:`select_glm_candidate`): the
  released minimiser's first-order condition gives the missing record's gradient, hence the
  record (Balle, Cherubin, Hayes 2022, informed adversaries against GLMs), for the model of :mod:`targets.dperm`.
* Simulated games on the mechanisms themselves (:func:`gaussian_reconstruction_game`,
  :func:`dpsgd_reconstruction_game`) with candidate arrangements (:func:`candidate_arrangement`)
  and the exact success of the optimal attack on them (:func:`arrangement_success_probability`),
  to compare with the bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import integrate, special, stats

from audit.errors import UserError
from audit.stats.rates import cp_lower, cp_upper

__all__ = ["update_log_likelihoods", "informed_update_guess", "ARRANGEMENTS", "candidate_arrangement",
           "arrangement_success_probability", "GameOutcome", "gaussian_reconstruction_game",
           "dpsgd_reconstruction_game", "logistic_gradients", "missing_record_gradient", "GLMReconstruction",
           "reconstruct_glm_record", "select_glm_candidate", "GLM_METRICS",
           "summed_update_log_likelihoods"]

Seed = np.random.Generator | int
#: Rounds simulated at once by :func:`dpsgd_reconstruction_game`: bounds memory; the draws, made batch by
#: batch in a fixed order, are a function of the seed and of this constant.
_GAME_BATCH = 64


def _generator(rng: Seed) -> np.random.Generator:
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, bool) or not isinstance(rng, int | np.integer):
        raise UserError(f"pass a seed (int) or a numpy Generator for reproducible games (got {rng!r})")
    return np.random.default_rng(int(rng))


def _whole(value: Any, name: str, minimum: int) -> int:
    """``value`` as an int >= ``minimum``; a one-line UserError otherwise."""
    try:
        ok = not isinstance(value, bool) and int(value) == value >= minimum
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok:
        raise UserError(f"{name} must be an integer of at least {minimum} (got {value!r})")
    return int(value)


def _check_rate_noise(sample_rate: float, noise_std: float) -> tuple[float, float]:
    q, s = float(sample_rate), float(noise_std)
    if not (0.0 < q <= 1.0):
        raise UserError(f"sample_rate must lie in (0, 1] (got {sample_rate!r}); 1 for full-batch updates")
    if not (0.0 < s < math.inf):
        raise UserError(f"noise_std must be positive and finite (got {noise_std!r}); DP-SGD's is sigma * C")
    return q, s


# --------------------------------------------------------------------------- DP-SGD, update access


def update_log_likelihoods(residuals: ArrayLike, candidate_grads: ArrayLike, sample_rate: float,
                           noise_std: float) -> np.ndarray:
    """Log-likelihood of each candidate target given the residual updates, up to a common constant.

    With access to every noisy update ``y_t`` and knowledge of the other records, the adversary forms
    ``r_t = y_t - others_t`` = ``b_t g_t(c) + N(0, s^2 I)`` with ``b_t ~ Bernoulli(q)`` (Poisson
    sampling; ``q = 1`` full batch), ``s = sigma C`` and ``g_t(c)`` the target candidate's clipped
    gradient [Abadi et al. 2016, Alg. 1; Hayes, Mahloujifar, Balle 2023; Balle, Cherubin,
    Hayes 2022]. The likelihood of candidate c is
    ``prod_t [(1 - q) N(r_t; 0, s^2 I) + q N(r_t; g_t(c), s^2 I)]``; dividing by the common factor
    ``prod_t N(r_t; 0, s^2 I)`` leaves

        sum_t log((1 - q) + q exp((<r_t, g_t(c)> - ||g_t(c)||^2 / 2) / s^2)),

    returned per candidate (log-sum-exp: stable for any noise). docs/references.md, "Reconstruction
    robustness". ``residuals``: (T, d), or (..., T, d) for a batch of independent observations;
    ``candidate_grads``: (n_candidates, T, d), or (n_candidates, d) for gradients that are the same at
    every step (e.g. Dirac canaries; one matrix product). Returns (n_candidates,), or (..., n_candidates).

    Args:
        residuals: the residual updates, (T, d) or (..., T, d).
        candidate_grads: the candidates' clipped gradients, (n_candidates, T, d) or (n_candidates, d).
        sample_rate: q, in (0, 1] (1 for full batch).
        noise_std: s = sigma C, positive and finite.

    Returns:
        The log-likelihoods, (n_candidates,) or (..., n_candidates).

    Raises:
        UserError: arrays of the wrong shapes or non-finite values, or q or s out of range.
    """
    q, s = _check_rate_noise(sample_rate, noise_std)
    r = np.asarray(residuals, dtype=np.float64)
    g = np.asarray(candidate_grads, dtype=np.float64)
    steps_ok = g.ndim == 2 or (g.ndim == 3 and r.ndim >= 2 and g.shape[1] == r.shape[-2])
    if r.ndim < 2 or not steps_ok or g.shape[0] < 1 or g.shape[-1] != r.shape[-1]:
        raise UserError(f"residuals must be (T, d) and candidate_grads (n_candidates, T, d) or (n_candidates, d); "
                        f"got {r.shape} and {g.shape}")
    if not (np.all(np.isfinite(r)) and np.all(np.isfinite(g))):
        raise UserError("residuals and candidate gradients must be finite")
    if g.ndim == 2:  # the same gradient at every step
        inner = r @ g.T
        sq = np.sum(g * g, axis=1)
    else:
        inner = np.einsum("ctd,...td->...tc", g, r)
        sq = np.einsum("ctd,ctd->tc", g, g)
    z = (inner - 0.5 * sq) / (s * s)  # (..., T, n_candidates)
    if q == 1.0:
        return z.sum(axis=-2)
    return np.logaddexp(math.log1p(-q), math.log(q) + z).sum(axis=-2)


def informed_update_guess(residuals: ArrayLike, candidate_grads: ArrayLike, sample_rate: float,
                          noise_std: float) -> int | np.ndarray:
    """Index of the most likely candidate (:func:`update_log_likelihoods`): the maximum-a-posteriori guess
    for a uniform prior, the optimal attack in the n-candidate ReRo game (docs/references.md,
    "Reconstruction robustness"). An int for one (T, d) observation, an array for a batch (..., T, d).

    Args:
        residuals: the residual updates, (T, d) or (..., T, d).
        candidate_grads: the candidates' clipped gradients, (n_candidates, T, d) or (n_candidates, d).
        sample_rate: q, in (0, 1] (1 for full batch).
        noise_std: s = sigma C, positive and finite.

    Returns:
        The guessed candidate's index (an int, or an array for a batch).

    Raises:
        UserError: as :func:`update_log_likelihoods`.
    """
    guess = np.argmax(update_log_likelihoods(residuals, candidate_grads, sample_rate, noise_std), axis=-1)
    return int(guess) if guess.ndim == 0 else guess


# --------------------------------------------------------------------------- games on the mechanisms

#: Candidate arrangements: "simplex" = regular simplex centred on the absent record, every vertex at norm
#: ``norm`` (pairwise distance norm * sqrt(2n/(n-1)): the best-separated n points the norm bound allows);
#: "orthogonal" = ``norm`` times one-hot vectors (pairwise distance norm * sqrt(2)).
ARRANGEMENTS = ("simplex", "orthogonal")


def candidate_arrangement(n_candidates: int, kind: str = "simplex", norm: float = 1.0) -> np.ndarray:
    """``n`` candidate vectors in R^n (rows), each of L2 norm ``norm`` (see :data:`ARRANGEMENTS`).

    Args:
        n_candidates: n.
        kind: ``"simplex"`` or ``"orthogonal"``.
        norm: each candidate's L2 norm, positive and finite.

    Returns:
        The candidates, (n, n).

    Raises:
        UserError: an unknown kind or a bad norm.
    """
    if kind not in ARRANGEMENTS:
        raise UserError(f"unknown candidate arrangement {kind!r}; use one of {', '.join(ARRANGEMENTS)}")
    n = _whole(n_candidates, "the number of candidates", 2)
    if not (0.0 < float(norm) < math.inf):
        raise UserError(f"candidate norm must be positive and finite (got {norm!r})")
    eye = np.eye(n)
    if kind == "orthogonal":
        return float(norm) * eye
    centred = eye - 1.0 / n
    return float(norm) * centred / math.sqrt(1.0 - 1.0 / n)


def arrangement_success_probability(n_candidates: int, mu: float, kind: str = "simplex") -> float:
    """Exact success of the optimal (nearest-candidate) attack on :func:`candidate_arrangement` under
    ``N(0, s^2 I)`` noise with ``mu = norm / s`` (one Gaussian-mechanism release, add/remove: the
    absent record is the origin).

    For orthogonal candidates the true one wins iff ``Z_0 + mu > max_{i >= 1} Z_i`` (iid standard
    normals), so success = ``int phi(z) Phi(z + m)^(n-1) dz`` with ``m = mu``; the simplex is the same
    picture with ``m = mu sqrt(n/(n-1))`` (its vertices are the one-hot vectors scaled by that factor, less
    their centroid, which every score shares). Compare :func:`audit.theory.rero.gaussian_rero_bound`:
    ``Phi(Phi^-1(1/n) + mu)`` replaces the random maximum by its 1/n quantile, equal for n = 2 (simplex:
    two antipodal candidates) and approached as n grows. docs/references.md, "Reconstruction robustness".

    Args:
        n_candidates: n.
        mu: norm / s, non-negative and finite.
        kind: ``"simplex"`` or ``"orthogonal"``.

    Returns:
        The success probability.

    Raises:
        UserError: a bad mu or an unknown kind.
    """
    candidate_arrangement(n_candidates, kind)  # validates n and kind
    mu = float(mu)
    if not (0.0 <= mu < math.inf):
        raise UserError(f"mu must be non-negative and finite (got {mu!r})")
    n = int(n_candidates)
    m = mu * math.sqrt(n / (n - 1.0)) if kind == "simplex" else mu

    def integrand(z: float) -> float:
        return math.exp(-0.5 * z * z + (n - 1) * float(special.log_ndtr(z + m))) / math.sqrt(2.0 * math.pi)

    value, _ = integrate.quad(integrand, -12.0, 12.0, epsabs=1e-13, epsrel=1e-11, limit=200)
    return float(min(max(value, 0.0), 1.0))


@dataclass(frozen=True)
class GameOutcome:
    """Successes of a reconstruction game out of ``trials`` independent rounds.

    Attributes:
        successes: the rounds the adversary won.
        trials: the rounds played.
    """

    successes: int
    trials: int

    @property
    def rate(self) -> float:
        return self.successes / self.trials

    def interval(self, confidence: float = 0.95) -> tuple[float, float]:
        """Two-sided Clopper–Pearson interval on the success probability, ``(1 - confidence)/2`` per side
        (docs/references.md, "Clopper–Pearson bounds").

        Args:
            confidence: the interval's confidence.

        Returns:
            (lo, hi).
        """
        a = (1.0 - float(confidence)) / 2.0
        return cp_lower(self.successes, self.trials, a), cp_upper(self.successes, self.trials, a)


def _check_game(candidates: ArrayLike, trials: int) -> tuple[np.ndarray, int]:
    c = np.asarray(candidates, dtype=np.float64)
    if c.ndim != 2 or c.shape[0] < 2 or not np.all(np.isfinite(c)):
        raise UserError(f"candidates must be a finite (n_candidates >= 2, d) array (got shape {c.shape})")
    return c, _whole(trials, "trials", 1)


def gaussian_reconstruction_game(candidates: ArrayLike, noise_std: float, trials: int, rng: Seed) -> GameOutcome:
    """The n-candidate ReRo game (kappa = 1/n) against one Gaussian-mechanism release.

    Each round draws the target uniformly among the rows of ``candidates`` (n, d), releases
    ``target + N(0, noise_std^2 I)`` (the other records' contribution is known and subtracted), and the
    informed adversary guesses by :func:`informed_update_guess` with one step and ``q = 1`` [Hayes,
    Mahloujifar, Balle 2023; docs/references.md, "Reconstruction robustness"].

    Args:
        candidates: the candidate records, (n >= 2, d).
        noise_std: the Gaussian noise's standard deviation.
        trials: the number of rounds.
        rng: a seed or a numpy Generator.

    Returns:
        The successes out of ``trials``.

    Raises:
        UserError: bad candidates, noise, trial count or seed.
    """
    c, trials = _check_game(candidates, trials)
    _check_rate_noise(1.0, noise_std)
    g = _generator(rng)
    targets = g.integers(c.shape[0], size=trials)
    observed = c[targets] + float(noise_std) * g.standard_normal((trials, c.shape[1]))
    guesses = informed_update_guess(observed[:, None, :], c, 1.0, noise_std)
    return GameOutcome(int(np.sum(guesses == targets)), trials)


def dpsgd_reconstruction_game(candidate_grads: ArrayLike, sample_rate: float, noise_std: float, steps: int,
                              trials: int, rng: Seed) -> GameOutcome:
    """The n-candidate ReRo game against DP-SGD with access to every update.

    Each round draws the target uniformly among the rows of ``candidate_grads`` (n, d: clipped
    gradients, the same at every step, e.g. Dirac canaries ``C e_i`` or :func:`candidate_arrangement`),
    and for each of ``steps`` steps the residual update ``b_t g(target) + N(0, noise_std^2 I)`` with
    ``b_t ~ Bernoulli(sample_rate)`` (Poisson sampling; ``noise_std = sigma C``); the adversary guesses by
    :func:`informed_update_guess` [Abadi et al. 2016, Alg. 1; Hayes, Mahloujifar, Balle 2023].
    Compare with ``rero_bound(DPSGDClaim(sigma, q, T), 1/n)`` (docs/references.md, "Reconstruction
    robustness").

    Args:
        candidate_grads: the candidates' clipped gradients, (n, d).
        sample_rate: q, in (0, 1] (1 for full batch).
        noise_std: s = sigma C, positive and finite.
        steps: T.
        trials: the number of rounds.
        rng: a seed or a numpy Generator.

    Returns:
        The successes out of ``trials``.

    Raises:
        UserError: bad candidates, parameters or seed.
    """
    c, trials = _check_game(candidate_grads, trials)
    q, s = _check_rate_noise(sample_rate, noise_std)
    steps = _whole(steps, "steps", 1)
    g = _generator(rng)
    n, d = c.shape
    wins = 0
    for start in range(0, trials, _GAME_BATCH):
        size = min(_GAME_BATCH, trials - start)
        targets = g.integers(n, size=size)
        included = g.random((size, steps)) < q
        residuals = included[:, :, None] * c[targets][:, None, :] + s * g.standard_normal((size, steps, d))
        wins += int(np.sum(informed_update_guess(residuals, c, q, s) == targets))
    return GameOutcome(wins, trials)


# --------------------------------------------------------------------------- output-perturbed GLMs


def _check_glm(theta: ArrayLike, X_others: ArrayLike, y_others: ArrayLike, l2_reg: float,
               n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    t = np.asarray(theta, dtype=np.float64).reshape(-1)
    X = np.asarray(X_others, dtype=np.float64)
    y = np.asarray(y_others, dtype=np.float64).reshape(-1)
    if X.ndim != 2 or X.shape[1] != t.size or y.size != X.shape[0]:
        raise UserError(f"X_others must be (n - 1, {t.size}) with one label each (got {X.shape} and {y.size} labels)")
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(X))):
        raise UserError("theta and X_others must be finite")
    if not np.all(np.abs(y) == 1.0):
        raise UserError("labels must be -1 or +1 (targets.dperm's convention)")
    if not (0.0 < float(l2_reg) < math.inf):
        raise UserError(f"l2_reg must be positive (got {l2_reg!r})")
    if _whole(n, "n", 2) != X.shape[0] + 1:
        raise UserError(f"n must count the others plus the target: {X.shape[0] + 1} (got {n!r})")
    return t, X, y


def logistic_gradients(theta: ArrayLike, X: ArrayLike, y: ArrayLike) -> np.ndarray:
    """Per-record gradients in theta of ``log(1 + exp(-y theta.x))``: ``-y sigmoid(-y theta.x) x`` (rows),
    for labels in {-1, +1} (targets.dperm's loss; docs/references.md, "Reconstruction robustness").

    Args:
        theta: the parameters (p,).
        X: the records' features (n, p).
        y: their labels in {-1, +1} (n,).

    Returns:
        The gradients (n, p).
    """
    t = np.asarray(theta, dtype=np.float64).reshape(-1)
    X = np.atleast_2d(np.asarray(X, dtype=np.float64))
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    return -(y * special.expit(-y * (X @ t)))[:, None] * X


def missing_record_gradient(theta: ArrayLike, X_others: ArrayLike, y_others: ArrayLike, l2_reg: float,
                            n: int) -> np.ndarray:
    """The target's loss gradient at the released minimiser: ``-(n lambda theta + sum_others grad_j)``.

    The minimiser of ``(1/n) sum_i loss_i(theta) + (lambda/2) ||theta||^2`` satisfies
    ``sum_i grad loss_i(theta) + n lambda theta = 0`` [Balle, Cherubin, Hayes 2022, GLMs]; the
    informed adversary knows every term but the target's. ``X_others`` are the other records' features as
    the model sees them (targets.dperm.prepare_features), labels in {-1, +1}, ``n`` the training-set size
    (others + 1). docs/references.md, "Reconstruction robustness".

    Args:
        theta: the released minimiser (p,).
        X_others: the other records' features (n - 1, p).
        y_others: their labels in {-1, +1}.
        l2_reg: lambda, positive.
        n: the training-set size (others + 1).

    Returns:
        The target's gradient (p,).

    Raises:
        UserError: shapes that do not match, non-finite values, labels other than -1 and +1, a
            non-positive lambda, or n not the others plus one.
    """
    t, X, y = _check_glm(theta, X_others, y_others, l2_reg, n)
    return -(int(n) * float(l2_reg) * t + logistic_gradients(t, X, y).sum(axis=0))


@dataclass(frozen=True)
class GLMReconstruction:
    """A reconstructed GLM record: ``features`` as the model sees them, ``label`` in {-1, +1},
    ``direction`` the unit vector of the non-bias features (the raw record up to a positive factor, as
    targets.dperm normalises every record), ``gradient`` the implied loss gradient it was read from."""

    features: np.ndarray
    label: float
    direction: np.ndarray
    gradient: np.ndarray


def _unit(v: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else np.zeros_like(v)


def reconstruct_glm_record(theta: ArrayLike, X_others: ArrayLike, y_others: ArrayLike, l2_reg: float, n: int, *,
                           bias_feature: float | None = None, feature_norm: float = 1.0,
                           label: float | None = None) -> GLMReconstruction:
    """The informed adversary's reconstruction of the missing record of an L2-regularised logistic
    regression from its released parameters [Balle, Cherubin, Hayes 2022, GLMs].

    The target's gradient ``g = -y sigmoid(-y theta.x) x`` (:func:`missing_record_gradient`) is ``x``
    times a non-zero scalar, so ``x`` follows up to scale, and the scale from what the adversary knows:

    * ``bias_feature = b`` (the model's last feature is the constant b; targets.dperm with an intercept
      uses ``b = 1/sqrt(2)``): ``x = b g / g_last``, exact, and the label is ``-sign(g_last)``;
    * no bias feature: ``||x|| = feature_norm`` (targets.dperm: 1) and ``x = -y feature_norm g/||g||``.
      Logistic regression sees only ``y x``, so ``(x, y)`` and ``(-x, -y)`` give the same gradient: pass
      the ``label`` if known; without it ``y = +1`` is assumed (the signed record ``y x`` is recovered).

    With the exact minimiser the record is recovered exactly; output-perturbation noise enters
    ``g`` as ``n lambda`` times the noise. docs/references.md, "Reconstruction robustness".

    Args:
        theta: the released parameters (p,).
        X_others: the other records' features (n - 1, p).
        y_others: their labels in {-1, +1}.
        l2_reg: lambda, positive.
        n: the training-set size (others + 1).
        bias_feature: b, the constant last feature, if the model has one.
        feature_norm: ||x|| without a bias feature.
        label: the target's label in {-1, +1}, if known.

    Returns:
        The reconstruction.

    Raises:
        UserError: as :func:`missing_record_gradient`, a bad label, bias or norm.
    """
    g = missing_record_gradient(theta, X_others, y_others, l2_reg, n)
    if label is not None and float(label) not in (-1.0, 1.0):
        raise UserError(f"label must be -1 or +1 (got {label!r})")
    if bias_feature is not None:
        b = float(bias_feature)
        if not (0.0 < abs(b) < math.inf) or g[-1] == 0.0:
            raise UserError("a bias feature must be non-zero and the implied gradient's bias entry non-zero")
        features = b * g / g[-1]
        inferred = -math.copysign(1.0, g[-1] * b)
        return GLMReconstruction(features, inferred if label is None else float(label), _unit(features[:-1]), g)
    if not (0.0 < float(feature_norm) < math.inf):
        raise UserError(f"feature_norm must be positive and finite (got {feature_norm!r})")
    y = 1.0 if label is None else float(label)
    features = -y * float(feature_norm) * _unit(g)
    return GLMReconstruction(features, y, _unit(features), g)


#: Candidate-matching rules of :func:`select_glm_candidate`.
GLM_METRICS = ("newton", "gradient")


def select_glm_candidate(theta: ArrayLike, X_others: ArrayLike, y_others: ArrayLike, l2_reg: float, n: int,
                         candidates_X: ArrayLike, candidates_y: ArrayLike,
                         metric: str = "newton") -> tuple[int, np.ndarray]:
    """Which of the candidate records ``(candidates_X[i], candidates_y[i])`` was trained on, from the
    released parameters (the kappa = 1/n ReRo game; Balle, Cherubin, Hayes 2022).

    Candidate c's mismatch ``r_c = g_hat - grad loss_c(theta) = -n grad F_{D_c}(theta)`` vanishes for
    the true candidate at the exact minimiser (:func:`missing_record_gradient`). ``metric="gradient"``
    scores ``-||r_c||``; ``"newton"`` (default) scores ``-||H_c^-1 r_c|| / n``, one Newton step's
    estimate of the distance from ``theta`` to the minimiser on ``D_c`` (``H_c`` the Hessian of F on
    ``D_c`` at theta, Sherman–Morrison on the others' Hessian), so under isotropic output noise it
    approximates the nearest-minimiser (maximum-likelihood) rule. Returns ``(argmax, scores)``.
    docs/references.md, "Reconstruction robustness".

    Args:
        theta: the released parameters (p,).
        X_others: the other records' features (n - 1, p).
        y_others: their labels in {-1, +1}.
        l2_reg: lambda, positive.
        n: the training-set size (others + 1).
        candidates_X: the candidates' features (k, p).
        candidates_y: their labels in {-1, +1} (k,).
        metric: ``"newton"`` or ``"gradient"``.

    Returns:
        (index of the chosen candidate, every candidate's score).

    Raises:
        UserError: an unknown metric, or candidates or others that are not finite or well shaped.
    """
    if metric not in GLM_METRICS:
        raise UserError(f"unknown metric {metric!r}; use one of {', '.join(GLM_METRICS)}")
    t, X, y = _check_glm(theta, X_others, y_others, l2_reg, n)
    Xc = np.atleast_2d(np.asarray(candidates_X, dtype=np.float64))
    yc = np.asarray(candidates_y, dtype=np.float64).reshape(-1)
    if Xc.shape != (yc.size, t.size) or not np.all(np.abs(yc) == 1.0) or not np.all(np.isfinite(Xc)):
        raise UserError(f"candidates must be finite ({yc.size}, {t.size}) features with labels in {{-1, +1}}")
    r = missing_record_gradient(t, X, y, l2_reg, n)[None, :] - logistic_gradients(t, Xc, yc)
    if metric == "gradient":
        scores = -np.linalg.norm(r, axis=1)
        return int(np.argmax(scores)), scores
    n = int(n)
    s = special.expit(y * (X @ t))
    H = (X.T * (s * (1.0 - s))) @ X / n + float(l2_reg) * np.eye(t.size)
    sc = special.expit(yc * (Xc @ t))
    w = sc * (1.0 - sc) / n  # H_c = H + w_c x_c x_c^T
    solved = np.linalg.solve(H, np.hstack([r.T, Xc.T]))
    h_r, h_x = solved[:, : yc.size].T, solved[:, yc.size:].T  # H^-1 r_c, H^-1 x_c (rows)
    coef = w * np.einsum("cd,cd->c", Xc, h_r) / (1.0 + w * np.einsum("cd,cd->c", Xc, h_x))
    step = h_r - coef[:, None] * h_x
    scores = -np.linalg.norm(step, axis=1) / n
    return int(np.argmax(scores)), scores


def summed_update_log_likelihoods(total: ArrayLike, candidate_grads: ArrayLike, steps: int, sample_rate: float,
                                  noise_std: float) -> np.ndarray:
    """Log-likelihood of each candidate given only the *sum* of its residual updates (white-box access to
    the final parameters, on coordinates no other record's gradient reaches), up to a common constant.

    ``o = S g(c) + N(0, T s^2 I)`` with ``S ~ Binomial(T, q)`` the steps the target joined [Abadi et al.
    2016, Alg. 1; Hayes, Mahloujifar, Balle 2023], so the likelihood is
    ``sum_S Binom(S; T, q) exp((S <o, g> - S^2 ||g||^2 / 2) / (T s^2))`` times a factor common to every
    candidate (S outside the ``1e-15`` tails of the binomial omitted). ``total``: (k,) or (..., k);
    ``candidate_grads`` (n_candidates, k). docs/references.md, "Reconstruction robustness".

    Args:
        total: the summed residual, (k,) or (..., k).
        candidate_grads: the candidates' clipped gradients, (n_candidates, k).
        steps: T.
        sample_rate: q, in (0, 1] (1 for full batch).
        noise_std: s = sigma C, positive and finite.

    Returns:
        The log-likelihoods, (n_candidates,) or (..., n_candidates).

    Raises:
        UserError: arrays of the wrong shapes, or q or s out of range.
    """
    q, s = _check_rate_noise(sample_rate, noise_std)
    steps = _whole(steps, "steps", 1)
    o = np.asarray(total, dtype=np.float64)
    g = np.asarray(candidate_grads, dtype=np.float64)
    if g.ndim != 2 or o.shape[-1] != g.shape[1]:
        raise UserError(f"total must be (..., d) and candidate_grads (n_candidates, d); got {o.shape} and {g.shape}")
    lo, hi = ((steps, steps) if q == 1.0 else
              (int(stats.binom.ppf(1e-15, steps, q)), int(stats.binom.isf(1e-15, steps, q))))
    S = np.arange(lo, hi + 1, dtype=np.float64)
    log_pmf = stats.binom.logpmf(S, steps, q)
    inner = o @ g.T  # (..., n)
    sq = np.sum(g * g, axis=1)
    z = (S * inner[..., None] - 0.5 * S * S * sq[:, None]) / (steps * s * s) + log_pmf
    return special.logsumexp(z, axis=-1)
