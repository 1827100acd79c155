"""The sampling and rate tests on batch logs (audit.stats.sampling_check): the exact law of the batch sizes and
record counts given their total holds each tail's share at two steps and at rates near 0 and 1 (Monte Carlo,
fixed seeds, bound by the 0.999 quantile of Binomial(R, 4 x significance)), and shuffled, fixed-size and
repeated batches are still caught."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from helpers import max_exceedances
from scipy import stats

from audit.errors import UserError
from audit.stats import sampling_check
from audit.stats.sampling_check import conditional_counts, rate_test, sampling_from_batches

#: The accounting check's share per tail with --check-config (alpha 0.05: a third to sampling, four tails).
CHECK_TAIL = 0.05 / 12


def _poisson(rng: np.random.Generator, n: int, q: float, steps: int) -> list[np.ndarray]:
    return [np.flatnonzero(rng.random(n) < q) for _ in range(steps)]


def _shuffled(rng: np.random.Generator, n: int, batch: int, steps: int, drop_last: bool = False) -> list[np.ndarray]:
    out: list[np.ndarray] = []
    while len(out) < steps:
        perm = rng.permutation(n)
        out += [perm[s:s + batch] for s in range(0, n, batch) if not (drop_last and s + batch > n)]
    return out[:steps]


def test_two_equal_poisson_batches_are_not_fixed_size():
    """The review's minimal case: under Poisson sampling two batches of 30 of 300 are frequent
    (P[B_1 = B_2 | S = 60] = Hypergeom(600, 300, 60; 30) = 0.10), far above the tail's share."""
    evidence = sampling_from_batches([np.arange(0, 30), np.arange(30, 60)], 300, significance=CHECK_TAIL)
    assert evidence.verdict == "poisson", evidence
    assert evidence.batch_p_low == pytest.approx(stats.hypergeom.pmf(30, 600, 300, 60))
    assert evidence.draws == 0  # exact at two steps


def _brute_force_t2(n: int, total: int) -> tuple[dict, dict]:
    """The law of (B_1^2 + B_2^2) and of m_2 (records in both steps) given S = total, by enumerating every
    total-subset of the n x 2 grid (each equally likely given S under Poisson sampling)."""
    sizes, both = {}, {}
    for cells in itertools.combinations(range(2 * n), total):
        b1 = sum(c < n for c in cells)
        key = b1**2 + (total - b1) ** 2
        sizes[key] = sizes.get(key, 0) + 1
        records = np.bincount([c % n for c in cells], minlength=n)
        m2 = int(np.count_nonzero(records == 2))
        both[m2] = both.get(m2, 0) + 1
    count = sum(sizes.values())
    return {k: v / count for k, v in sizes.items()}, {k: v / count for k, v in both.items()}


@pytest.mark.parametrize(("n", "total"), [(4, 3), (5, 4), (5, 6)])
def test_the_exact_two_step_laws_match_enumeration(n, total):
    """Every log of two steps and ``total`` records: its p-values are the enumerated tail probabilities."""
    sizes_law, both_law = _brute_force_t2(n, total)
    for b1 in range(max(0, total - n), min(n, total) + 1):
        cells = list(range(b1)) + [n + j for j in range(total - b1)]  # records 0..b1-1 in step 1, 0.. in step 2
        log = [np.array([c for c in cells if c < n], dtype=int), np.array([c - n for c in cells if c >= n], dtype=int)]
        evidence = sampling_from_batches(log, n, significance=0.01)
        obs = b1**2 + (total - b1) ** 2
        assert evidence.batch_p_low == pytest.approx(sum(p for k, p in sizes_law.items() if k <= obs))
        assert evidence.batch_p_high == pytest.approx(sum(p for k, p in sizes_law.items() if k >= obs))
        m2 = int(np.count_nonzero(np.bincount(np.concatenate(log), minlength=n) == 2))
        assert evidence.record_p_low == pytest.approx(sum(p for k, p in both_law.items() if k <= m2))
        assert evidence.record_p_high == pytest.approx(sum(p for k, p in both_law.items() if k >= m2))


@pytest.mark.parametrize(("n", "q", "steps", "reps"), [(37, 0.2, 2, 400), (300, 0.1, 2, 400), (100, 0.99, 4, 200),
                                                       (200, 0.005, 6, 200), (60, 0.3, 8, 200)])
def test_poisson_is_misread_at_most_at_its_significance(n, q, steps, reps):
    """Poisson logs at two steps and at rates near 0 and 1, read at significance 0.01 per tail (four
    tails): misread at most the 0.999 quantile of Bin(reps, 0.04). The review's figures for the chi-square
    rule were 7.7% and 14% at T = 2 at a twelfth of this significance."""
    rng = np.random.default_rng([n, steps, 3])
    misread = sum(sampling_from_batches(_poisson(rng, n, q, steps), n, significance=0.01, seed=r).verdict
                  not in ("poisson", "full-batch", "inconclusive") for r in range(reps))
    assert misread <= max_exceedances(reps, 0.04)


