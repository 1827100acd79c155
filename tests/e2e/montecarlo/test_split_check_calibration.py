"""The blind split check (audit.stats.split_check) by Monte Carlo: calibrated on random splits at the stated
confidence, and bounded cost on a large set. Every check runs with scikit-learn's OpenMP pool limited to one
thread, so the timings hold on a busy shared machine."""

from __future__ import annotations

import time

import numpy as np
import pytest
from helpers import halves
from scipy import stats

from audit.stats.split_check import (
    MAX_RECORDS,
    blind_split_check,
)
from targets.datasets import load_breast_cancer

pytestmark = pytest.mark.usefixtures("one_thread")

#: Random splits checked for calibration.
NULL_SEEDS = 40


def test_random_splits_pass_at_the_stated_confidence():
    """A random split of one source passes at 95% in at least 95% of seeds: with 40 seeds, at least the
    0.1% quantile of Bin(40, 0.95) (33 passes) — the figure a 95% pass rate would miss once in 1,000."""
    data = load_breast_cancer()
    checks = []
    for seed in range(NULL_SEEDS):
        a, b = halves(len(data), 1000 + seed)
        checks.append(blind_split_check(data.X[a], data.X[b], data.y[a], data.y[b], seed=seed))
    passes = sum(c.passed for c in checks)
    assert passes >= stats.binom.ppf(0.001, NULL_SEEDS, 0.95)
    aucs = np.array([c.blind_auc for c in checks])
    assert abs(aucs.mean() - 0.5) < 0.02  # centred on chance
    assert all(c.blind_auc_ci[0] <= c.blind_auc <= c.blind_auc_ci[1] for c in checks)
    assert all((c.p_value > 0.05) == c.passed for c in checks)
    print(f"random splits: {passes}/{NULL_SEEDS} pass; blind AUC mean {aucs.mean():.3f}, "
          f"range {aucs.min():.3f}-{aucs.max():.3f}")


def test_a_large_set_is_subsampled_and_fast(mnist):
    """60,000 records of 784 features (MNIST's 5,000-image sample, 12 times): the seeded subsample keeps
    the cost bounded."""
    images, labels = np.tile(mnist.X[:, 0], (12, 1, 1)), np.tile(mnist.y, 12)
    order = np.random.default_rng(0).permutation(len(images))
    m, n = order[:30000], order[30000:]
    start = time.perf_counter()
    check = blind_split_check(images[m], images[n], labels[m], labels[n], seed=0)
    elapsed = time.perf_counter() - start
    assert check.subsampled and check.n_members == check.n_nonmembers == 30000
    assert check.n_members_used + check.n_nonmembers_used == MAX_RECORDS
    assert abs(check.n_members_used - MAX_RECORDS / 2) <= 1 and "subsampled to 5000 of 60000" in check.method
    assert check.passed
    assert elapsed < 45, f"{elapsed:.1f} s"
    print(f"60,000 x 784: {elapsed:.1f} s (one thread), blind AUC {check.blind_auc:.3f}")
