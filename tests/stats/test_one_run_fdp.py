"""f-DP one-run auditing (audit.stats.one_run.fdp, Mahloujifar, Melis, Chaudhuri 2025) and the
jax_privacy-comparable frontier figures (audit.stats.one_run.frontier)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special, stats

from audit.errors import UserError
from audit.stats.judgement import judge
from audit.stats.one_run.fdp import (
    approx_dp_blow_up_inverse,
    fdp_epsilon_lb,
    fdp_mu_lb,
    fdp_one_run_bound,
    fdp_rejects,
    gdp_blow_up_inverse,
    tradeoff_blow_up_inverse,
)
from audit.stats.one_run.frontier import frontier_one_run_epsilons
from audit.stats.verdict import Family
from audit.theory.claims import ApproxDPClaim, GaussianClaim
from audit.theory.tradeoff import approx_dp_tradeoff


def _deterministic_normal(mu: float, n: int) -> np.ndarray:
    """n scores at the mid-quantiles of N(mu, 1): reproducible 'samples' (as jax_privacy's tests)."""
    return stats.norm.ppf(np.linspace(0, 1, n, endpoint=False) + 1 / (2 * n)) + mu


def _max_exceedances(reps: int, p: float, tail: float = 1e-3) -> int:
    c = 0
    while stats.binom.sf(c, reps, p) >= tail:
        c += 1
    return c


@pytest.mark.parametrize("shift, steinke, fdp_gdp", [(1, 1.13346, 2.164749), (2, 2.311945, 4.7218075),
                                                    (4, 4.395568, 9.133752)])
def test_pinned_values_of_jax_privacy(shift: float, steinke: float, fdp_gdp: float) -> None:
    """google-deepmind/jax_privacy tests/auditing_test.py: 10,000 + 10,000 canaries, IN ~ N(s, 1),
    OUT ~ N(0, 1), one-sided guesses at the ROC-frontier thresholds with Bonferroni over them,
    significance 0.05, delta 1e-6: Steinke et al.'s bound and the f-DP bound under a GDP null."""
    n = 10_000
    scores = np.r_[_deterministic_normal(shift, n), _deterministic_normal(0.0, n)]
    members = np.r_[np.ones(n, bool), np.zeros(n, bool)]
    got = frontier_one_run_epsilons(scores, members, 1e-6, 0.95)
    assert got["steinke"] == pytest.approx(steinke, rel=1e-5)
    assert got["fdp_gdp"] == pytest.approx(fdp_gdp, rel=1e-5)
    # the f_{eps,delta} null (valid for (eps, delta) with no Gaussian assumption) lies in between
    assert steinke < got["fdp"] < fdp_gdp


def test_the_fdp_test_is_valid_at_its_boundary() -> None:
    """Randomized response at eps = 1 is exactly f_{1,0}-DP: canaries whose score is their RR bit,
    k one-sided guesses fixed in advance; the f_{1,0} null is rejected at most 5% of the time."""
    eps, m, k, reps = 1.0, 400, 100, 400
    p = special.expit(eps)
    rejected = 0
    for seed in range(reps):
        rng = np.random.default_rng(seed)
        members = rng.random(m) < 0.5
        bits = np.where(members, rng.random(m) < p, rng.random(m) < 1 - p)
        scores = bits + 1e-3 * rng.random(m)  # random order within each bit: a post-processing of the output
        rejected += fdp_one_run_bound(scores, members, k, 0.0, 0.95).epsilon > eps
    assert rejected <= _max_exceedances(reps, 0.05)


def test_two_sided_guesses_are_valid_at_the_boundary() -> None:
    """Two-sided guesses ("in" for the top k, "out" for the bottom k) on randomized response at eps = 1,
    exactly f_{1,0}-DP and symmetric: the f_{1,0} null is rejected at most 5% of the time (binomial
    slack), as for one-sided guesses; the bound counts right guesses of both kinds."""
    eps, m, k, reps = 1.0, 400, 100, 400
    p = special.expit(eps)
    rejected = 0
    for seed in range(reps):
        rng = np.random.default_rng([seed, 2])
        members = rng.random(m) < 0.5
        bits = np.where(members, rng.random(m) < p, rng.random(m) < 1 - p)
        scores = bits + 1e-3 * rng.random(m)
        b = fdp_one_run_bound(scores, members, k, 0.0, 0.95, k_neg=k)
        order = np.argsort(scores)
        assert b.details["v_pos"] == members[order[-k:]].sum() and b.details["v_neg"] == (~members[order[:k]]).sum()
        assert b.details["k"] == 2 * k and b.epsilon == fdp_epsilon_lb(2 * k, b.details["v"], m, 0.0, 0.95)
        rejected += b.epsilon > eps
    assert rejected <= _max_exceedances(reps, 0.05)


def test_two_sided_guesses_use_both_tails_of_a_symmetric_mechanism() -> None:
    """On the Gaussian pair (mirror-image tails) the same number of guesses split over both sides is
    right more often than one-sided guesses reaching twice as deep into one tail, so it certifies more
    (deterministic mid-quantile scores: 2,000 + 2,000 canaries at mu = 2)."""
    n = 2000
    scores = np.concatenate([_deterministic_normal(2.0, n), _deterministic_normal(0.0, n)])
    members = np.arange(2 * n) < n
    one = fdp_one_run_bound(scores, members, 200, 1e-5, 0.95)
    two = fdp_one_run_bound(scores, members, 100, 1e-5, 0.95, k_neg=100)
    assert two.details["k"] == one.details["k"] == 200 and two.details["v"] >= one.details["v"]
    assert two.epsilon >= one.epsilon and two.details["ceiling"] == one.details["ceiling"]
    with pytest.raises(UserError):
        fdp_one_run_bound(scores, members, 3000, 1e-5, 0.95, k_neg=1001)


def test_blow_up_inverses_agree_and_the_numerical_one_is_conservative() -> None:
    exact = approx_dp_blow_up_inverse(1.0, 1e-5)
    numeric = tradeoff_blow_up_inverse(lambda a: approx_dp_tradeoff(a, 1.0, 1e-5))
    for y in np.r_[np.logspace(-6, -1, 30), np.linspace(0.1, 1.0, 30)]:
        assert numeric(y) <= exact(y) + 1e-15
        assert numeric(y) == pytest.approx(exact(y), rel=0.05, abs=1e-7)
    gdp = gdp_blow_up_inverse(1.0)
    numeric_gdp = tradeoff_blow_up_inverse(GaussianClaim(1.0).tradeoff)
    for y in (1e-4, 0.01, 0.3, 0.9):
        assert numeric_gdp(y) <= gdp(y) + 1e-15 and numeric_gdp(y) == pytest.approx(gdp(y), rel=0.05)


def test_bounds_increase_with_right_guesses_and_the_ceiling_is_all_right() -> None:
    m, k = 1000, 100
    values = [fdp_epsilon_lb(k, v, m, 1e-5, 0.95) for v in (50, 70, 90, 100)]
    assert values[0] == 0.0 and values == sorted(values) and values[-1] > 1.5
    mus = [fdp_mu_lb(k, v, m, 0.95) for v in (70, 90, 100)]
    assert mus == sorted(mus) and mus[0] > 0


def test_a_claim_whose_own_curve_is_rejected_is_a_violation() -> None:
    """Strong signal against a weak claim: the claim's f is rejected (valid at the confidence), and
    judge() turns that into a violation even when the (eps, delta) figure is below it."""
    n = 2000
    rng = np.random.default_rng(3)
    members = rng.random(n) < 0.5
    scores = members * 3.0 + rng.normal(size=n)
    claim = GaussianClaim(0.5)
    bound = fdp_one_run_bound(scores, members, 200, 1e-5, 0.95, claim.tradeoff)
    assert bound.details["claim_rejected"] and bound.details["mu_lb"] > 0.5
    judged = judge([bound.block()], claim=claim, delta=1e-5, alpha=np.array([0.5]),
                   family=Family(size=1, confidence=0.95))
    assert judged.verdict.status == "violation"
    loose = fdp_one_run_bound(scores, members, 200, 1e-5, 0.95, ApproxDPClaim(30.0, 1e-5).tradeoff)
    assert not loose.details["claim_rejected"]
    assert fdp_rejects(approx_dp_blow_up_inverse(0.1, 1e-5), n, 200, 200, 0.95)
    assert math.isfinite(bound.details["ceiling"]) and bound.details["ceiling"] >= bound.epsilon
