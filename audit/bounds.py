"""Empirical lower bounds on epsilon from the outcome of a membership (distinguishing) game.

Three families, all following DESIGN.md section 3:

* **Clopper–Pearson** (Jagielski, Ullman, Oprea 2020; Nasr et al. 2021).  An (eps, delta)-DP
  mechanism forces every test between neighbouring worlds to satisfy
  ``FPR + e^eps FNR >= 1 - delta`` and ``FNR + e^eps FPR >= 1 - delta``
  (Kairouz, Oh, Viswanath 2015, Thm. 2.1), hence
  ``eps >= max(ln((1 - delta - FNR)/FPR), ln((1 - delta - FPR)/FNR))``.
  Replacing FPR and FNR by one-sided Clopper–Pearson upper bounds at level alpha/2 each gives
  (by a union bound) a lower bound that holds with probability >= 1 - alpha.
* **GDP** (Nasr et al. 2023, "Tight auditing of differentially private machine learning",
  Sec. 4): the same confidence intervals give a rigorous lower bound on the GDP parameter mu
  (Dong, Roth, Su 2019, Def. 2.7: ``FNR >= Phi(Phi^-1(1 - FPR) - mu)``); the conversion of mu to
  epsilon (Dong, Roth, Su 2019, Cor. 2.13) is valid only if the mechanism's tradeoff curve is
  Gaussian, so the epsilon figure is labelled ``valid=False``.
* **One run** (Steinke, Nasr, Jagielski 2023, "Privacy auditing with one (1) training run",
  Thm. 5.2 and Algorithm 2): m canaries, each included by an independent fair coin; the auditor
  makes r guesses of which v are correct; the p-value of seeing >= v correct guesses under
  (eps, delta)-DP is computed and epsilon is bisected.

Higher score = "more likely a member" everywhere in the project.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize, special, stats

from audit.errors import UserError
from audit.io import to_jsonable

__all__ = [
    "LowerBound",
    "cp_upper",
    "cp_lower",
    "epsilon_from_rates",
    "clopper_pearson_bound",
    "gdp_bound",
    "gdp_delta",
    "gdp_epsilon",
    "one_run_p_value",
    "one_run_epsilon_lb",
    "one_run_bound",
    "threshold_bounds",
]

GDP_ASSUMPTION = "epsilon assumes a Gaussian tradeoff; mu_lb is rigorous"


@dataclass(frozen=True)
class LowerBound:
    """An empirical lower bound on epsilon.

    Attributes:
        method: "clopper-pearson", "gdp" or "one-run".
        epsilon: the epsilon lower bound (>= 0; may be ``inf`` only for degenerate inputs).
        confidence: the probability with which the bound holds (1 - alpha).
        n: number of observations (trials / canaries) the bound uses.
        valid: True only if ``epsilon`` is a statistically valid lower bound without further
            assumptions (Clopper–Pearson, one-run). GDP epsilon figures are ``False``.
        details: JSON-serialisable method-specific numbers (counts, rate bounds, mu, ...).
    """

    method: str
    epsilon: float
    confidence: float
    n: int
    valid: bool
    details: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """JSON-friendly dict with keys method, epsilon, confidence, n, valid, details.

        Infinite values become the strings "inf"/"-inf" (as :func:`audit.io.to_jsonable`).
        """
        return {
            "method": self.method,
            "epsilon": to_jsonable(float(self.epsilon)),
            "confidence": float(self.confidence),
            "n": int(self.n),
            "valid": bool(self.valid),
            "details": to_jsonable(self.details),
        }


# ---------------------------------------------------------------------------------------------
# helpers


def _check_confidence(confidence: float) -> float:
    c = float(confidence)
    if not (0.0 < c < 1.0):
        raise UserError(f"confidence must lie strictly between 0 and 1 (got {confidence}); use e.g. 0.95")
    return c


def _check_delta(delta: float) -> float:
    d = float(delta)
    if not (0.0 <= d < 1.0):
        raise UserError(f"delta must lie in [0, 1) (got {delta}); use e.g. 1e-5")
    return d


def _check_count(k: int, n: int, what: str) -> tuple[int, int]:
    if int(n) != n or n < 0:
        raise UserError(f"{what}: the number of trials must be a non-negative integer (got {n})")
    if int(k) != k or not (0 <= k <= n):
        raise UserError(f"{what}: the count must be an integer in [0, {n}] (got {k})")
    return int(k), int(n)


def _check_alpha(alpha: float) -> float:
    a = float(alpha)
    if not (0.0 < a < 1.0):
        raise UserError(f"alpha (1 - confidence) must lie strictly between 0 and 1 (got {alpha})")
    return a


def as_scores_members(scores: ArrayLike, members: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Validate and convert attack scores and membership labels.

    Returns ``(scores as float64 1-D array, members as bool 1-D array)``. Raises UserError for
    mismatched lengths, non-finite scores or labels other than 0/1/True/False.
    """
    s = np.asarray(scores, dtype=float).reshape(-1)
    m_raw = np.asarray(members).reshape(-1)
    if s.shape != m_raw.shape:
        raise UserError(
            f"scores ({s.size}) and members ({m_raw.size}) have different lengths; pass one label per score"
        )
    if not np.all(np.isfinite(s)):
        raise UserError("attack scores contain NaN or infinity; replace them by finite values (higher = member)")
    if m_raw.dtype == bool:
        m = m_raw
    else:
        mf = m_raw.astype(float)
        if not np.all((mf == 0) | (mf == 1)):
            raise UserError("members must be 0/1 or True/False (1 = the record was in the training set)")
        m = mf == 1
    return s, m


