"""The multi-run DP distinguishing game and its statistics, independent of how runs are trained.

An audit of a DP claim plays the distinguishing game of the DP definition many times
(Jagielski, Ullman, Oprea 2020; Nasr et al. 2021): for run ``r = 1..R`` a fair coin decides
whether the canary is in the training set (``included[r]``), the mechanism runs, and the auditor
computes a score (higher = "the canary was in"). This module turns those scores into epsilon lower
bounds; *how* a run is trained and observed lives elsewhere (a trainer: :mod:`targets.dpsgd_audit`,
DP-ERM, or a user plugin), so any trainer can be plugged in.

Plugging in a trainer
---------------------
Call :func:`fair_coins` for the inclusion flags, train/observe the R runs however you like, and
pass the per-run scores to :func:`audit_runs`::

    included = fair_coins(R, seed)
    scores = np.array([my_score(train(X + canary if inc else X, seed_r)) for inc, seed_r in ...])
    out = audit_runs(scores, included, claim, delta, confidence=0.95, rng=seed)
    out["lower_bounds"], out["best_lower_bound"], out["verdict"]

Optional extras: ``step_scores`` (R, T) per-step observations for the ``updates`` threat model
(composed by :func:`per_step_bound`), ``canary_scores``/``canary_included`` (R, m) when each run
carries m canaries with their own coins (one-run bounds, Steinke et al. 2023). Statistics:

* **Clopper–Pearson** on the per-run scores (valid with no assumption), threshold chosen on a
  random half of the runs and the bound computed on the other half (:func:`grid_threshold_bounds`).
* **GDP** from the same split (Nasr et al. 2023): the mu bound is rigorous, its epsilon assumes a
  Gaussian tradeoff (exact for Gaussian output perturbation and full-batch DP-GD).
* **per-step composed** (Nasr et al. 2023, Sec. 5, auditing from intermediate updates): see
  :func:`per_step_bound`.
* **one-run** (Steinke, Nasr, Jagielski 2023) per run when several canaries are used.

No bound is ever "best" unless it is statistically valid (``valid=True``); the GDP and per-step
figures are reported next to it with their assumption stated.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

from audit.bounds import (GDP_ASSUMPTION, LowerBound, _confusion_curve, _cp_upper_array, _eps_from_rates_array,
                          as_scores_members, clopper_pearson_bound, cp_upper, gdp_bound, gdp_epsilon, one_run_bound)
from audit.errors import UserError
from audit.metrics import attack_metrics

__all__ = ["fair_coins", "audit_runs", "grid_threshold_bounds", "gaussian_fit_bound", "per_step_bound",
           "subsampled_mu_from_rates", "verdict_for", "designed_threshold_from_samples", "PER_STEP_ASSUMPTION"]

PER_STEP_ASSUMPTION = ("each step is a Poisson-subsampled Gaussian mechanism with the stated sample rate and "
                       "per-step observations are independent given the world; the per-step mu bound is rigorous "
                       "under that, epsilon composes it with the accountant")


#: The threshold is selected on the selection half with Clopper–Pearson at a 100 times smaller
#: alpha than the final bound: a pessimistic objective that prefers thresholds with many counts,
#: whose value carries over to the bound half, over tail thresholds that only looked good by chance
#: (a winner's curse over the candidate thresholds). Selection-only, so validity is unaffected.
SELECTION_ALPHA_FACTOR = 0.01


def fair_coins(runs: int, seed: int) -> np.ndarray:
    """Independent fair coins (True = canary in) for ``runs`` runs, seeded; at least one of each
    outcome is not forced (a run with all heads is a valid, if useless, game)."""
    if int(runs) != runs or runs < 4:
        raise UserError(f"a multi-run audit needs at least 4 runs (got {runs}); pass --runs 4 or more")
    return np.random.default_rng([int(seed), 11]).random(int(runs)) < 0.5


def split_runs(included: np.ndarray, rng: np.random.Generator | int | None) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Random halves of the runs, stratified by coin: ([sel_in, sel_out], [bound_in, bound_out])
    (run indices). The selection half chooses a test, the bound half is used for the bound."""
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    pos, neg = np.flatnonzero(included), np.flatnonzero(~included)
    if pos.size < 2 or neg.size < 2:
        raise UserError(f"the audit needs at least 2 runs of each world (got {pos.size} with, {neg.size} without "
                        "the canary); use more runs")
    sel, bnd = [], []
    for idx in (pos, neg):
        perm = rng.permutation(idx)
        sel.append(perm[: perm.size // 2])
        bnd.append(perm[perm.size // 2:])
    return sel, bnd


# ---------------------------------------------------------------------------------------------
# per-step observations (updates threat model)


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


def _step_counts(obs_in: np.ndarray, obs_out: np.ndarray, thresholds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(false positives among out-observations, false negatives among in-observations) for the
    tests "in iff observation >= t"."""
    pos = np.sort(obs_in)
    neg = np.sort(obs_out)
    fp = neg.size - np.searchsorted(neg, thresholds, side="left")
    fn = np.searchsorted(pos, thresholds, side="left")
    return fp, fn


def composed_epsilon(mu_step: float, sample_rate: float, steps: int, delta: float) -> tuple[float, float | None]:
    """Epsilon at ``delta`` of ``steps`` compositions of the (subsampled) Gaussian step with base mu.

    Full batch: exactly ``G_{sqrt(T) mu}`` (Dong, Roth, Su 2019, Cor. 3.3) -> :func:`gdp_epsilon`;
    returns (epsilon, total mu). Poisson rate q < 1: DP-SGD with noise multiplier ``1/mu`` by the
    PLD accountant (:class:`audit.accounting.DPSGDClaim`); returns (epsilon, None).
    """
    if mu_step <= 0:
        return 0.0, 0.0
    if sample_rate >= 1.0:
        mu = math.sqrt(steps) * mu_step
        return gdp_epsilon(mu, delta), mu
    from audit.accounting import DPSGDClaim

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
    """
    sigma, q = float(noise_multiplier), float(sample_rate)
    grid = np.linspace(-1.0, 8.0, 901) * sigma if grid is None else np.asarray(grid, dtype=float)
    fpr = stats.norm.sf(grid / sigma)
    fnr = (1 - q) * stats.norm.cdf(grid / sigma) + q * stats.norm.cdf((grid - 1.0) / sigma)
    a = (1.0 - confidence) / 2
    mu = subsampled_mu_from_rates(_cp_upper_array(np.round(fpr * n_neg), n_neg, a),
                                  _cp_upper_array(np.round(fnr * n_pos), n_pos, a), q)
    j = int(np.argmax(mu))
    return float(grid[j]), float(mu[j])


def per_step_bound(step_scores: ArrayLike, included: ArrayLike, sample_rate: float, steps: int, delta: float,
                   confidence: float, rng: np.random.Generator | int | None, n_thresholds: int = 400,
                   design_sigma: float | None = None) -> LowerBound:
    """Bound from every intermediate update (Nasr et al. 2023, Sec. 5: per-step auditing composed).

    ``step_scores[r, t]`` is the auditor's observation of step t of run r (the noisy gradient sum
    projected on the canary direction, in units of the clip norm). Steps are pooled: with the
    canary's coin fixed for a run, each step of an in-run is one draw from the step mechanism's
    "in" distribution and each step of an out-run one draw from its "out" distribution. This is
    valid when the observations are independent given the world — true for a Dirac canary on a
    coordinate no data gradient touches, where the observation is canary + fresh noise.

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

    Threshold choice: with ``design_sigma`` (the claimed noise multiplier) the threshold is fixed in
    advance by :func:`designed_threshold` and every run is used for the bound; otherwise runs are
    split at random (stratified by coin) into a selection half and a bound half, and the threshold
    maximising the bound on the selection half's steps is applied to the bound half's steps.
    ``valid=False``: the epsilon depends on the stated step model (details["assumption"]).
    """
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
        mu_sel = subsampled_mu_from_rates(_cp_upper_array(fp, s_out.size, a_sel),
                                          _cp_upper_array(fn, s_in.size, a_sel), sample_rate)
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
    return LowerBound("per-step-composed", eps, confidence, int(obs.size), False, details)


# ---------------------------------------------------------------------------------------------
# per-run scores


def grid_threshold_bounds(scores: ArrayLike, included: ArrayLike, delta: float, confidence: float,
                          rng: np.random.Generator | int | None, n_thresholds: int = 256) -> list[LowerBound]:
    """Clopper–Pearson and GDP bounds with the threshold chosen on held-out runs, from a grid.

    Same game as :func:`audit.bounds.threshold_bounds` (runs split at random, stratified by coin,
    into a selection half and a bound half; both directions tried; the test maximising the CP
    epsilon — resp. the GDP mu bound — on the selection half is applied to the bound half), but the
    candidate thresholds are ``n_thresholds`` quantiles of the *selection* half's scores instead of
    every distinct score, and the selection objective uses the pessimistic alpha of
    :data:`SELECTION_ALPHA_FACTOR`. With 10^6 runs the every-score search both costs minutes and
    picks an extreme-tail threshold that looked lucky on the selection half (a winner's curse that
    loosens the bound on the other half); the grid and the pessimistic objective avoid both, and
    validity is unaffected (the choice sees only selection data).
    """
    s, inc = as_scores_members(scores, included)
    sel, bnd = split_runs(inc, rng)
    sel_i, bnd_i = np.concatenate(sel), np.concatenate(bnd)
    s_sel, m_sel = s[sel_i], inc[sel_i]
    n_pos, n_neg = int(m_sel.sum()), int((~m_sel).sum())
    alpha = 1.0 - confidence
    cands = np.unique(np.quantile(s_sel, np.linspace(0.0, 1.0, n_thresholds)))
    best: dict[str, tuple[float, float, str]] = {}
    for direction in (">=", "<="):
        fp, fn = _confusion_curve(s_sel, m_sel, cands, direction)
        fpr_ub = _cp_upper_array(fp, n_neg, SELECTION_ALPHA_FACTOR * alpha / 2)
        fnr_ub = _cp_upper_array(fn, n_pos, SELECTION_ALPHA_FACTOR * alpha / 2)
        with np.errstate(invalid="ignore"):
            mu = stats.norm.isf(fpr_ub) - stats.norm.ppf(fnr_ub)
        # ties (e.g. every pessimistic value 0 with few runs) are broken by the add-one smoothed
        # point estimate, so a useless all-in / all-out threshold is never kept over a separating one
        fpr_s, fnr_s = (fp + 1) / (n_neg + 2), (fn + 1) / (n_pos + 2)
        smooth = {"clopper-pearson": _eps_from_rates_array(fpr_s, fnr_s, delta),
                  "gdp": stats.norm.isf(fpr_s) - stats.norm.ppf(fnr_s)}
        objectives = {"clopper-pearson": _eps_from_rates_array(fpr_ub, fnr_ub, delta),
                      "gdp": np.where(np.isnan(mu), 0.0, np.maximum(mu, 0.0))}
        for method, obj in objectives.items():
            j = int(np.lexsort((-smooth[method], -obj))[0])
            if method not in best or obj[j] > best[method][0]:
                best[method] = (float(obj[j]), float(cands[j]), direction)
    s_b, m_b = s[bnd_i], inc[bnd_i]
    nb_pos, nb_neg = int(m_b.sum()), int((~m_b).sum())
    out = []
    for method, bound_fn in (("clopper-pearson", clopper_pearson_bound), ("gdp", gdp_bound)):
        value, threshold, direction = best[method]
        fp_b, fn_b = _confusion_curve(s_b, m_b, np.array([threshold]), direction)
        b = bound_fn(int(fp_b[0]), nb_neg, int(fn_b[0]), nb_pos, delta, confidence)
        extra = {"threshold": threshold, "direction": direction, "rule": f"in iff score {direction} threshold",
                 "n_select": int(sel_i.size), "n_bound": int(bnd_i.size), "thresholds_tried": int(cands.size),
                 "selection_value": value}
        out.append(LowerBound(b.method, b.epsilon, b.confidence, b.n, b.valid, {**b.details, **extra}))
    return out


def designed_threshold_from_samples(sim_in: np.ndarray, sim_out: np.ndarray, n_pos: int, n_neg: int,
                                    confidence: float, delta: float, n_thresholds: int = 400) -> tuple[float, float]:
    """Threshold of the test "in iff score >= t" fixed in advance from simulated scores.

    ``sim_in``/``sim_out`` are scores simulated under a hypothesis about the mechanism (never the
    audit's own runs). For each candidate threshold the false-positive / false-negative counts of
    ``n_neg``/``n_pos`` runs are binomial; their 75th percentiles go through the Clopper–Pearson
    epsilon (a pessimistic quantile, so that a far-tail threshold whose expected count rounds to 0
    is not preferred on luck), and the best threshold is kept. Chosen before any run is seen, it
    lets the bound use every run instead of half; a wrong hypothesis makes it suboptimal, never
    invalid. Returns (threshold, the bound expected with probability about 1/2 or more).
    """
    sim_in, sim_out = np.sort(np.asarray(sim_in, dtype=float)), np.sort(np.asarray(sim_out, dtype=float))
    cands = np.unique(np.quantile(sim_out, 1.0 - np.logspace(-5, 0, n_thresholds)))
    fpr = 1.0 - np.searchsorted(sim_out, cands, side="left") / sim_out.size
    fnr = np.searchsorted(sim_in, cands, side="left") / sim_in.size
    a = (1.0 - confidence) / 2
    eps = _eps_from_rates_array(_cp_upper_array(stats.binom.ppf(0.75, n_neg, fpr), n_neg, a),
                                _cp_upper_array(stats.binom.ppf(0.75, n_pos, fnr), n_pos, a), delta)
    j = int(np.argmax(eps))
    return float(cands[j]), float(eps[j])


GAUSSIAN_FIT_ASSUMPTION = ("scores are Gaussian with equal variance in both worlds (exact for output perturbation "
                           "scored by a fixed projection); normal-approximation confidence bound on mu")


def gaussian_fit_bound(scores: ArrayLike, included: ArrayLike, delta: float, confidence: float) -> LowerBound:
    """Parametric mu bound when the score is Gaussian in both worlds with a common variance.

    ``mu_hat = (mean_in - mean_out) / s_pooled``; its standard error is
    ``sqrt(1/n_in + 1/n_out + mu_hat^2 / (2 (n_in + n_out - 2)))`` (delta method for the
    standardised mean difference, Hedges & Olkin 1985, Eq. 5.14), and
    ``mu_lb = mu_hat - z_confidence * se`` is a one-sided lower bound with asymptotic coverage
    ``confidence``. For a Gaussian mechanism scored by a fixed projection (DP-ERM output
    perturbation, white-box) the two worlds are exactly ``N(0, 1)`` and ``N(mu, 1)`` up to scale,
    so this uses all runs (no split: there is no threshold to choose) and every score (no
    thresholding loss), which makes it the most efficient estimate of mu. Epsilon =
    ``gdp_epsilon(mu_lb, delta)``; ``valid=False`` (parametric assumption, see details).
    """
    s, inc = as_scores_members(scores, included)
    n1, n0 = int(inc.sum()), int((~inc).sum())
    if n1 < 3 or n0 < 3:
        raise UserError("the Gaussian fit needs at least 3 runs of each world; use more runs")
    a, b = s[inc], s[~inc]
    pooled = math.sqrt(((n1 - 1) * a.var(ddof=1) + (n0 - 1) * b.var(ddof=1)) / (n1 + n0 - 2))
    mu_hat = float((a.mean() - b.mean()) / pooled) if pooled > 0 else 0.0
    se = math.sqrt(1.0 / n1 + 1.0 / n0 + mu_hat ** 2 / (2.0 * (n1 + n0 - 2)))
    mu_lb = max(0.0, mu_hat - float(stats.norm.ppf(confidence)) * se)
    return LowerBound("gaussian-fit", gdp_epsilon(mu_lb, delta), confidence, n1 + n0, False,
                      {"mu_hat": mu_hat, "mu_se": se, "mu_lb": mu_lb, "n_pos": n1, "n_neg": n0,
                       "delta": delta, "assumption": GAUSSIAN_FIT_ASSUMPTION})


# ---------------------------------------------------------------------------------------------
# the whole game


def verdict_for(best_valid: dict | None, all_bounds: list[dict], epsilon_theory: float | None,
                delta: float) -> dict:
    """results["verdict"] (:func:`audit.verdict.claim_verdict`: violation when a valid bound exceeds
    the claim); an assumption-based figure above the claim is flagged in the text of a consistent
    verdict but is not by itself a violation."""
    from audit.verdict import claim_verdict

    verdict = claim_verdict(best_valid, epsilon_theory, delta)
    above = ([] if epsilon_theory is None else
             [b for b in all_bounds if not b["valid"] and _num(b["epsilon"]) > epsilon_theory + 1e-9])
    if verdict["status"] == "consistent" and above:
        verdict["text"] += ("; but the assumption-based " + ", ".join(sorted({b["method"] for b in above}))
                            + " estimate exceeds the claim: suspicious, check with more runs")
    return verdict


def _num(x: Any) -> float:
    if isinstance(x, str):
        return math.inf if x == "inf" else -math.inf
    return float(x)


def audit_runs(scores: ArrayLike, included: ArrayLike, claim: Any, delta: float, confidence: float = 0.95,
               rng: np.random.Generator | int | None = 0, *, step_scores: ArrayLike | None = None,
               sample_rate: float | None = None, steps: int | None = None,
               canary_scores: ArrayLike | None = None, canary_included: ArrayLike | None = None,
               gaussian_fit: bool = False, design_sigma: float | None = None,
               cp_threshold: Callable[[int, int], tuple[float, str]] | None = None) -> dict:
    """Epsilon lower bounds from R runs of the distinguishing game.

    Args:
        scores: (R,) one score per run, higher = "canary in" (any fixed function of what the threat
            model lets the adversary see).
        included: (R,) the fair coins (True = canary trained on).
        claim: a :class:`audit.accounting.PrivacyClaim` (or None for no claim).
        delta, confidence: of the bounds; rng: seeds the random split of the runs.
        step_scores, sample_rate, steps: optional per-step observations (R, T), the Poisson rate
            and the number of steps the claim composes (updates threat model, :func:`per_step_bound`).
        canary_scores, canary_included: optional (R, m) scores and coins of m canaries per run:
            adds one one-run bound over all R*m canaries (Steinke et al. 2023; valid because each
            coin only affects its own run), guessing the top and bottom 5% of scores.
        gaussian_fit: add :func:`gaussian_fit_bound` (for mechanisms whose scores are Gaussian).
        design_sigma: the claimed noise multiplier: fixes the per-step threshold in advance
            (:func:`designed_threshold`) instead of choosing it on held-out runs.
        cp_threshold: ``(n_pos, n_neg) -> (threshold, description)`` fixing the Clopper–Pearson
            test "in iff score >= threshold" in advance (e.g. :func:`designed_threshold_from_samples`
            under a stated hypothesis): the CP bound then uses every run and replaces the
            held-out-half CP bound (one valid CP bound per audit, so no multiple-testing loss).

    Returns a dict with ``lower_bounds`` (LowerBound dicts), ``best_lower_bound`` (largest valid or
    None), ``best_estimate`` (largest of all, labelled), ``epsilon_theory``, ``verdict``,
    ``attack_metrics`` (AUC, TPR at low FPR of the per-run scores), ``runs``, ``included``.
    """
    s, inc = as_scores_members(scores, included)
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    bounds: list[dict] = [b.to_dict() for b in grid_threshold_bounds(s, inc, delta, confidence, rng)]
    if cp_threshold is not None:
        threshold, choice = cp_threshold(int(inc.sum()), int((~inc).sum()))
        fp, fn = _confusion_curve(s, inc, np.array([threshold]), ">=")
        b = clopper_pearson_bound(int(fp[0]), int((~inc).sum()), int(fn[0]), int(inc.sum()), delta, confidence)
        fixed = LowerBound(b.method, b.epsilon, b.confidence, b.n, b.valid,
                           {**b.details, "threshold": threshold, "direction": ">=", "rule": "in iff score >= threshold",
                            "threshold_choice": choice, "n_bound": int(s.size)})
        bounds = [fixed.to_dict() if x["method"] == "clopper-pearson" else x for x in bounds]
    if gaussian_fit:
        bounds.append(gaussian_fit_bound(s, inc, delta, confidence).to_dict())
    if step_scores is not None:
        if sample_rate is None or steps is None:
            raise UserError("per-step observations need the sample rate and the number of steps of the claim")
        bounds.append(per_step_bound(step_scores, inc, sample_rate, steps, delta, confidence, rng,
                                     design_sigma=design_sigma).to_dict())
    if canary_scores is not None:
        cs = np.asarray(canary_scores, dtype=float)
        ci = np.asarray(canary_included, dtype=bool)
        if cs.shape != ci.shape or cs.ndim != 2:
            raise UserError("canary scores and coins must both be (runs, canaries)")
        # each coin affects only its own run, so the R runs together are one mechanism in which every
        # canary enjoys the claim's (eps, delta): pooling all R*m canaries in one one-run audit is valid
        flat_s, flat_i = cs.ravel(), ci.ravel()
        k = max(1, flat_s.size // 20)
        pooled = one_run_bound(flat_s, flat_i, k, k, delta, confidence).to_dict()
        pooled["details"] |= {"rule": f"pooled {cs.shape[0]} runs x {cs.shape[1]} canaries, top/bottom {k} guessed"}
        bounds.append(pooled)
    epsilon_theory = float(claim.epsilon(delta)) if claim is not None else None
    valid = [b for b in bounds if b["valid"]]
    best = max(valid, key=lambda b: _num(b["epsilon"])) if valid else None
    estimate = max(bounds, key=lambda b: _num(b["epsilon"])) if bounds else None
    metrics = attack_metrics(s, inc, confidence)
    return {"lower_bounds": bounds, "best_lower_bound": best, "best_estimate": estimate,
            "epsilon_theory": epsilon_theory, "verdict": verdict_for(best, bounds, epsilon_theory, delta),
            "attack_metrics": metrics, "runs": int(s.size), "included": int(inc.sum()),
            "gdp_assumption": GDP_ASSUMPTION}
