"""Tests for audit.stats.metrics on curves whose values are known by construction."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from audit.errors import UserError
from audit.stats.metrics import (
    attack_metrics,
    auc,
    balanced_accuracy,
    downsample_roc,
    membership_advantage,
    roc,
    tpr_at_fpr,
)
from audit.stats.rates import cp_lower, cp_upper


def test_auc_extremes_and_random() -> None:
    members = np.r_[np.ones(50), np.zeros(50)]
    separated = np.r_[np.arange(50) + 100.0, np.arange(50)]
    assert auc(separated, members) == 1.0
    assert auc(-separated, members) == 0.0
    rng = np.random.default_rng(0)
    n1 = n2 = 10_000
    scores = rng.normal(size=n1 + n2)
    labels = np.r_[np.ones(n1), np.zeros(n2)]
    sd = math.sqrt((n1 + n2 + 1) / (12 * n1 * n2))  # Mann-Whitney null sd of AUC
    assert abs(auc(scores, labels) - 0.5) < 4 * sd


def test_auc_of_gaussian_scores() -> None:
    rng = np.random.default_rng(1)
    mu, n = 1.0, 20_000
    scores = np.r_[rng.normal(mu, 1, n), rng.normal(0, 1, n)]
    labels = np.r_[np.ones(n), np.zeros(n)]
    assert auc(scores, labels) == pytest.approx(stats.norm.cdf(mu / math.sqrt(2)), abs=0.01)


def _step_example() -> tuple[np.ndarray, np.ndarray]:
    neg = np.arange(100.0)  # 0..99
    pos = np.array([99.5, 98.5, 50.5, 10.5])
    return np.r_[pos, neg], np.r_[np.ones(4), np.zeros(100)]


def test_tpr_at_fpr_on_known_step_curve() -> None:
    scores, members = _step_example()
    # FPR <= 1 %: one false positive allowed -> threshold 98.5 catches 99.5 and 98.5
    r = tpr_at_fpr(scores, members, 0.01)
    assert r.tpr == 0.5 and r.fpr_achieved == 0.01 and r.tp == 2 and r.n_pos == 4
    assert r.lo == pytest.approx(cp_lower(2, 4, 0.025)) and r.hi == pytest.approx(cp_upper(2, 4, 0.025))
    assert r.lo <= r.tpr <= r.hi and r.ci == [r.lo, r.hi]
    assert tpr_at_fpr(scores, members, 0.0).tpr == 0.25
    assert tpr_at_fpr(scores, members, 0.005).tpr == 0.25  # no interpolation between steps
    assert tpr_at_fpr(scores, members, 0.5).tpr == 0.75
    # threshold 10.5 catches all members with 89 false positives (11..99): FPR 0.89 exactly
    assert tpr_at_fpr(scores, members, 0.89).tpr == 1.0
    assert tpr_at_fpr(scores, members, 0.8899).tpr == 0.75
    assert tpr_at_fpr(scores, members, 1.0).tpr == 1.0
    with pytest.raises(UserError):
        tpr_at_fpr(scores, members, 1.5)


def test_tpr_at_fpr_gaussian_matches_theory() -> None:
    rng = np.random.default_rng(2)
    mu, n = 2.0, 50_000
    scores = np.r_[rng.normal(mu, 1, n), rng.normal(0, 1, n)]
    labels = np.r_[np.ones(n), np.zeros(n)]
    r = tpr_at_fpr(scores, labels, 0.01)
    assert r.tpr == pytest.approx(stats.norm.cdf(mu - stats.norm.isf(0.01)), abs=0.02)
    assert r.fpr_achieved <= 0.01


def test_advantage_and_balanced_accuracy() -> None:
    scores = np.array([2.5, 3.5, 4.0, 5.0, 0.0, 1.0, 2.0, 3.0])
    members = np.array([1, 1, 1, 1, 0, 0, 0, 0])
    # threshold 2.5: TPR 1, FPR 1/4; threshold 3.5: TPR 3/4, FPR 0 -> best advantage 3/4
    assert membership_advantage(scores, members) == pytest.approx(0.75)
    assert balanced_accuracy(scores, members) == pytest.approx(0.875)
    assert membership_advantage(-scores, members) == 0.0  # higher score = member convention
    sep = np.r_[np.ones(5) * 2, np.zeros(5)]
    assert membership_advantage(sep, np.r_[np.ones(5), np.zeros(5)]) == 1.0


def test_roc_basic_shape() -> None:
    scores, members = _step_example()
    f, t, thr = roc(scores, members)
    assert f[0] == 0 and t[0] == 0 and f[-1] == 1 and t[-1] == 1
    assert np.all(np.diff(f) >= 0) and np.all(np.diff(t) >= 0)
    assert np.all(np.diff(thr) <= 0)


def test_attack_metrics_json_and_downsampled_roc() -> None:
    rng = np.random.default_rng(3)
    n = 50_000
    scores = np.r_[rng.normal(1.5, 1, n), rng.normal(0, 1, n)]
    labels = np.r_[np.ones(n), np.zeros(n)]
    d = attack_metrics(scores, labels)
    json.dumps(d.to_dict(), allow_nan=False)
    for key in ("auc", "balanced_accuracy", "advantage", "tpr_at_fpr", "tpr_at_fpr_ci", "roc"):
        assert key in d.to_dict()
    assert set(d.tpr_at_fpr) == {"0.01", "0.001"}
    for k, (lo, hi) in d.tpr_at_fpr_ci.items():
        assert lo <= d.tpr_at_fpr[k] <= hi
    assert d.balanced_accuracy == pytest.approx(0.5 * (1 + d.advantage))
    assert d.auc == pytest.approx(auc(scores, labels))
    fr, tr = np.array(d.roc.fpr), np.array(d.roc.tpr)
    assert 10 < fr.size <= 400
    assert (fr[0], tr[0]) == (0.0, 0.0) and (fr[-1], tr[-1]) == (1.0, 1.0)
    assert np.all(np.diff(fr) >= 0) and np.all(np.diff(tr) >= 0)
    assert np.sum((fr > 0) & (fr <= 1e-3)) >= 5  # the low-FPR region is kept
    # every kept point lies on the full curve
    f, t, _ = roc(scores, labels)
    full = set(zip(f.tolist(), t.tolist(), strict=True))
    assert all((a, b) in full for a, b in zip(fr.tolist(), tr.tolist(), strict=True))


def test_downsample_keeps_small_curves() -> None:
    d = downsample_roc([0.0, 0.5, 1.0], [0.0, 0.7, 1.0])
    assert d.to_dict() == {"fpr": [0.0, 0.5, 1.0], "tpr": [0.0, 0.7, 1.0]}


def test_metrics_input_errors() -> None:
    with pytest.raises(UserError):
        auc([0.1, 0.2], [1, 1])
    with pytest.raises(UserError):
        auc([0.1, 0.2, 0.3], [1, 0])
    with pytest.raises(UserError):
        attack_metrics([0.1, float("nan")], [1, 0])
    with pytest.raises(UserError):
        auc([0.1, 0.2], [1, 2])