# ---------------------------------------------------------------------------------------------
# Clopper–Pearson


def cp_upper(k: int, n: int, alpha: float) -> float:
    """One-sided Clopper–Pearson upper bound on a binomial rate (Clopper & Pearson 1934).

    ``P[p <= cp_upper(k, n, alpha)] >= 1 - alpha``; equals ``Beta.ppf(1 - alpha, k + 1, n - k)``,
    is 1 when ``k == n`` (including n == 0) and ``1 - alpha^(1/n)`` when ``k == 0``.
    """
    k, n = _check_count(k, n, "cp_upper")
    alpha = _check_alpha(alpha)
    if k >= n:
        return 1.0
    return float(stats.beta.ppf(1.0 - alpha, k + 1, n - k))


def cp_lower(k: int, n: int, alpha: float) -> float:
    """One-sided Clopper–Pearson lower bound: ``P[p >= cp_lower(k, n, alpha)] >= 1 - alpha``.

    Equals ``Beta.ppf(alpha, k, n - k + 1)``; 0 when ``k == 0`` (including n == 0) and
    ``alpha^(1/n)`` when ``k == n``.
    """
    k, n = _check_count(k, n, "cp_lower")
    alpha = _check_alpha(alpha)
    if k <= 0:
        return 0.0
    return float(stats.beta.ppf(alpha, k, n - k + 1))


def _cp_upper_array(k: np.ndarray, n: int, alpha: float) -> np.ndarray:
    """Vectorised :func:`cp_upper` for many counts with a common n (no validation)."""
    k = np.asarray(k, dtype=float)
    out = np.ones_like(k)
    mask = k < n
    if np.any(mask):
        out[mask] = stats.beta.ppf(1.0 - alpha, k[mask] + 1, n - k[mask])
    return out


# ---------------------------------------------------------------------------------------------
# epsilon from (FPR, FNR)


def _eps_from_rates_array(fpr: np.ndarray, fnr: np.ndarray, delta: float) -> np.ndarray:
    fpr = np.asarray(fpr, dtype=float)
    fnr = np.asarray(fnr, dtype=float)
    num1 = 1.0 - delta - fnr
    num2 = 1.0 - delta - fpr
    with np.errstate(divide="ignore", invalid="ignore"):
        t1 = np.where(num1 > 0, np.where(fpr > 0, np.log(np.maximum(num1, 1e-300) / np.where(fpr > 0, fpr, 1.0)), np.inf), -np.inf)
        t2 = np.where(num2 > 0, np.where(fnr > 0, np.log(np.maximum(num2, 1e-300) / np.where(fnr > 0, fnr, 1.0)), np.inf), -np.inf)
    return np.maximum(0.0, np.maximum(t1, t2))


