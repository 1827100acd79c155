"""Threshold strategies (audit.stats.thresholds): validity at the stated confidence, power, ties."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import max_exceedances
from scipy import stats

from audit.errors import UserError
from audit.stats.thresholds import (
    BonferroniGrid,
    DesignedThreshold,
    FixedThreshold,
    HeldOutSplit,
    choose_strategy,
    grid_counts,
    threshold_bounds,
)


def _gaussian_scores(n: int, mu: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return np.r_[rng.normal(mu, 1.0, n), rng.normal(0.0, 1.0, n)], np.r_[np.ones(n, bool), np.zeros(n, bool)]


def test_grid_counts_are_fixed_by_the_sample_size() -> None:
    assert grid_counts(1, 10).tolist() == [0]
    g = grid_counts(1000, 10)
    assert g[0] == 0 and g[1] == 1 and g[-1] == 500 and np.all(np.diff(g) > 0)


def test_grid_on_perfectly_separable_scores_gives_the_exact_formula() -> None:
    n = 1000
    rng = np.random.default_rng(6)
    scores = np.r_[1.0 + rng.random(n), rng.random(n)]
    members = np.r_[np.ones(n, bool), np.zeros(n, bool)]
    cp, gdp = threshold_bounds(scores, members, 1e-5, 0.95, BonferroniGrid(), rng=0)
    k = 2 * grid_counts(n, 10).size  # tests on both sides
    a = 0.05 / (2 * k)
    u = 1 - a ** (1 / n)  # Clopper–Pearson upper bound of 0 errors in n at level a
    assert cp.method == "clopper-pearson" and cp.valid and cp.role == "verdict"
    assert cp.details["fp"] == 0 and cp.details["fn"] == 0 and cp.details["tests"] == k
    assert cp.epsilon == pytest.approx(math.log((1 - 1e-5 - u) / u), rel=1e-9)
    assert gdp.method == "gdp" and not gdp.valid and gdp.role == "estimate"
    assert gdp.details["mu_lb"] == pytest.approx(2 * stats.norm.isf(u))
    assert cp.confidence == gdp.confidence == 0.95


@pytest.mark.parametrize("strategy", [BonferroniGrid(), HeldOutSplit()], ids=["grid", "split"])
def test_identical_worlds_rarely_give_a_positive_bound(strategy) -> None:
    """Same distribution in both worlds (true epsilon 0): each bound is positive with probability
    <= 5%; the count over 60 seeds stays within the binomial tail."""
    positives = 0
    for seed in range(60):
        rng = np.random.default_rng(100 + seed)
        scores = rng.normal(size=400)
        members = np.r_[np.ones(200, bool), np.zeros(200, bool)]
        cp, gdp = threshold_bounds(scores, members, 1e-5, 0.95, strategy, rng=rng)
        positives += cp.epsilon > 0 or gdp.details["mu_lb"] > 0
    assert positives <= max_exceedances(60, 0.05)


def test_randomized_response_at_its_exact_epsilon_is_covered() -> None:
    """Binary outputs (all ties) at the exact epsilon of the pair: the grid's random tie-breaking
    makes the order statistics continuous, so the bound exceeds the truth at most 5% of the time;
    and with many draws it gets close to the truth (the segment of the tradeoff curve through
    the corner certifies the full epsilon)."""
    eps = 1.0
    p = math.exp(eps) / (1 + math.exp(eps))
    over, n, reps = 0, 300, 200
    for seed in range(reps):
        rng = np.random.default_rng(seed)
        scores = np.r_[rng.random(n) < p, rng.random(n) < 1 - p].astype(float)
        members = np.r_[np.ones(n, bool), np.zeros(n, bool)]
        cp, _ = threshold_bounds(scores, members, 0.0, 0.95, BonferroniGrid(), rng=rng)
        over += cp.epsilon > eps
    assert over <= max_exceedances(reps, 0.05)
    rng = np.random.default_rng(1)
    n = 50_000
    scores = np.r_[rng.random(n) < p, rng.random(n) < 1 - p].astype(float)
    members = np.r_[np.ones(n, bool), np.zeros(n, bool)]
    cp, _ = threshold_bounds(scores, members, 0.0, 0.95, BonferroniGrid(), rng=rng)
    assert 0.9 < cp.epsilon <= eps


def test_grid_is_more_powerful_than_the_held_out_split() -> None:
    """1,000 + 1,000 scores, IN ~ N(1, 1), OUT ~ N(0, 1), 95%: the grid uses every score and loses
    little to Bonferroni (about 1.3, the figure of a Bonferroni over ROC-frontier thresholds); the
    split halves the data (about 1.05)."""
    grid = [threshold_bounds(*_gaussian_scores(1000, 1.0, s), 1e-5, 0.95, BonferroniGrid(), rng=s)[0].epsilon
            for s in range(8)]
    split = [threshold_bounds(*_gaussian_scores(1000, 1.0, s), 1e-5, 0.95, HeldOutSplit(), rng=s)[0].epsilon
             for s in range(8)]
    assert np.mean(grid) > 1.15
    assert np.mean(grid) > np.mean(split) + 0.1


def test_fixed_threshold_uses_every_observation() -> None:
    scores, members = _gaussian_scores(500, 2.0, 3)
    cp, _ = threshold_bounds(scores, members, 1e-5, 0.9, FixedThreshold(1.0, "by design"), rng=0)
    fp = int(np.sum(scores[~members] >= 1.0))
    fn = int(np.sum(scores[members] < 1.0))
    assert cp.details["fp"] == fp and cp.details["fn"] == fn and cp.n == 1000
    assert cp.details["fpr_ub"] == pytest.approx(stats.beta.ppf(0.95, fp + 1, 500 - fp))
    assert cp.details["choice"] == "by design" and cp.details["strategy"] == "fixed"


def test_designed_threshold_is_the_fixed_test_its_design_gives_for_the_counts() -> None:
    scores, members = _gaussian_scores(500, 2.0, 3)
    asked = []

    def design(n_pos: int, n_neg: int) -> tuple[float, str]:
        asked.append((n_pos, n_neg))
        return 1.0, "by design"

    designed = threshold_bounds(scores, members, 1e-5, 0.9, DesignedThreshold(design), rng=0)
    fixed = threshold_bounds(scores, members, 1e-5, 0.9, FixedThreshold(1.0, "by design"), rng=0)
    assert asked == [(int(members.sum()), int((~members).sum()))]
    assert [b.block().to_dict() for b in designed] == [b.block().to_dict() for b in fixed]


def test_choose_strategy_uses_only_what_is_known_in_advance() -> None:
    fixed = FixedThreshold(0.5)
    assert choose_strategy(100, 100, fixed) is fixed
    assert isinstance(choose_strategy(100, 100), BonferroniGrid)
    assert isinstance(choose_strategy(100, 100, requested="held-out-split"), HeldOutSplit)
    with pytest.raises(UserError):
        choose_strategy(100, 100, requested="best-on-the-data")


def test_gaussian_pair_makes_the_gdp_row_valid() -> None:
    scores, members = _gaussian_scores(2000, 1.0, 4)
    cp, gdp = threshold_bounds(scores, members, 1e-5, 0.95, BonferroniGrid(), rng=0, gaussian_pair=True)
    assert gdp.valid and gdp.role == "verdict" and "none" in gdp.details["assumption"]
    assert 0.5 < gdp.details["mu_lb"] < 1.0


def test_reproducible_and_checked() -> None:
    scores, members = _gaussian_scores(150, 1.0, 7)
    a = [b.block().to_dict() for b in threshold_bounds(scores, members, 1e-5, 0.95, BonferroniGrid(), rng=42)]
    b = [b.block().to_dict() for b in threshold_bounds(scores, members, 1e-5, 0.95, BonferroniGrid(),
                                               rng=np.random.default_rng(42))]
    assert a == b
    with pytest.raises(UserError):
        threshold_bounds(scores[:150], members[:150], 1e-5, 0.95, BonferroniGrid(), rng=0)  # one world only
    with pytest.raises(UserError):
        threshold_bounds(scores, members[:-1], 1e-5, 0.95, BonferroniGrid(), rng=0)
    with pytest.raises(UserError):
        threshold_bounds(np.r_[np.nan, scores[1:]], members, 1e-5, 0.95, BonferroniGrid(), rng=0)