def test_shuffled_fixed_size_and_repeated_logs_are_caught():
    """The zoo's size (300 records, rate 0.1, 20 steps) at the accounting check's share per tail."""
    rng = np.random.default_rng(0)
    n = 300
    for log in (_shuffled(rng, n, 30, 20), _shuffled(rng, n, 64, 20), _shuffled(rng, n, 64, 20, True)):
        evidence = sampling_from_batches(log, n, significance=CHECK_TAIL)
        assert evidence.verdict == "shuffled", evidence
        assert evidence.record_p_low == 1 / (evidence.draws + 1)
        assert "Chua et al. 2024" in evidence.message
    fixed = sampling_from_batches([rng.choice(n, 30, replace=False) for _ in range(20)], n, significance=CHECK_TAIL)
    assert fixed.verdict == "fixed-size" and fixed.batch_dispersion == 0.0
    repeated = sampling_from_batches([np.flatnonzero(rng.random(n) < 0.1)] * 20, n, significance=CHECK_TAIL)
    assert repeated.verdict == "other" and repeated.record_p_high < CHECK_TAIL
    with_replacement = sampling_from_batches([rng.integers(0, n, 30) for _ in range(20)], n)
    assert with_replacement.verdict == "other" and with_replacement.duplicates > 0
    assert sampling_from_batches([np.arange(n)] * 5, n).verdict == "full-batch"
    assert sampling_from_batches([np.arange(10)], n).verdict == "inconclusive"


@pytest.mark.parametrize("count_cells", [0, sampling_check.COUNT_METHOD_CELLS])
@pytest.mark.parametrize(("urns", "cells", "total"), [(3, 3, 4), (4, 2, 3), (2, 5, 6)])
def test_the_conditional_draws_follow_the_enumerated_law(urns, cells, total, count_cells, monkeypatch):
    """The Monte-Carlo draws of the counts given their total (binomial counts, then uniformly random cells
    removed or added; and numpy's "count" method for small grids) against the law of sum c_i^2 enumerated
    over every total-subset of the grid: a chi-square goodness-of-fit test on 20,000 draws does not reject
    at 1e-4, and every draw has the total."""
    monkeypatch.setattr(sampling_check, "COUNT_METHOD_CELLS", count_cells)
    law: dict[int, int] = {}
    for cells_drawn in itertools.combinations(range(urns * cells), total):
        counts = np.bincount([c // cells for c in cells_drawn], minlength=urns)
        key = int(np.sum(counts**2))
        law[key] = law.get(key, 0) + 1
    sims = conditional_counts(urns, cells, total, 20_000, np.random.default_rng([urns, cells, total]))
    assert np.all(sims.sum(axis=1) == total) and sims.min() >= 0 and sims.max() <= cells
    squares = np.sum(sims**2, axis=1)
    keys = sorted(law)
    observed = [int(np.count_nonzero(squares == k)) for k in keys]
    expected = [law[k] / sum(law.values()) * 20_000 for k in keys]
    assert sum(observed) == 20_000
    assert stats.chisquare(observed, expected).pvalue > 1e-4


def test_the_monte_carlo_p_values_are_seeded_and_valid():
    """The same log and seed give the same p-values; the p-values are (1 + k) / (B + 1), B = 10 / significance."""
    rng = np.random.default_rng(4)
    log, n = _poisson(rng, 120, 0.1, 12), 120
    a, b = (sampling_from_batches(log, n, significance=0.02, seed=7) for _ in range(2))
    assert a == b and a.draws == 500
    for p in (a.batch_p_low, a.batch_p_high, a.record_p_low, a.record_p_high):
        assert p * (a.draws + 1) == pytest.approx(round(p * (a.draws + 1)))
    json.dumps(a.to_dict())


def test_rate_test_flags_another_rate_and_rarely_a_correct_one() -> None:
    """Exact two-sided binomial test at alpha 0.01: 300 Poisson logs at their declared rate are flagged at
    most 10 times (the 0.999 quantile of Bin(300, 0.01)); a loop sampling at 0.5 declaring 0.05 always."""
    rng = np.random.default_rng(2)
    rates = np.tile([0.02, 0.1, 0.5], 100)
    flagged = sum(rate_test(_poisson(rng, 200, q, 20), 200, q, 0.01)["rejected"] for q in rates)
    assert flagged <= max_exceedances(300, 0.01)
    wrong = rate_test(_poisson(rng, 200, 0.5, 20), 200, 0.05, 0.01)
    assert wrong["rejected"] and wrong["observed"] == pytest.approx(0.5, abs=0.03) and wrong["declared"] == 0.05
    assert not rate_test([np.arange(50)] * 3, 50, 1.0, 0.01)["rejected"]
    assert rate_test([np.arange(49)] * 3, 50, 1.0, 0.01)["rejected"]
    with pytest.raises(UserError):
        rate_test([[0]], 5, 0.0, 0.01)


def test_sampling_input_errors() -> None:
    with pytest.raises(UserError):
        sampling_from_batches([[0, 1], [5]], 5)
    with pytest.raises(UserError):
        sampling_from_batches([[0, 1], [2]], 1)
    with pytest.raises(UserError):
        sampling_from_batches([[0, 1], [2]], 5, significance=0.7)
