"""Blind split check: can a classifier that never sees the model tell members from non-members?

Attack AUCs measure a model only when its members and non-members come from one distribution. When
they do not (a different time range, source, preprocessing or class mix), a "blind" classifier that
sees only the records separates them, and membership attacks on that split report the shift, not
the leak [Das, Zhang, Tramèr 2024, "Blind baselines beat membership inference attacks for foundation
models"; Meeus et al. SoK, SaTML 2025]. :func:`blind_split_check` runs that classifier and tests
whether it does better than chance (docs/references.md, "Blind split check").

Method (K folds, default 2; confidence 1 - alpha):

1. Records are flattened to one row of features each; labels, when given, are one more
   (categorical) feature. Sets above ``max_records`` records in all are subsampled (seeded, in
   proportion), which the result says.
2. Cross-fitting: a seeded ``StratifiedKFold`` (membership as the stratum) and scikit-learn's
   ``HistGradientBoostingClassifier`` (fixed ``random_state``) give every record an out-of-fold
   membership score (``cross_val_predict``). Fold k has held-out AUC ``A_k`` over its ``n1_k``
   members and ``n0_k`` non-members (``roc_auc_score``).
3. Null hypothesis: the split is random (members and non-members exchangeable). Given the other
   folds — everything classifier k was trained on — fold k's membership labels are then a uniformly
   random assignment over its records, so ``A_k`` is a Mann–Whitney statistic with its exact null
   law: mean 1/2, variance ``(n1_k + n0_k + 1) / (12 n1_k n0_k)`` (smaller with ties) [Mann & Whitney
   1947]. The folds' AUCs are *not* independent (each classifier learned from the other folds'
   labels), so neither pooling the out-of-fold scores into one AUC nor adding the folds' variances
   gives a valid interval (Bengio & Grandvalet 2004: no unbiased estimator of the variance of
   K-fold cross-validation). Measured on random halves of breast_cancer, the pooled AUC's null z-score
   has variance 1.58 (K = 2) and 1.65 (K = 5), not 1: a Mann–Whitney or DeLong interval on it flags
   10% and 13% of random splits at nominal 5%, while each fold's z-score has variance 0.99. The folds
   are therefore combined by a union bound, valid under any dependence.
4. Per fold, the Hanley–McNeil score interval at confidence ``1 - alpha/K``: all theta with
   ``|A_k - theta| <= z sqrt(V(theta))``, ``z = Phi^-1(1 - alpha/(2K))``,
   ``V(theta) = [theta(1-theta) + (n1-1)(Q1 - theta^2) + (n0-1)(Q2 - theta^2)] / (n1 n0)``,
   ``Q1 = theta/(2-theta)``, ``Q2 = 2 theta^2/(1+theta)`` [Hanley & McNeil 1982, Eq. 2; the interval
   inverts the test as Wilson's does for a proportion]. At theta = 1/2, ``V`` is exactly the
   Mann–Whitney null variance above, so a fold's interval excludes 1/2 exactly when the normal
   Mann–Whitney test rejects at level alpha/K.
5. ``blind_auc = sum_k w_k A_k`` with ``w_k ∝ n1_k n0_k`` (the fraction of within-fold
   member/non-member pairs the classifiers order correctly); its interval is
   ``(sum_k w_k lo_k, sum_k w_k hi_k)``. It covers the weighted mean of the folds' true AUCs whenever
   every fold's interval covers its own, so with probability at least 1 - alpha (union bound), and it
   excludes 1/2 only if some fold's interval does. ``passed`` means the interval contains 1/2: under
   a random split that happens with probability at least ``confidence`` (up to the normal
   approximation of the Mann–Whitney law, accurate at >= 10 records per class and fold).

Two folds are the default because the union bound's price grows like ``z_{alpha/(2K)} sqrt(K)``: at
95% the smallest detectable shift is about 3.2, 4.2 and 5.8 standard errors of a full-sample AUC for
K = 2, 3 and 5. ``p_value`` is the smallest alpha at which the interval excludes 1/2.

This module does not limit threads: scikit-learn's OpenMP pool uses every core unless the caller
limits it (``threadpoolctl.threadpool_limits``; scikit-learn is imported with this module so that a
limit set afterwards applies), which matters on a busy machine.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize, stats
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold, cross_val_predict

from audit.errors import UserError
from audit.stats.outcome import SplitCheck  # the check's result is the results block (one class)

__all__ = ["SplitCheck", "blind_split_check", "summary_line", "hanley_mcneil_variance", "auc_score_interval",
           "MAX_RECORDS", "DEFAULT_FOLDS", "MIN_PER_FOLD", "CLASSIFIER_PARAMS", "combined_fold_interval",
           "fold_interval_p_value", "fold_statistics", "proportional_subsample"]

#: Most records (members and non-members together) the check trains on; larger sets are subsampled.
MAX_RECORDS = 5000
#: Folds of the cross-fitting (module docstring: two give the narrowest valid interval).
DEFAULT_FOLDS = 2
#: Fewest members, and fewest non-members, per fold (for the normal approximation of Mann–Whitney).
MIN_PER_FOLD = 10
#: The blind classifier: scikit-learn's HistGradientBoostingClassifier with these settings (plus
#: ``random_state=seed``); no early stopping, so no inner validation split.
CLASSIFIER_PARAMS = {"max_iter": 100, "learning_rate": 0.1, "max_leaf_nodes": 31, "min_samples_leaf": 20,
                     "early_stopping": False}
#: Above this many distinct labels the label is an ordinary numeric feature (HGB's categorical limit).
_MAX_CATEGORIES = 250


def summary_line(blind_auc: float, blind_auc_ci: Sequence[float], confidence: float, passed: bool) -> str:
    """The check in one line, for the console and reports (:attr:`SplitCheck.summary`).

    Args:
        blind_auc: the blind AUC.
        blind_auc_ci: its interval.
        confidence: the interval's confidence.
        passed: whether the interval holds 1/2.

    Returns:
        The line (blind AUC, its interval, passed or not).
    """
    lo, hi = blind_auc_ci
    head = (f"blind split check: a classifier that never sees the model gets AUC {blind_auc:.3f} "
            f"[{lo:.3f}, {hi:.3f}] at {confidence:.0%}")
    if passed:
        return head + ": members and non-members look alike (consistent with a random split)"
    return head + (": it tells members from non-members, so attack AUCs on this split measure the split, "
                   "not the model; draw members and non-members from one source at random")


def hanley_mcneil_variance(auc: ArrayLike, n_pos: ArrayLike, n_neg: ArrayLike) -> np.ndarray:
    """Hanley & McNeil 1982, Eq. 2: variance of an empirical AUC with true value ``auc`` over ``n_pos``
    positives and ``n_neg`` negatives; at ``auc = 1/2`` it is the Mann–Whitney null variance
    ``(n_pos + n_neg + 1) / (12 n_pos n_neg)`` (docs/references.md, "Blind split check").

    Args:
        auc: the true AUC(s).
        n_pos: the number(s) of positives.
        n_neg: the number(s) of negatives.

    Returns:
        The variance(s), broadcast over the arguments.
    """
    a = np.asarray(auc, dtype=float)
    n1, n0 = np.asarray(n_pos, dtype=float), np.asarray(n_neg, dtype=float)
    excess1 = a * (1 - a) ** 2 / (2 - a)  # Q1 - a^2 with Q1 = a/(2-a)
    excess2 = a ** 2 * (1 - a) / (1 + a)  # Q2 - a^2 with Q2 = 2a^2/(1+a)
    return (a * (1 - a) + (n1 - 1) * excess1 + (n0 - 1) * excess2) / (n1 * n0)


def auc_score_interval(auc: float, n_pos: int, n_neg: int, z: float) -> tuple[float, float]:
    """All theta with ``|auc - theta| <= z sqrt(V(theta))``, V of :func:`hanley_mcneil_variance` (the
    Hanley–McNeil test inverted, as Wilson's interval inverts the binomial test). It contains 1/2
    exactly when ``|auc - 1/2| <= z sqrt((n_pos + n_neg + 1) / (12 n_pos n_neg))``.

    Args:
        auc: the empirical AUC.
        n_pos: the number of positives.
        n_neg: the number of negatives.
        z: the normal quantile of the interval (two-sided).

    Returns:
        (lo, hi).
    """
    def gap(theta: float) -> float:
        return z * float(np.sqrt(hanley_mcneil_variance(theta, n_pos, n_neg)))

    lo = auc if gap(auc) == 0 or auc <= 0 else optimize.brentq(lambda t: auc - t - gap(t), 0.0, auc, xtol=1e-12)
    hi = auc if gap(auc) == 0 or auc >= 1 else optimize.brentq(lambda t: t - auc - gap(t), auc, 1.0, xtol=1e-12)
    return float(lo), float(hi)


def _records(X: Any, y: Any, what: str) -> tuple[np.ndarray, np.ndarray | None]:
    """``X`` as float32 (n, d) (images flattened) and ``y`` as a 1-D array or None; one-line errors."""
    try:
        X = np.asarray(X)
    except (TypeError, ValueError):
        raise UserError(f"{what}: records must be an array (n, features) or (n, H, W)") from None
    if X.ndim < 2 or X.shape[0] == 0 or X[0].size == 0:
        raise UserError(f"{what}: records must be a non-empty array (n, features) or (n, H, W), got shape "
                        f"{X.shape}; give at least one record with at least one feature")
    if not (np.issubdtype(X.dtype, np.number) or X.dtype == bool):
        raise UserError(f"{what}: records must be numbers, got dtype {X.dtype}; encode them as numbers first")
    X = X.reshape(len(X), -1).astype(np.float32, copy=False)
    if not np.all(np.isfinite(X)):
        raise UserError(f"{what}: records contain NaN or infinity; remove or impute those values first")
    if y is None:
        return X, None
    y = np.asarray(y)
    if y.ndim != 1 or len(y) != len(X):
        raise UserError(f"{what}: labels must be one per record, shape ({len(X)},), got {y.shape}")
    if np.issubdtype(y.dtype, np.number) and not np.all(np.isfinite(y)):
        raise UserError(f"{what}: labels contain NaN or infinity; give a label for every record")
    return X, y


def _checked_inputs(members: Any, nonmembers: Any, member_labels: Any, nonmember_labels: Any, confidence: float,
                    folds: int, max_records: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Stacked features, membership (1 = member) and labels (or None), after every check."""
    if not 0 < confidence < 1:
        raise UserError(f"split check: confidence must be in (0, 1), got {confidence}; e.g. 0.95")
    if int(folds) != folds or folds < 2:
        raise UserError(f"split check: folds must be an integer >= 2, got {folds}")
    if int(max_records) != max_records or max_records < 2 * MIN_PER_FOLD * folds:
        raise UserError(f"split check: max_records must be an integer >= {2 * MIN_PER_FOLD * folds} "
                        f"({MIN_PER_FOLD} per set and fold), got {max_records}")
    if (member_labels is None) != (nonmember_labels is None):
        raise UserError("split check: give labels for both members and non-members, or for neither")
    X1, y1 = _records(members, member_labels, "split check members")
    X0, y0 = _records(nonmembers, nonmember_labels, "split check non-members")
    if X1.shape[1] != X0.shape[1]:
        raise UserError(f"split check: members have {X1.shape[1]} features per record and non-members "
                        f"{X0.shape[1]}; give both sets in the same shape")
    need = MIN_PER_FOLD * folds
    if min(len(X1), len(X0)) < need:
        raise UserError(f"split check: {len(X1)} members and {len(X0)} non-members; {folds} folds need at least "
                        f"{need} of each ({MIN_PER_FOLD} per fold): give more records or fewer folds")
    labels = None
    if y1 is not None:
        try:
            labels = np.concatenate([y1, y0])
        except (TypeError, ValueError):
            raise UserError("split check: member and non-member labels must be of one kind (numbers or strings)") \
                from None
    member = np.concatenate([np.ones(len(X1), dtype=np.int64), np.zeros(len(X0), dtype=np.int64)])
    return np.concatenate([X1, X0]), member, labels


def proportional_subsample(member: np.ndarray, max_records: int, need: int, seed: int) -> np.ndarray:
    """Indices of at most ``max_records`` records, members and non-members in proportion but at least
    ``need`` of each (seeded)."""
    n = len(member)
    if n <= max_records:
        return np.arange(n)
    rng = np.random.default_rng([seed, 0x5B11])
    members, nonmembers = np.flatnonzero(member == 1), np.flatnonzero(member == 0)
    keep1 = min(len(members), max(need, round(max_records * len(members) / n)), max_records - need)
    chosen = np.concatenate([rng.choice(members, keep1, replace=False),
                             rng.choice(nonmembers, max_records - keep1, replace=False)])
    return np.sort(chosen)


def _with_labels(X: np.ndarray, labels: np.ndarray | None) -> tuple[np.ndarray, list[int] | None]:
    """Features with the labels' codes as a last column (categorical when few enough)."""
    if labels is None:
        return X, None
    _, codes = np.unique(labels, return_inverse=True)
    categorical = [X.shape[1]] if codes.max() < _MAX_CATEGORIES else None
    return np.column_stack([X, codes.astype(np.float32)]), categorical


def _cross_fitted_scores(X: np.ndarray, member: np.ndarray, categorical: list[int] | None, folds: int,
                         seed: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """Out-of-fold membership scores (``cross_val_predict``) and the held-out indices of each fold."""
    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    held_out = [test for _, test in splitter.split(X, member)]
    model = HistGradientBoostingClassifier(**CLASSIFIER_PARAMS, categorical_features=categorical,
                                           random_state=seed)
    scores = cross_val_predict(model, X, member, cv=splitter, method="predict_proba")[:, 1]
    return scores, held_out


def fold_statistics(member: np.ndarray, scores: np.ndarray, held_out: list[np.ndarray],
                    confidence: float) -> dict[str, Any]:
    """What cross-fitted blind scores say about a split: each fold's held-out AUC, their pair-weighted mean
    with the union-bound interval of :func:`combined_fold_interval` (``passed`` when it holds 1/2), its p-value
    and the pooled AUC; the :class:`SplitCheck` fields of those names.

    Args:
        member: membership of every record (bool).
        scores: every record's held-out score.
        held_out: the records of each fold.
        confidence: the interval's confidence, across the folds.

    Returns:
        ``blind_auc``, ``blind_auc_ci``, ``passed``, ``p_value``, ``fold_aucs``, ``pooled_auc``, ``summary``.
    """
    aucs = np.array([roc_auc_score(member[idx], scores[idx]) for idx in held_out])
    n1 = np.array([member[idx].sum() for idx in held_out], dtype=float)
    n0 = np.array([len(idx) for idx in held_out], dtype=float) - n1
    lo, hi = combined_fold_interval(aucs, n1, n0, 1.0 - confidence)
    weights = n1 * n0 / np.sum(n1 * n0)
    blind_auc, passed = float(weights @ aucs), bool(lo <= 0.5 <= hi)
    return {"blind_auc": blind_auc, "blind_auc_ci": (lo, hi), "passed": passed,
            "p_value": fold_interval_p_value(aucs, n1, n0), "fold_aucs": tuple(float(a) for a in aucs),
            "pooled_auc": float(roc_auc_score(member, scores)),
            "summary": summary_line(blind_auc, (lo, hi), confidence, passed)}


def combined_fold_interval(aucs: np.ndarray, n1: np.ndarray, n0: np.ndarray, alpha: float) -> tuple[float, float]:
    """Pair-weighted mean of the folds' score intervals, each at level ``1 - alpha/K`` (union bound)."""
    z = float(stats.norm.isf(alpha / (2 * len(aucs))))
    bounds = np.array([auc_score_interval(a, p, q, z) for a, p, q in zip(aucs, n1, n0, strict=True)])
    w = n1 * n0 / np.sum(n1 * n0)
    return float(w @ bounds[:, 0]), float(w @ bounds[:, 1])


def fold_interval_p_value(aucs: np.ndarray, n1: np.ndarray, n0: np.ndarray) -> float:
    """Smallest alpha at which the combined interval excludes 1/2 (bisection on log alpha; 1 if none)."""
    def excludes(alpha: float) -> bool:
        lo, hi = combined_fold_interval(aucs, n1, n0, alpha)
        return lo > 0.5 or hi < 0.5

    if not excludes(1.0):
        return 1.0
    low, high = -300.0, 0.0  # log10 alpha: excluded at 10^high, not at 10^low (else p < 1e-300)
    if excludes(10.0 ** low):
        return 0.0
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (low, mid) if excludes(10.0 ** mid) else (mid, high)
    return float(10.0 ** high)


def blind_split_check(members: ArrayLike, nonmembers: ArrayLike, member_labels: ArrayLike | None = None,
                      nonmember_labels: ArrayLike | None = None, *, confidence: float = 0.95,
                      folds: int = DEFAULT_FOLDS, seed: int = 0, max_records: int = MAX_RECORDS) -> SplitCheck:
    """Test whether a classifier that sees only the records tells ``members`` from ``nonmembers``
    [Das, Zhang, Tramèr 2024; Meeus et al. SaTML 2025] (module docstring; docs/references.md,
    "Blind split check").

    ``members``/``nonmembers``: arrays (n, features) or images (n, H, W, ...), flattened; labels are
    optional (for both sets or neither) and join the features. Cross-fitted
    ``HistGradientBoostingClassifier`` over ``folds`` stratified folds (seeded), per-fold Hanley–McNeil
    score intervals at ``1 - (1 - confidence)/folds`` combined by the union bound; at most
    ``max_records`` records (seeded proportional subsample). Bad input is a one-line UserError.

    Args:
        members: the member records, (n, features) or images (n, H, W, ...).
        nonmembers: the non-member records, of the same features.
        member_labels: the members' labels (optional; with ``nonmember_labels``).
        nonmember_labels: the non-members' labels.
        confidence: the family-wise confidence of the interval.
        folds: the number of stratified folds, >= 2.
        seed: the seed of the folds, the classifier and the subsample.
        max_records: the most records used (seeded proportional subsample above it).

    Returns:
        The outcome (:class:`SplitCheck`).

    Raises:
        UserError: records or labels of the wrong shape or type, non-finite values, labels for one set
            only, too few records for the folds, or a parameter out of range.
    """
    X, member, labels = _checked_inputs(members, nonmembers, member_labels, nonmember_labels, confidence, folds,
                                        max_records)
    n_members, n_nonmembers = int(member.sum()), int(len(member) - member.sum())
    keep = proportional_subsample(member, max_records, MIN_PER_FOLD * folds, seed)
    X, member = X[keep], member[keep]
    labels = None if labels is None else labels[keep]
    features, categorical = _with_labels(X, labels)
    scores, held_out = _cross_fitted_scores(features, member, categorical, folds, seed)
    alpha = 1.0 - confidence
    used1 = int(member.sum())
    subsampled = len(keep) < n_members + n_nonmembers
    method = (f"{folds}-fold cross-fitting (StratifiedKFold, seed {seed}) of HistGradientBoostingClassifier"
              f"(random_state={seed}) on {X.shape[1]} flattened features"
              f"{' and the label' if labels is not None else ''}; per-fold held-out AUC with a Hanley-McNeil "
              f"score interval at {1 - alpha / folds:.4g}, pair-weighted mean, union bound over folds")
    if subsampled:
        method += (f"; subsampled to {len(keep)} of {n_members + n_nonmembers} records "
                   f"(seed {seed}, members and non-members in proportion)")
    return SplitCheck(
        **fold_statistics(member, scores, held_out, confidence), confidence=float(confidence),
        n_members=n_members, n_nonmembers=n_nonmembers, n_members_used=used1, n_nonmembers_used=len(keep) - used1,
        subsampled=subsampled, folds=int(folds), n_features=int(X.shape[1]), uses_labels=labels is not None,
        seed=int(seed), method=method)
