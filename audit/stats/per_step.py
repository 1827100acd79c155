"""Per-step auditing of DP-SGD from every intermediate update [Nasr et al. 2023, Sec. 5]: bound
the noise-to-sensitivity ratio of one Poisson-subsampled Gaussian step from pooled per-step
observations, then compose it with the accountant. Rigorous for the step's mu *given* the stated
step model, so its epsilon is labelled as an estimate. Sources: docs/references.md,
"Per-step auditing".

Why composing the mixtures is valid: under Poisson sampling the in-run observation is the
mixture ``(1 - q) N(0, s^2) + q N(c, s^2)`` — most steps do not contain the canary, so
estimating a Gaussian shift from them (as for full batch) would be meaningless. We do not
estimate the mixture's own privacy curve; instead we bound the *base* Gaussian's
``mu = c/s`` with the known q, by refuting ``f_{q,mu}`` with Clopper–Pearson rates of one
threshold test (:func:`subsampled_mu_from_rates`): the deconvolution uses the exact sampling
law, so the bound is a rigorous bound on the step's noise-to-sensitivity ratio given the
mixture form. The steps' composition is then done by the accountant at that ratio
(:func:`composed_epsilon`) — exactly how the theory composes them, so a correct implementation
can never exceed the claim except with probability 1 - confidence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

from audit.errors import UserError
from audit.stats.lower_bound import LowerBound
from audit.stats.rates import confusion_counts, cp_upper, cp_upper_array
from audit.stats.thresholds import SELECTION_ALPHA_FACTOR, split_runs
from audit.theory.dpsgd import DPSGDClaim
from audit.theory.gaussian import gaussian_epsilon

__all__ = ["PER_STEP_ASSUMPTION", "subsampled_mu_from_rates", "composed_epsilon", "designed_threshold",
           "per_step_bound"]

PER_STEP_ASSUMPTION = ("each step is a Poisson-subsampled Gaussian mechanism with the stated sample rate and "
                       "per-step observations are independent given the world; the per-step mu bound is rigorous "
                       "under that, epsilon composes it with the accountant")


def subsampled_mu_from_rates(fpr_ub: float | np.ndarray, fnr_ub: float | np.ndarray,
                             sample_rate: float) -> float | np.ndarray:
    """Largest base mu such that a test with rates (FPR_ub, FNR_ub) violates the tradeoff of the
    Poisson-subsampled Gaussian step with rate q.

    One step with the canary in outputs the mixture ``(1 - q) N(0, 1) + q N(mu, 1)``, without it
    ``N(0, 1)`` (units of sigma C). The likelihood ratio of this pair is increasing in the output, so
    threshold tests are Neyman–Pearson optimal and the step's tradeoff is
    ``f_{q,mu}(a) = (1 - q)(1 - a) + q G_mu(a)`` with ``G_mu(a) = Phi(Phi^-1(1 - a) - mu)``
    (Dong, Roth, Su 2019, Sec. 4.1, the subsampled tradeoff before symmetrisation). Solving
    ``FNR = f_{q,mu}(FPR)`` for mu gives ``mu = Phi^-1(1 - FPR) - Phi^-1((FNR - (1 - q)(1 - FPR)) / q)``;
    ``f_{q,mu}`` decreases in mu, so any mu above this value is refuted by the observed rates.
    For ``q = 1`` this is the GDP estimator of Nasr et al. 2023. Returns 0 when the rates do not
    refute mu = 0.

    Args:
        fpr_ub: upper confidence limit(s) on the test's false-positive rate.
        fnr_ub: upper confidence limit(s) on its false-negative rate.
        sample_rate: q, in (0, 1].

    Returns:
        The mu bound (>= 0), a float or an array of the rates' shape.
    """
    q = float(sample_rate)
    fpr = np.asarray(fpr_ub, dtype=float)
    fnr = np.asarray(fnr_ub, dtype=float)
    g = (fnr - (1.0 - q) * (1.0 - fpr)) / q
    with np.errstate(invalid="ignore", divide="ignore"):
        mu = stats.norm.isf(fpr) - stats.norm.ppf(np.clip(g, 0.0, 1.0))
    mu = np.where(np.isnan(mu), 0.0, np.maximum(mu, 0.0))
    mu = np.where(g >= 1.0, 0.0, mu)
    return float(mu) if mu.ndim == 0 else mu


def composed_epsilon(mu_step: float, sample_rate: float, steps: int, delta: float) -> tuple[float, float | None]:
    """Epsilon at ``delta`` of ``steps`` compositions of the (subsampled) Gaussian step with base mu.

    Full batch: exactly ``G_{sqrt(T) mu}`` (Dong, Roth, Su 2019, Cor. 3.3) ->
    :func:`audit.theory.gaussian.gaussian_epsilon`;
    returns (epsilon, total mu). Poisson rate q < 1: DP-SGD with noise multiplier ``1/mu`` by the
    PLD accountant (:class:`audit.theory.dpsgd.DPSGDClaim`); returns (epsilon, None).

    Args:
        mu_step: the base mu of one step (shift over noise standard deviation).
        sample_rate: q, in (0, 1].
        steps: T.
        delta: the delta of the epsilon.

    Returns:
        (epsilon, total mu) for full batch, (epsilon, None) for q < 1.
    """
    if mu_step <= 0:
        return 0.0, 0.0
    if sample_rate >= 1.0:
        mu = math.sqrt(steps) * mu_step
        return gaussian_epsilon(mu, delta), mu
    return float(DPSGDClaim(1.0 / mu_step, sample_rate, steps).epsilon(delta)), None


def designed_threshold(noise_multiplier: float, sample_rate: float, n_pos: int, n_neg: int, confidence: float,
                       grid: np.ndarray | None = None) -> tuple[float, float]:
    """Threshold fixed in advance from the claim: the one whose *expected* bound is largest.

    Under the claimed step (canary shift 1 in units of C, noise ``sigma``, rate ``q``) a threshold
    ``tau`` has ``FPR = Phi(-tau/sigma)`` and ``FNR = (1 - q) Phi(tau/sigma) + q Phi((tau - 1)/sigma)``;
    we plug the expected counts into the Clopper–Pearson / :func:`subsampled_mu_from_rates`
    computation and keep the best ``tau``. It depends only on the claim and the numbers of
    observations, never on the observations, so it needs neither a held-out half nor a correction
    (a broken implementation only makes it suboptimal, not invalid). Returns (tau, expected mu bound).

    Args:
        noise_multiplier: the claimed sigma.
        sample_rate: q.
        n_pos: the number of in-world observations.
        n_neg: the number of out-world observations.
        confidence: the confidence of the bound the threshold is designed for.
        grid: the thresholds tried (default: a grid over the noise's range).

    Returns:
        (tau, expected mu bound).
    """
    sigma, q = float(noise_multiplier), float(sample_rate)
    grid = np.linspace(-1.0, 8.0, 901) * sigma if grid is None else np.asarray(grid, dtype=float)
    fpr = stats.norm.sf(grid / sigma)
    fnr = (1 - q) * stats.norm.cdf(grid / sigma) + q * stats.norm.cdf((grid - 1.0) / sigma)
    a = (1.0 - confidence) / 2
    mu = subsampled_mu_from_rates(cp_upper_array(np.round(fpr * n_neg), n_neg, a),
                                  cp_upper_array(np.round(fnr * n_pos), n_pos, a), q)
    j = int(np.argmax(mu))
    return float(grid[j]), float(mu[j])


def _step_counts(obs_in: np.ndarray, obs_out: np.ndarray, thresholds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(false positives among out-observations, false negatives among in-observations) of the tests
    "in iff observation >= t"."""
    pooled = np.concatenate([obs_in, obs_out])
    members = np.concatenate([np.ones(obs_in.size, bool), np.zeros(obs_out.size, bool)])
    return confusion_counts(pooled, members, thresholds)


@dataclass(frozen=True, kw_only=True)
class StepComposition:
    """The steps a claim composes: each one the subsampled step mechanism at rate ``q``, ``T`` of them.

    Attributes:
        sample_rate: q, in (0, 1].
        steps: T, the number of steps the claim composes.
    """

    sample_rate: float
    steps: int


def per_step_bound(step_scores: ArrayLike, included: ArrayLike, composition: StepComposition, delta: float,
                   confidence: float, rng: np.random.Generator | int | None, n_thresholds: int = 400,
                   design_sigma: float | None = None) -> LowerBound:
    """Bound from every intermediate update (Nasr et al. 2023, Sec. 5: per-step auditing composed).

    ``step_scores[r, t]`` is the auditor's observation of step t of run r (the noisy gradient sum
    projected on the canary direction, in units of the clip norm). Steps are pooled: with the
    canary's coin fixed for a run, each step of an in-run is one draw from the step mechanism's
    "in" distribution and each step of an out-run one draw from its "out" distribution. This is
    valid when the observations are independent given the world — true for a Dirac canary on a
    coordinate no data gradient touches, where the observation is canary + fresh noise. Why
    composing the mixtures is valid: see the module docstring.

    Args:
        step_scores: the observations, shape (runs, steps).
        included: whether each run included the canary.
        composition: q and T of the steps the claim composes.
        delta: the delta of the epsilon.
        confidence: the bound's confidence.
        rng: the generator (or seed) of the split without ``design_sigma``: runs are split at random
            (stratified by coin) into a selection half and a bound half.
        n_thresholds: the thresholds tried on the selection half; the one maximising the bound on its
            steps is applied to the bound half's steps.
        design_sigma: the claimed noise multiplier: the threshold is then fixed in advance by
            :func:`designed_threshold` and every run is used for the bound.

    Returns:
        The bound (method ``"per-step-composed"``), ``valid=False``: the epsilon depends on the stated
        step model (details["assumption"]).

    Raises:
        UserError: scores of the wrong shape, non-finite scores, q outside (0, 1], or no run of one world.
    """
    sample_rate, steps = composition.sample_rate, composition.steps
    obs = np.asarray(step_scores, dtype=float)
    inc = np.asarray(included, dtype=bool).reshape(-1)
    if obs.ndim != 2 or obs.shape[0] != inc.size:
        raise UserError(f"step scores must be (runs, steps) with one row per run; got {obs.shape} for {inc.size} runs")
    if not np.all(np.isfinite(obs)):
        raise UserError("per-step observations contain NaN or infinity")
    if not 0 < sample_rate <= 1:
        raise UserError(f"sample rate must lie in (0, 1], got {sample_rate}")
    alpha = 1.0 - confidence
    if design_sigma is not None:
        if np.sum(inc) < 1 or np.sum(~inc) < 1:
            raise UserError("per-step audit needs runs of both worlds; use more runs")
        bnd = [np.flatnonzero(inc), np.flatnonzero(~inc)]
        sel = [bnd[0][:0], bnd[1][:0]]
        threshold, selection_value = designed_threshold(design_sigma, sample_rate, int(inc.sum()) * obs.shape[1],
                                                        int((~inc).sum()) * obs.shape[1], confidence)
        choice = f"fixed in advance from the claim (noise multiplier {design_sigma:.4g}), all runs used"
    else:
        sel, bnd = split_runs(inc, rng)
        s_in, s_out = obs[sel[0]].ravel(), obs[sel[1]].ravel()
        cands = np.unique(np.quantile(s_in, np.linspace(0.0, 1.0, n_thresholds)))
        fp, fn = _step_counts(s_in, s_out, cands)
        a_sel = SELECTION_ALPHA_FACTOR * alpha / 2
        mu_sel = subsampled_mu_from_rates(cp_upper_array(fp, s_out.size, a_sel),
                                          cp_upper_array(fn, s_in.size, a_sel), sample_rate)
        j = int(np.argmax(mu_sel))
        threshold, selection_value = float(cands[j]), float(mu_sel[j])
        choice = "chosen on a held-out half of the runs"
    b_in, b_out = obs[bnd[0]].ravel(), obs[bnd[1]].ravel()
    fp_b, fn_b = _step_counts(b_in, b_out, np.array([threshold]))
    fpr_ub = cp_upper(int(fp_b[0]), b_out.size, alpha / 2)
    fnr_ub = cp_upper(int(fn_b[0]), b_in.size, alpha / 2)
    mu_step = float(subsampled_mu_from_rates(fpr_ub, fnr_ub, sample_rate))
    eps, mu_total = composed_epsilon(mu_step, sample_rate, steps, delta)
    details = {"threshold": threshold, "rule": "in iff step observation >= threshold",
               "fp": int(fp_b[0]), "fn": int(fn_b[0]), "n_neg": int(b_out.size), "n_pos": int(b_in.size),
               "fpr_ub": fpr_ub, "fnr_ub": fnr_ub, "mu_step_lb": mu_step, "sample_rate": sample_rate,
               "steps": int(steps), "observed_steps": int(obs.shape[1]), "runs_select": int(sum(map(len, sel))),
               "runs_bound": int(sum(map(len, bnd))), "selection_mu_step_lb": selection_value,
               "threshold_choice": choice,
               "noise_multiplier_ub": (1.0 / mu_step) if mu_step > 0 else None, "delta": delta,
               "assumption": PER_STEP_ASSUMPTION}
    if mu_total is not None:
        details["mu_lb"] = mu_total
    return LowerBound(method="per-step-composed", epsilon=eps, confidence=confidence, n=int(obs.size), valid=False,
                      details=details)
