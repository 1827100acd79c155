"""The Clopper–Pearson epsilon lower bound of one fixed test [Jagielski, Ullman, Oprea 2020, Sec. 4;
Nasr et al. 2021, Sec. 3]. Sources: docs/references.md, "Clopper–Pearson bounds"."""

from __future__ import annotations

from audit.stats.lower_bound import LowerBound
from audit.stats.rates import check_count, cp_upper, epsilon_from_rates
from audit.theory.checks import check_confidence, check_delta

__all__ = ["clopper_pearson_bound"]


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
    confidence = check_confidence(confidence)
    delta = check_delta(delta)
    fp, n_neg = check_count(fp, n_neg, "clopper_pearson_bound (fp, n_neg)")
    fn, n_pos = check_count(fn, n_pos, "clopper_pearson_bound (fn, n_pos)")
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
