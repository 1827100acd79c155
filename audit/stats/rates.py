"""Error rates of threshold tests and their exact binomial confidence bounds.

The building blocks of every empirical lower bound: validated scores and membership labels, the
false-positive / false-negative counts of threshold tests, one-sided Clopper–Pearson bounds on a
binomial rate [Clopper & Pearson 1934], and the smallest epsilon compatible with a pair of error
rates [Kairouz, Oh, Viswanath 2015, Thm. 2.1]. Convention everywhere: higher score = "member".
Formulas and sources: docs/references.md, "Clopper–Pearson bounds".
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

from audit.errors import UserError
from audit.stats.outcome import ErrorPoint
from audit.theory.checks import check_delta

__all__ = ["as_scores_members", "check_count", "cp_upper", "cp_lower", "cp_upper_array", "epsilon_from_rates",
           "epsilon_from_rates_array", "mu_from_rates", "confusion_counts", "operating_point", "rate_point"]


def as_scores_members(scores: ArrayLike, members: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Validate and convert attack scores and membership labels.

    Returns ``(scores as float64 1-D array, members as bool 1-D array)``. Raises UserError for
    mismatched lengths, non-finite scores or labels other than 0/1/True/False.

    Args:
        scores: one attack score per record.
        members: whether each record is a member (0/1 or bool), of the same length.

    Returns:
        (scores, members), as above.

    Raises:
        UserError: as above.
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
        return s, m_raw
    mf = m_raw.astype(float)
    if not np.all((mf == 0) | (mf == 1)):
        raise UserError("members must be 0/1 or True/False (1 = the record was in the training set)")
    return s, mf == 1


def check_count(k: int, n: int, what: str) -> tuple[int, int]:
    """``(k, n)`` as integers with ``0 <= k <= n``; UserError otherwise.

    Args:
        k: the count.
        n: the number of trials.
        what: how the error names the count.

    Returns:
        (k, n) as integers.

    Raises:
        UserError: n not a non-negative integer, or k not an integer in [0, n].
    """
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


def cp_upper(k: int, n: int, alpha: float) -> float:
    """One-sided Clopper–Pearson upper bound on a binomial rate (Clopper & Pearson 1934).

    ``P[p <= cp_upper(k, n, alpha)] >= 1 - alpha``; equals ``Beta.ppf(1 - alpha, k + 1, n - k)``,
    is 1 when ``k == n`` (including n == 0) and ``1 - alpha^(1/n)`` when ``k == 0``.

    Args:
        k: the number of successes, in [0, n].
        n: the number of trials.
        alpha: the error probability, 1 - confidence.

    Returns:
        The upper bound in [0, 1].

    Raises:
        UserError: k or n out of range.
    """
    k, n = check_count(k, n, "cp_upper")
    return float(cp_upper_array(np.array([k]), n, _check_alpha(alpha))[0])


def cp_lower(k: int, n: int, alpha: float) -> float:
    """One-sided Clopper–Pearson lower bound: ``P[p >= cp_lower(k, n, alpha)] >= 1 - alpha``.

    Equals ``Beta.ppf(alpha, k, n - k + 1)``; 0 when ``k == 0`` (including n == 0) and
    ``alpha^(1/n)`` when ``k == n``.

    Args:
        k: the number of successes, in [0, n].
        n: the number of trials.
        alpha: the error probability, 1 - confidence.

    Returns:
        The lower bound in [0, 1].

    Raises:
        UserError: k or n out of range.
    """
    k, n = check_count(k, n, "cp_lower")
    alpha = _check_alpha(alpha)
    if k <= 0:
        return 0.0
    return float(stats.beta.ppf(alpha, k, n - k + 1))


def cp_upper_array(k: ArrayLike, n: int, alpha: float) -> np.ndarray:
    """Vectorised :func:`cp_upper` for many counts with a common n (no validation).

    Args:
        k: the counts.
        n: the number of trials of each.
        alpha: the error probability, 1 - confidence.

    Returns:
        The upper bounds, an array of k's shape.
    """
    k = np.asarray(k, dtype=float)
    out = np.ones_like(k)
    mask = k < n
    if np.any(mask):
        out[mask] = stats.beta.ppf(1.0 - alpha, k[mask] + 1, n - k[mask])
    return out


def epsilon_from_rates_array(fpr: ArrayLike, fnr: ArrayLike, delta: float) -> np.ndarray:
    """Vectorised :func:`epsilon_from_rates` (no validation).

    Args:
        fpr: false-positive rates.
        fnr: false-negative rates, of the same shape.
        delta: the delta.

    Returns:
        The epsilons, an array of the rates' shape.
    """
    fpr = np.asarray(fpr, dtype=float)
    fnr = np.asarray(fnr, dtype=float)
    num1 = 1.0 - delta - fnr
    num2 = 1.0 - delta - fpr
    with np.errstate(divide="ignore", invalid="ignore"):
        t1 = np.where(num1 > 0, np.where(fpr > 0, np.log(np.maximum(num1, 1e-300) / np.where(fpr > 0, fpr, 1.0)),
                                         np.inf), -np.inf)
        t2 = np.where(num2 > 0, np.where(fnr > 0, np.log(np.maximum(num2, 1e-300) / np.where(fnr > 0, fnr, 1.0)),
                                         np.inf), -np.inf)
    return np.maximum(0.0, np.maximum(t1, t2))


def epsilon_from_rates(fpr: float, fnr: float, delta: float) -> float:
    """Smallest epsilon compatible with a test of the given false-positive/negative rates.

    From the hypothesis-testing characterisation of (eps, delta)-DP (Kairouz, Oh, Viswanath 2015,
    Thm. 2.1; Dong, Roth, Su 2019, Prop. 2.5):
    ``eps >= max(0, ln((1 - delta - FNR)/FPR), ln((1 - delta - FPR)/FNR))``.

    Zero rates: a term whose numerator ``1 - delta - (other rate)`` is positive and whose
    denominator is 0 is ``+inf`` (no finite epsilon explains the rates with this delta); a term
    with non-positive numerator contributes nothing. Clopper–Pearson upper bounds never produce a
    zero rate when there is at least one trial, so the bounds built on them are always finite.

    Args:
        fpr: the test's false-positive rate (an upper bound on it, for a lower bound on epsilon).
        fnr: its false-negative rate (likewise).
        delta: the delta.

    Returns:
        The smallest epsilon (>= 0, inf as above).
    """
    fpr = float(fpr)
    fnr = float(fnr)
    if not (0.0 <= fpr <= 1.0 and 0.0 <= fnr <= 1.0):
        raise UserError(f"rates must lie in [0, 1] (got fpr={fpr}, fnr={fnr})")
    delta = check_delta(delta)
    return float(epsilon_from_rates_array(np.array(fpr), np.array(fnr), delta))


def mu_from_rates(fpr: ArrayLike, fnr: ArrayLike) -> np.ndarray:
    """The smallest GDP mu compatible with the rates: ``Phi^-1(1 - FPR) - Phi^-1(FNR)``, clipped at 0.

    mu-GDP forces ``FNR >= Phi(Phi^-1(1 - FPR) - mu)`` (Dong, Roth, Su 2019, Def. 2.7), so with upper
    bounds on both rates this is a lower bound on mu [Nasr et al. 2023, Sec. 4]. Vectorised; nan
    (from rates 1 and 1) becomes 0.

    Args:
        fpr: false-positive rates (upper bounds, for a lower bound on mu).
        fnr: false-negative rates, of the same shape.

    Returns:
        mu for each pair of rates, >= 0.
    """
    with np.errstate(invalid="ignore"):
        mu = stats.norm.isf(np.asarray(fpr, dtype=float)) - stats.norm.ppf(np.asarray(fnr, dtype=float))
    return np.where(np.isnan(mu), 0.0, np.maximum(mu, 0.0))


def confusion_counts(scores: np.ndarray, members: np.ndarray, thresholds: ArrayLike,
                     direction: str = ">=") -> tuple[np.ndarray, np.ndarray]:
    """(false positives, false negatives) of the tests "member iff score >= t" (``direction=">="``)
    or "member iff score <= t" (``"<="``) for each threshold t.

    Args:
        scores: the scores.
        members: whether each score's record is a member (bool), of the same length.
        thresholds: the thresholds t.
        direction: ``">="`` or ``"<="``.

    Returns:
        (false positives, false negatives), one count per threshold.
    """
    thresholds = np.asarray(thresholds, dtype=float)
    pos = np.sort(scores[members])
    neg = np.sort(scores[~members])
    if direction == ">=":
        tp = pos.size - np.searchsorted(pos, thresholds, side="left")
        fp = neg.size - np.searchsorted(neg, thresholds, side="left")
    elif direction == "<=":
        tp = np.searchsorted(pos, thresholds, side="right")
        fp = np.searchsorted(neg, thresholds, side="right")
    else:
        raise ValueError(f"direction must be '>=' or '<=', got {direction!r}")
    return fp, pos.size - tp


def rate_point(k: int, n: int, confidence: float) -> tuple[float, list[float]]:
    """Empirical rate k/n with its two-sided Clopper–Pearson interval at ``confidence``.

    Args:
        k: the count, in [0, n].
        n: the number of trials.
        confidence: the interval's confidence.

    Returns:
        (k/n, [lo, hi]).
    """
    alpha = 1 - confidence
    return k / n, [cp_lower(k, n, alpha / 2), cp_upper(k, n, alpha / 2)]


def operating_point(label: str, details: dict, confidence: float) -> ErrorPoint:
    """The (FPR, FNR) operating point of a threshold test, with two-sided Clopper–Pearson intervals,
    from a bound's ``details`` (``fp``/``n_neg``, ``fn``/``n_pos``, ``threshold``): one point of a
    report's tradeoff figure.

    Args:
        label: the point's label in the figure (the attack or bound).
        details: the bound's details, with ``fp``, ``n_neg``, ``fn``, ``n_pos`` and ``threshold``.
        confidence: the intervals' confidence.

    Returns:
        The point (:class:`audit.stats.outcome.ErrorPoint`), labelled, with its threshold.
    """
    fpr, fpr_ci = rate_point(int(details["fp"]), int(details["n_neg"]), confidence)
    fnr, fnr_ci = rate_point(int(details["fn"]), int(details["n_pos"]), confidence)
    return ErrorPoint(label=label, threshold=float(details["threshold"]), fpr=fpr, fnr=fnr, fpr_ci=fpr_ci,
                      fnr_ci=fnr_ci)