def epsilon_from_rates(fpr: float, fnr: float, delta: float) -> float:
    """Smallest epsilon compatible with a test of the given false-positive/negative rates.

    From the hypothesis-testing characterisation of (eps, delta)-DP (Kairouz, Oh, Viswanath 2015,
    Thm. 2.1; Dong, Roth, Su 2019, Prop. 2.5):
    ``eps >= max(0, ln((1 - delta - FNR)/FPR), ln((1 - delta - FPR)/FNR))``.

    Zero rates: a term whose numerator ``1 - delta - (other rate)`` is positive and whose
    denominator is 0 is ``+inf`` (no finite epsilon explains the rates with this delta); a term
    with non-positive numerator contributes nothing. The function therefore returns
    ``float('inf')`` for e.g. ``fpr = 0, fnr < 1 - delta``; it is not capped. The
    Clopper–Pearson bounds never produce a zero rate when there is at least one trial, so
    :func:`clopper_pearson_bound` is always finite.
    """
    fpr = float(fpr)
    fnr = float(fnr)
    if not (0.0 <= fpr <= 1.0 and 0.0 <= fnr <= 1.0):
        raise UserError(f"rates must lie in [0, 1] (got fpr={fpr}, fnr={fnr})")
    delta = _check_delta(delta)
    return float(_eps_from_rates_array(np.array(fpr), np.array(fnr), delta))


def clopper_pearson_bound(
    fp: int, n_neg: int, fn: int, n_pos: int, delta: float, confidence: float
) -> LowerBound:
    """Epsilon lower bound from one fixed test via Clopper–Pearson (Jagielski et al. 2020, Sec. 4;
    Nasr et al. 2021, Sec. 3).

    ``fp`` false positives among ``n_neg`` trials of the world without the target, ``fn`` false
    negatives among ``n_pos`` trials of the world with it. FPR and FNR are replaced by one-sided
    CP upper bounds at level alpha/2 each (alpha = 1 - confidence), and
    :func:`epsilon_from_rates` is applied; by a union bound the result is an epsilon lower bound
    with probability >= confidence. The test (threshold) must not have been chosen on these
    trials.
    """
    confidence = _check_confidence(confidence)
    delta = _check_delta(delta)
    fp, n_neg = _check_count(fp, n_neg, "clopper_pearson_bound (fp, n_neg)")
    fn, n_pos = _check_count(fn, n_pos, "clopper_pearson_bound (fn, n_pos)")
    alpha = 1.0 - confidence
    fpr_ub = cp_upper(fp, n_neg, alpha / 2)
    fnr_ub = cp_upper(fn, n_pos, alpha / 2)
    eps = epsilon_from_rates(fpr_ub, fnr_ub, delta)
    details = {
        "fp": fp,
        "fn": fn,
        "n_neg": n_neg,
        "n_pos": n_pos,
        "fpr": fp / n_neg if n_neg else None,
        "fnr": fn / n_pos if n_pos else None,
        "fpr_ub": fpr_ub,
        "fnr_ub": fnr_ub,
        "delta": delta,
    }
    return LowerBound("clopper-pearson", eps, confidence, n_neg + n_pos, True, details)


# ---------------------------------------------------------------------------------------------
# Gaussian DP


def _log_gdp_delta(eps: float, mu: float) -> float:
    """log of :func:`gdp_delta` for eps >= 0, 0 < mu < inf (log space, stable for large eps)."""
    a = -eps / mu + mu / 2.0
    b = -eps / mu - mu / 2.0
    la = float(special.log_ndtr(a))
    lb = eps + float(special.log_ndtr(b))
    diff = lb - la
    if diff >= 0.0:  # only through rounding; the true difference is negative
        return -np.inf
    return la + math.log(-math.expm1(diff))


