"""The blind split check (audit.stats.split_check): flags shifted splits, one-line errors (its calibration on
random splits and its cost on large sets: tests/e2e/montecarlo/test_split_check_calibration.py). Every check
runs with scikit-learn's OpenMP pool limited to one thread, so the timings hold on a busy shared machine."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import halves

from audit.errors import UserError
from audit.stats.split_check import (
    SplitCheck,
    auc_score_interval,
    blind_split_check,
    hanley_mcneil_variance,
)
from targets.datasets import load_breast_cancer, load_digits

pytestmark = pytest.mark.usefixtures("one_thread")


def test_hanley_mcneil_variance_at_one_half_is_the_mann_whitney_null_variance():
    for n1, n0 in [(10, 10), (37, 200), (1000, 999)]:
        assert hanley_mcneil_variance(0.5, n1, n0) == pytest.approx((n1 + n0 + 1) / (12 * n1 * n0))
    assert hanley_mcneil_variance(1.0, 50, 50) == 0 and hanley_mcneil_variance(0.0, 50, 50) == 0
    # the score interval contains 1/2 exactly when the normal Mann-Whitney test does not reject
    n1, n0, z = 120, 80, 1.96
    edge = 0.5 + z * np.sqrt((n1 + n0 + 1) / (12 * n1 * n0))
    assert auc_score_interval(edge - 1e-6, n1, n0, z)[0] < 0.5 < auc_score_interval(edge + 1e-6, n1, n0, z)[0]
    lo, hi = auc_score_interval(0.9, n1, n0, z)
    assert lo < 0.9 < hi and (0.9 - lo) ** 2 == pytest.approx(z ** 2 * hanley_mcneil_variance(lo, n1, n0))
    assert auc_score_interval(1.0, n1, n0, z)[1] == 1.0


def test_random_split_of_images_without_labels_passes(mnist):
    a, b = halves(400, 7)
    check = blind_split_check(mnist.X[a, 0], mnist.X[b, 0], seed=3)  # (n, 28, 28) images, flattened
    assert check.passed and check.n_features == 784 and not check.uses_labels
    assert check.n_members == 200 and not check.subsampled


def test_a_shifted_class_mix_is_flagged():
    """Members mostly digits 0-4, non-members mostly 5-9 (80/20 each way): flagged with and without labels."""
    data = load_digits()
    rng = np.random.default_rng(0)
    low, high = rng.permutation(np.flatnonzero(data.y < 5)), rng.permutation(np.flatnonzero(data.y >= 5))
    members = np.concatenate([low[:400], high[:100]])
    nonmembers = np.concatenate([high[100:500], low[400:500]])
    with_labels = blind_split_check(data.X[members], data.X[nonmembers], data.y[members], data.y[nonmembers])
    blind = blind_split_check(data.X[members], data.X[nonmembers])
    for check in (with_labels, blind):
        assert not check.passed and check.blind_auc_ci[0] > 0.65 and check.p_value < 1e-6
        assert "measure the split, not the model" in check.summary
    print(f"class mix 80/20: blind AUC {with_labels.blind_auc:.3f} {with_labels.blind_auc_ci} with labels, "
          f"{blind.blind_auc:.3f} without")


@pytest.mark.parametrize("shift", ["noise", "brightness"])
def test_members_and_nonmembers_from_different_sources_are_flagged(shift):
    """Non-members from a second source: the same digits with small added noise (sd 0.02) or 0.03 brighter."""
    data = load_digits()
    a, b = halves(len(data), 11)
    rng = np.random.default_rng(5)
    other = data.X[b] + (rng.normal(0, 0.02, data.X[b].shape) if shift == "noise" else 0.03)
    check = blind_split_check(data.X[a], np.clip(other, 0, 1), data.y[a], data.y[b], seed=1)
    assert not check.passed and check.blind_auc > 0.9
    print(f"{shift} shift: blind AUC {check.blind_auc:.3f} {check.blind_auc_ci}")


def test_result_is_deterministic_and_json_ready():
    data = load_breast_cancer()
    a, b = halves(len(data), 3)
    first = blind_split_check(data.X[a], data.X[b], data.y[a], data.y[b], seed=4, folds=3, confidence=0.9)
    again = blind_split_check(data.X[a], data.X[b], data.y[a], data.y[b], seed=4, folds=3, confidence=0.9)
    assert isinstance(first, SplitCheck) and first == again
    record = json.loads(json.dumps(first.to_dict()))
    assert {"blind_auc", "blind_auc_ci", "passed", "confidence", "method", "summary"} <= set(record)
    assert len(record["fold_aucs"]) == 3 and record["confidence"] == 0.9
    assert "3-fold cross-fitting" in record["method"] and "union bound" in record["method"]
    wider = blind_split_check(data.X[a], data.X[b], data.y[a], data.y[b], seed=4, folds=3, confidence=0.99)
    assert wider.blind_auc == first.blind_auc
    assert wider.blind_auc_ci[0] < first.blind_auc_ci[0] and wider.blind_auc_ci[1] > first.blind_auc_ci[1]


X = np.random.default_rng(0).random((60, 5))


@pytest.mark.parametrize("args, kwargs, message", [
    ((X[:0], X), {}, "members: records must be a non-empty array"),
    ((X, X[:, :4]), {}, "members have 5 features per record and non-members 4"),
    ((X, np.where(X > 0.99, np.nan, X)), {}, "non-members: records contain NaN"),
    ((X, X, np.zeros(60)), {}, "labels for both members and non-members, or for neither"),
    ((X, X, np.zeros(59), np.zeros(60)), {}, r"labels must be one per record, shape \(60,\)"),
    ((X, X, np.zeros(60), np.full(60, np.nan)), {}, "labels contain NaN"),
    ((X[:15], X), {}, "15 members and 60 non-members; 2 folds need at least 20 of each"),
    ((X, X), {"confidence": 1.0}, r"confidence must be in \(0, 1\)"),
    ((X, X), {"folds": 1}, "folds must be an integer >= 2"),
    ((X, X), {"max_records": 30}, "max_records must be an integer >= 40"),
    ((X[:, 0], X), {}, r"records must be a non-empty array .* got shape \(60,\)"),
    ((np.array([["a"] * 5] * 60), X), {}, "records must be numbers"),
])
def test_bad_input_is_a_one_line_user_error(args, kwargs, message):
    with pytest.raises(UserError, match=message) as info:
        blind_split_check(*args, **kwargs)
    assert "\n" not in str(info.value)