def gdp_delta(epsilon: float, mu: float) -> float:
    """delta(eps) of mu-GDP (Dong, Roth, Su 2019, Cor. 2.13; Balle & Wang 2018, Thm. 8):
    ``Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)``.

    Evaluated in log space with ``scipy.special.log_ndtr`` so it stays accurate (and does not
    overflow) for large epsilon. ``mu = 0`` gives 0; ``mu = inf`` gives 1.
    """
    eps = float(epsilon)
    mu = float(mu)
    if eps < 0 or math.isnan(eps):
        raise UserError(f"epsilon must be >= 0 (got {epsilon})")
    if mu < 0 or math.isnan(mu):
        raise UserError(f"mu must be >= 0 (got {mu})")
    if mu == 0.0:
        return 0.0
    if math.isinf(mu):
        return 1.0
    if math.isinf(eps):
        return 0.0
    return float(min(1.0, max(0.0, math.exp(_log_gdp_delta(eps, mu)))))


def gdp_epsilon(mu: float, delta: float) -> float:
    """Smallest epsilon with ``gdp_delta(epsilon, mu) <= delta`` (inverse of :func:`gdp_delta`).

    Found by Brent's method on ``log gdp_delta(eps, mu) - log delta`` (gdp_delta is decreasing in
    eps). Returns 0 when ``delta >= gdp_delta(0, mu) = 2 Phi(mu/2) - 1`` or mu = 0, and ``inf``
    when delta = 0 and mu > 0.
    """
    mu = float(mu)
    if mu < 0 or math.isnan(mu):
        raise UserError(f"mu must be >= 0 (got {mu})")
    delta = float(delta)
    if not (0.0 <= delta <= 1.0):
        raise UserError(f"delta must lie in [0, 1] (got {delta})")
    if mu == 0.0 or delta >= gdp_delta(0.0, mu):
        return 0.0
    if delta == 0.0 or math.isinf(mu):
        return math.inf
    log_delta = math.log(delta)

    def f(e: float) -> float:
        return _log_gdp_delta(e, mu) - log_delta

    hi = max(1.0, mu * mu)
    while f(hi) > 0:
        hi *= 2.0
        if hi > 1e8:  # pragma: no cover - unreachable for finite mu and delta > 0
            return math.inf
    return float(optimize.brentq(f, 0.0, hi, xtol=1e-12, rtol=1e-12))


def gdp_bound(fp: int, n_neg: int, fn: int, n_pos: int, delta: float, confidence: float) -> LowerBound:
    """GDP-based bound (Nasr et al. 2023, "Tight auditing", Sec. 4 / Eq. for mu).

    With CP upper bounds ``FPR_ub``, ``FNR_ub`` at alpha/2 each (as in
    :func:`clopper_pearson_bound`), ``mu_lb = Phi^-1(1 - FPR_ub) - Phi^-1(FNR_ub)`` (clipped at 0)
    is a rigorous lower bound on the GDP parameter mu with probability >= confidence, because
    mu-GDP forces ``FNR >= Phi(Phi^-1(1 - FPR) - mu)`` (Dong, Roth, Su 2019, Def. 2.7). The
    reported epsilon is ``gdp_epsilon(mu_lb, delta)``, which is a lower bound on epsilon only if
    the mechanism's tradeoff is Gaussian: hence ``valid=False``.
    """
    confidence = _check_confidence(confidence)
    delta = _check_delta(delta)
    fp, n_neg = _check_count(fp, n_neg, "gdp_bound (fp, n_neg)")
    fn, n_pos = _check_count(fn, n_pos, "gdp_bound (fn, n_pos)")
    alpha = 1.0 - confidence
    fpr_ub = cp_upper(fp, n_neg, alpha / 2)
    fnr_ub = cp_upper(fn, n_pos, alpha / 2)
    mu_lb = float(stats.norm.isf(fpr_ub) - stats.norm.ppf(fnr_ub))
    if not (mu_lb > 0.0):  # also catches nan from (1, 1) -> inf - inf
        mu_lb = 0.0
    eps = gdp_epsilon(mu_lb, delta)
    details = {
        "fp": fp,
        "fn": fn,
        "n_neg": n_neg,
        "n_pos": n_pos,
        "fpr_ub": fpr_ub,
        "fnr_ub": fnr_ub,
        "mu_lb": mu_lb,
        "delta": delta,
        "assumption": GDP_ASSUMPTION,
    }
    return LowerBound("gdp", eps, confidence, n_neg + n_pos, False, details)


# ---------------------------------------------------------------------------------------------
# One-run auditing (Steinke, Nasr, Jagielski 2023)


def _check_one_run(r: int, v: int, m: int) -> tuple[int, int, int]:
    for name, x in (("r", r), ("v", v), ("m", m)):
        if int(x) != x or x < 0:
            raise UserError(f"one-run audit: {name} must be a non-negative integer (got {x})")
    r, v, m = int(r), int(v), int(m)
    if not (v <= r <= m):
        raise UserError(f"one-run audit needs 0 <= v <= r <= m (got v={v}, r={r}, m={m})")
    return r, v, m


def one_run_p_value(r: int, v: int, m: int, epsilon: float, delta: float) -> float:
    """p-value of >= v correct guesses out of r under (eps, delta)-DP with m fair-coin canaries.

    Steinke, Nasr, Jagielski 2023, Thm. 5.2 and Algorithm 2: with ``q = e^eps/(1 + e^eps)``,
    ``beta = P[Bin(r, q) >= v]``, ``alpha* = max_{i=1..v} P[v > Bin(r, q) >= v - i] / i`` and the
    p-value is ``min(1, beta + alpha* * delta * 2m)``. Vectorised over i (O(v) numpy work).
    """
    r, v, m = _check_one_run(r, v, m)
    eps = float(epsilon)
    if eps < 0 or math.isnan(eps):
        raise UserError(f"epsilon must be >= 0 (got {epsilon})")
    delta = _check_delta(delta)
    return _one_run_p(r, v, m, eps, delta)


def _one_run_p(r: int, v: int, m: int, eps: float, delta: float) -> float:
    if v == 0:
        return 1.0
    q = float(special.expit(eps))
    beta = float(stats.binom.sf(v - 1, r, q))
    alpha_star = 0.0
    if delta > 0.0:
        # P[v > X >= v - i] for i = 1..v is the cumulative sum of pmf(v-1), pmf(v-2), ..., pmf(0)
        pmf = stats.binom.pmf(np.arange(v - 1, -1, -1), r, q)
        alpha_star = float(np.max(np.cumsum(pmf) / np.arange(1, v + 1)))
    return min(1.0, beta + alpha_star * delta * 2.0 * m)


def one_run_epsilon_lb(r: int, v: int, m: int, delta: float, confidence: float) -> float:
    """Largest epsilon whose one-run p-value is below ``1 - confidence`` (0 if none).

    Steinke, Nasr, Jagielski 2023, Algorithm 2 ("get_eps_audit"): bisection on eps using
    :func:`one_run_p_value`, which is increasing in eps. Tolerance 1e-6 in eps.
    """
    r, v, m = _check_one_run(r, v, m)
    delta = _check_delta(delta)
    confidence = _check_confidence(confidence)
    p_target = 1.0 - confidence
    if _one_run_p(r, v, m, 0.0, delta) >= p_target:
        return 0.0
    lo, hi = 0.0, 1.0
    while _one_run_p(r, v, m, hi, delta) < p_target:
        lo, hi = hi, hi * 2.0
        if hi > 1e4:  # p-value -> P[Bin(r,1) >= v] = 1 as eps -> inf; never reached in practice
            return lo
    while hi - lo > 1e-6:
        mid = 0.5 * (lo + hi)
        if _one_run_p(r, v, m, mid, delta) < p_target:
            lo = mid
        else:
            hi = mid
    return float(lo)


def one_run_bound(
    scores: ArrayLike,
    members: ArrayLike,
    k_pos: int,
    k_neg: int,
    delta: float,
    confidence: float,
) -> LowerBound:
    """One-run audit (Steinke, Nasr, Jagielski 2023, Sec. 5, Algorithm 1 guessing rule).

    ``scores[i]`` is the attack score of canary i, ``members[i]`` whether it was included.
    Requires that each canary was included by an independent fair coin and that k_pos/k_neg were
    fixed without looking at these labels. Guesses "in" for the k_pos highest and "out" for the
    k_neg lowest scores (ties broken deterministically by canary index: among equal scores, the
    higher index counts as higher), abstains on the rest; r = k_pos + k_neg, v = number of correct
    guesses, m = number of canaries. Epsilon from :func:`one_run_epsilon_lb`.
    """
    s, mem = as_scores_members(scores, members)
    m = s.size
    for name, k in (("k_pos", k_pos), ("k_neg", k_neg)):
        if int(k) != k or k < 0:
            raise UserError(f"one-run audit: {name} must be a non-negative integer (got {k})")
    k_pos, k_neg = int(k_pos), int(k_neg)
    if k_pos + k_neg > m:
        raise UserError(f"one-run audit: k_pos + k_neg = {k_pos + k_neg} exceeds the {m} canaries; guess fewer")
    delta = _check_delta(delta)
    confidence = _check_confidence(confidence)
    order = np.lexsort((np.arange(m), s))  # ascending by score, then by index
    low = order[:k_neg]
    high = order[m - k_pos:] if k_pos > 0 else order[:0]
    v_pos = int(np.sum(mem[high]))
    v_neg = int(np.sum(~mem[low]))
    r = k_pos + k_neg
    v = v_pos + v_neg
    eps = one_run_epsilon_lb(r, v, m, delta, confidence)
    details = {
        "r": r,
        "v": v,
        "k_pos": k_pos,
        "k_neg": k_neg,
        "v_pos": v_pos,
        "v_neg": v_neg,
        "m": m,
        "delta": delta,
        "p_value_at_eps": _one_run_p(r, v, m, eps, delta) if r else 1.0,
    }
    return LowerBound("one-run", eps, confidence, m, True, details)


# ---------------------------------------------------------------------------------------------
# Threshold attacks over many runs


def _confusion_curve(s: np.ndarray, mem: np.ndarray, thresholds: np.ndarray, direction: str):
    """(fp, fn) counts of the tests "member iff score >= t" (or "<= t") for each threshold t."""
    pos = np.sort(s[mem])
    neg = np.sort(s[~mem])
    if direction == ">=":
        tp = pos.size - np.searchsorted(pos, thresholds, side="left")
        fp = neg.size - np.searchsorted(neg, thresholds, side="left")
    else:
        tp = np.searchsorted(pos, thresholds, side="right")
        fp = np.searchsorted(neg, thresholds, side="right")
    fn = pos.size - tp
    return fp, fn


def threshold_bounds(
    scores: ArrayLike,
    members: ArrayLike,
    delta: float,
    confidence: float,
    rng: np.random.Generator | int | None,
) -> list[LowerBound]:
    """Multi-run threshold audit: choose the test on one half, bound on the other half.

    Each observation is one independent run: ``members[i]`` says which world it came from and
    ``scores[i]`` the attack score. The observations are split at random, stratified by class,
    into a selection half and a bound half (DESIGN.md Sec. 3; choosing the threshold on the same
    data that the Clopper–Pearson interval uses would invalidate it). On the selection half every
    threshold t and both directions ("member iff score >= t" and "score <= t") are tried, and the
    one maximising the Clopper–Pearson bound *computed on the selection half* is kept for the CP
    bound. That is a count-aware version of maximising the point estimate
    :func:`epsilon_from_rates`, whose raw value is ``inf`` for any threshold with zero false
    positives even if it catches a single member; ties are broken by the point estimate with
    add-one smoothed rates. For the GDP bound the test maximising ``mu_lb`` on the selection half
    is kept (the tail threshold that is best for epsilon is a poor estimator of mu). Each fixed
    test is then applied to the bound half to produce :func:`clopper_pearson_bound` and
    :func:`gdp_bound`; each bound separately holds with the stated confidence.

    Returns ``[cp_bound, gdp_bound]``; details record threshold, direction and split sizes.
    """
    s, mem = as_scores_members(scores, members)
    delta = _check_delta(delta)
    confidence = _check_confidence(confidence)
    if not isinstance(rng, np.random.Generator):
        rng = np.random.default_rng(rng)
    pos_idx = np.flatnonzero(mem)
    neg_idx = np.flatnonzero(~mem)
    if pos_idx.size < 2 or neg_idx.size < 2:
        raise UserError(
            f"threshold audit needs at least 2 observations of each world (got {pos_idx.size} with, "
            f"{neg_idx.size} without the target); run more trials"
        )
    sel_parts, bnd_parts = [], []
    for idx in (pos_idx, neg_idx):
        perm = rng.permutation(idx)
        half = perm.size // 2
        sel_parts.append(perm[:half])
        bnd_parts.append(perm[half:])
    sel = np.concatenate(sel_parts)
    bnd = np.concatenate(bnd_parts)
    s_sel, m_sel = s[sel], mem[sel]
    n_pos_sel, n_neg_sel = int(m_sel.sum()), int((~m_sel).sum())

    alpha = 1.0 - confidence
    cands = np.unique(s_sel)
    # best[method] = (key, threshold, direction); keys compare lexicographically
    best: dict[str, tuple[tuple[float, float], float, str]] = {}
    for direction in (">=", "<="):
        fp, fn = _confusion_curve(s_sel, m_sel, cands, direction)
        fpr_ub = _cp_upper_array(fp, n_neg_sel, alpha / 2)
        fnr_ub = _cp_upper_array(fn, n_pos_sel, alpha / 2)
        smooth = _eps_from_rates_array((fp + 1) / (n_neg_sel + 2), (fn + 1) / (n_pos_sel + 2), delta)
        with np.errstate(invalid="ignore"):
            mu = stats.norm.isf(fpr_ub) - stats.norm.ppf(fnr_ub)
        mu = np.where(np.isnan(mu), 0.0, np.maximum(mu, 0.0))
        objectives = {
            "clopper-pearson": _eps_from_rates_array(fpr_ub, fnr_ub, delta),
            "gdp": mu,
        }
        for method, obj in objectives.items():
            j = int(np.lexsort((-smooth, -obj))[0])
            key = (float(obj[j]), float(smooth[j]))
            if method not in best or key > best[method][0]:
                best[method] = (key, float(cands[j]), direction)

    s_b, m_b = s[bnd], mem[bnd]
    n_pos_b, n_neg_b = int(m_b.sum()), int((~m_b).sum())
    out = []
    for method, fn_bound, sel_name in (
        ("clopper-pearson", clopper_pearson_bound, "selection_epsilon"),
        ("gdp", gdp_bound, "selection_mu_lb"),
    ):
        key, threshold, direction = best[method]
        fp_b, fn_b = _confusion_curve(s_b, m_b, np.array([threshold]), direction)
        b = fn_bound(int(fp_b[0]), n_neg_b, int(fn_b[0]), n_pos_b, delta, confidence)
        extra = {
            "threshold": threshold,
            "direction": direction,
            "rule": f"member iff score {direction} threshold",
            "n_select": int(sel.size),
            "n_bound": int(bnd.size),
            "n_pos_select": n_pos_sel,
            "n_neg_select": n_neg_sel,
            sel_name: key[0],
        }
        out.append(LowerBound(b.method, b.epsilon, b.confidence, b.n, b.valid, {**b.details, **extra}))
    return out
