"""Tests for the lower bounds of audit.stats: every expected value is derived independently from the maths."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from helpers import max_exceedances
from scipy import optimize, stats

from audit.errors import UserError
from audit.stats.lower_bound import LowerBound
from audit.stats.one_run.steinke import one_run_bound, one_run_epsilon_lb, one_run_p_value
from audit.stats.rates import cp_lower, cp_upper, epsilon_from_rates
from audit.stats.thresholds import FixedThreshold, threshold_bounds
from audit.theory.gaussian import gaussian_delta, gaussian_epsilon


def _fixed_test(fp: int, n_neg: int, fn: int, n_pos: int, delta: float, confidence: float):
    """The Clopper–Pearson and GDP rows of one test fixed in advance ("member iff score >= 0.5") whose
    counts are (fp of n_neg, fn of n_pos)."""
    scores = np.r_[np.ones(fp), np.zeros(n_neg - fp), np.zeros(fn), np.ones(n_pos - fn)]
    members = np.r_[np.zeros(n_neg, bool), np.ones(n_pos, bool)]
    return threshold_bounds(scores, members, delta, confidence, FixedThreshold(0.5), rng=0)


# --------------------------------------------------------------------------- Clopper–Pearson


@pytest.mark.parametrize("n", [1, 10, 100, 1000])
@pytest.mark.parametrize("a", [0.05, 0.01])
def test_cp_closed_forms_at_edges(n: int, a: float) -> None:
    assert cp_upper(0, n, a) == pytest.approx(1 - a ** (1 / n), rel=1e-10)
    assert cp_lower(n, n, a) == pytest.approx(a ** (1 / n), rel=1e-10)
    assert cp_upper(n, n, a) == 1.0
    assert cp_lower(0, n, a) == 0.0


@pytest.mark.parametrize("k,n", [(1, 10), (5, 20), (37, 100), (999, 1000)])
def test_cp_defining_tail_equations(k: int, n: int) -> None:
    a = 0.05
    ub = cp_upper(k, n, a)
    lb = cp_lower(k, n, a)
    # upper bound: P[Bin(n, ub) <= k] = a; lower bound: P[Bin(n, lb) >= k] = a
    assert stats.binom.cdf(k, n, ub) == pytest.approx(a, rel=1e-8)
    assert stats.binom.sf(k - 1, n, lb) == pytest.approx(a, rel=1e-8)
    assert lb < k / n < ub


def test_cp_empty_sample_is_trivial_and_input_checked() -> None:
    assert cp_upper(0, 0, 0.05) == 1.0
    assert cp_lower(0, 0, 0.05) == 0.0
    with pytest.raises(UserError):
        cp_upper(5, 3, 0.05)
    with pytest.raises(UserError):
        cp_upper(1, 3, 1.5)
    with pytest.raises(UserError):
        cp_lower(-1, 3, 0.05)


def test_cp_upper_coverage() -> None:
    rng = np.random.default_rng(1)
    p, n, a, reps = 0.3, 50, 0.05, 1000
    ks = rng.binomial(n, p, size=reps)
    misses = sum(cp_upper(int(k), n, a) < p for k in ks)
    assert misses <= max_exceedances(reps, a)
    assert misses > 0  # CP at n=50 is conservative but not vacuous: expected ~ 2-5 %


# --------------------------------------------------------------------------- epsilon_from_rates


def test_epsilon_from_rates_values_and_symmetry() -> None:
    assert epsilon_from_rates(0.1, 0.1, 0.0) == pytest.approx(math.log(9))
    assert epsilon_from_rates(0.1, 0.1, 0.05) == pytest.approx(math.log(0.85 / 0.1))
    assert epsilon_from_rates(0.05, 0.3, 0.0) == pytest.approx(math.log(0.7 / 0.05))
    for fpr, fnr in [(0.05, 0.3), (0.2, 0.01), (0.4, 0.45)]:
        assert epsilon_from_rates(fpr, fnr, 1e-5) == pytest.approx(epsilon_from_rates(fnr, fpr, 1e-5))


def test_epsilon_from_rates_edges() -> None:
    assert epsilon_from_rates(0.5, 0.5, 0.0) == 0.0  # random guessing
    assert epsilon_from_rates(0.7, 0.6, 0.0) == 0.0  # worse than random: no evidence
    assert epsilon_from_rates(0.0, 0.5, 0.0) == math.inf  # no finite eps explains it with delta=0
    assert epsilon_from_rates(0.0, 1.0, 0.0) == 0.0  # trivial "never member" test
    assert epsilon_from_rates(0.0, 0.5, 0.5) == 0.0  # delta = 1 - fnr absorbs it
    with pytest.raises(UserError):
        epsilon_from_rates(1.2, 0.1, 0.0)
    with pytest.raises(UserError):
        epsilon_from_rates(0.1, 0.1, 1.0)


# --------------------------------------------------------------------------- CP bound


def test_clopper_pearson_bound_of_a_fixed_test_matches_formula() -> None:
    b, _ = _fixed_test(fp=3, n_neg=200, fn=10, n_pos=300, delta=1e-5, confidence=0.9)
    fpr_ub = stats.beta.ppf(1 - 0.05, 4, 197)
    fnr_ub = stats.beta.ppf(1 - 0.05, 11, 290)
    expected = max(math.log((1 - 1e-5 - fnr_ub) / fpr_ub), math.log((1 - 1e-5 - fpr_ub) / fnr_ub), 0)
    assert isinstance(b, LowerBound)
    assert b.method == "clopper-pearson" and b.valid and b.n == 500 and b.confidence == 0.9
    assert b.epsilon == pytest.approx(expected, rel=1e-10)
    for key in ("fp", "fn", "n_neg", "n_pos", "fpr_ub", "fnr_ub"):
        assert key in b.details
    d = b.block().to_dict()
    assert set(d) == {"method", "epsilon", "confidence", "n", "valid", "role", "statement", "details"}
    assert d["statement"].startswith("valid bound on epsilon, no assumption")
    assert d["role"] == "verdict"
    json.dumps(d, allow_nan=False)


@pytest.mark.parametrize("conf", [0.0, 1.0, 1.5, -0.1])
def test_bad_confidence_is_user_error(conf: float) -> None:
    with pytest.raises(UserError):
        _fixed_test(0, 10, 0, 10, 0.0, conf)
    with pytest.raises(UserError):
        one_run_epsilon_lb(10, 10, 10, 0.0, conf)


def test_cp_bound_on_randomized_response_is_valid_and_informative() -> None:
    """Randomized response with eps=1 is (1, 0)-DP and its best test has FPR = FNR = 1/(1+e)."""
    eps, n, reps, conf = 1.0, 2000, 200, 0.95
    rng = np.random.default_rng(2)
    flip = 1 / (1 + math.e)
    fps = rng.binomial(n, flip, size=reps)
    fns = rng.binomial(n, flip, size=reps)
    bounds = np.array([_fixed_test(int(a), n, int(b), n, 0.0, conf)[0].epsilon for a, b in zip(fps, fns, strict=True)])
    assert np.sum(bounds > eps) <= max_exceedances(reps, 1 - conf)
    assert bounds.mean() > 0.75 * eps  # not vacuous
    # the naive point estimate is NOT a valid bound: it exceeds eps about half the time
    naive = np.array([epsilon_from_rates(a / n, b / n, 0.0) for a, b in zip(fps, fns, strict=True)])
    assert np.mean(naive > eps) > 0.3


# --------------------------------------------------------------------------- GDP


def _direct_gdp_delta(eps: float, mu: float) -> float:
    return stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)


@pytest.mark.parametrize("mu", [0.3, 1.0, 2.0, 5.0])
def test_gdp_delta_matches_direct_formula(mu: float) -> None:
    assert gaussian_delta(0.0, mu) == pytest.approx(2 * stats.norm.cdf(mu / 2) - 1, rel=1e-12)
    for eps in [0.1, 1.0, 3.0]:
        assert gaussian_delta(eps, mu) == pytest.approx(_direct_gdp_delta(eps, mu), rel=1e-8, abs=1e-300)


def test_gdp_delta_stable_for_large_eps() -> None:
    vals = [gaussian_delta(e, 1.0) for e in (20.0, 50.0, 200.0, 1000.0)]
    assert all(0.0 <= v < 1e-30 for v in vals)
    assert all(a >= b for a, b in zip(vals, vals[1:], strict=False))
    assert gaussian_delta(30.0, 1.0) > 0.0  # direct formula underflows to 0 - 0 here; log space does not
    assert gaussian_delta(1.0, 0.0) == 0.0 and gaussian_delta(1.0, math.inf) == 1.0


def test_gdp_epsilon_known_values() -> None:
    indep = optimize.brentq(lambda e: _direct_gdp_delta(e, 1.0) - 1e-5, 0.0, 50.0, xtol=1e-12)
    assert gaussian_epsilon(1.0, 1e-5) == pytest.approx(indep, abs=1e-8)
    # analytic Gaussian mechanism (Balle & Wang 2018): eps=1, delta=1e-5, Delta=1 -> sigma ~ 3.7306
    assert gaussian_epsilon(1 / 3.7306, 1e-5) == pytest.approx(1.0, abs=1e-3)


@pytest.mark.parametrize("mu", [0.5, 1.0, 3.0, 8.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-5, 1e-10])
def test_gdp_epsilon_inverts_gdp_delta(mu: float, delta: float) -> None:
    e = gaussian_epsilon(mu, delta)
    assert e > 0
    assert gaussian_delta(e, mu) == pytest.approx(delta, rel=1e-6)


def test_gdp_epsilon_edges() -> None:
    assert gaussian_epsilon(1.0, gaussian_delta(0.0, 1.0)) == 0.0
    assert gaussian_epsilon(1.0, 0.9) == 0.0
    assert gaussian_epsilon(0.0, 1e-5) == 0.0
    assert gaussian_epsilon(1.0, 0.0) == math.inf


def test_gdp_bound_of_a_fixed_test_on_gaussian_scores_recovers_mu() -> None:
    mu, n = 2.0, 50_000
    rng = np.random.default_rng(3)
    pos = rng.normal(mu, 1.0, n)
    neg = rng.normal(0.0, 1.0, n)
    t = mu / 2
    fp, fn = int(np.sum(neg >= t)), int(np.sum(pos < t))
    _, b = _fixed_test(fp, n, fn, n, 1e-5, 0.95)
    assert b.method == "gdp" and b.valid is False
    assert b.details["assumption"] == "epsilon assumes a Gaussian tradeoff; mu_lb is rigorous"
    # CP widens each rate by ~2.2 sd = 0.0036 -> Phi^-1 shifts by ~0.015 each side
    assert 1.9 < b.details["mu_lb"] < mu
    assert b.epsilon == pytest.approx(gaussian_epsilon(b.details["mu_lb"], 1e-5))
    assert b.epsilon < gaussian_epsilon(mu, 1e-5)
    # a useless test gives mu_lb = 0
    assert _fixed_test(50, 100, 50, 100, 1e-5, 0.95)[1].details["mu_lb"] == 0.0


# --------------------------------------------------------------------------- one run


def _direct_one_run_p(r: int, v: int, m: int, eps: float, delta: float) -> float:
    """Loop transcription of Steinke, Nasr, Jagielski 2023, Algorithm 2 (p-value)."""
    q = math.exp(eps) / (1 + math.exp(eps))
    beta = sum(stats.binom.pmf(j, r, q) for j in range(v, r + 1))
    alpha = 0.0
    for i in range(1, v + 1):
        mass = sum(stats.binom.pmf(j, r, q) for j in range(v - i, v))
        alpha = max(alpha, mass / i)
    return min(1.0, beta + alpha * delta * 2 * m)


@pytest.mark.parametrize("r,v,m,delta", [(30, 25, 60, 1e-3), (50, 40, 50, 1e-5), (20, 20, 100, 0.0)])
def test_one_run_p_value_matches_direct_loop(r: int, v: int, m: int, delta: float) -> None:
    for eps in [0.0, 0.5, 1.5, 3.0]:
        assert one_run_p_value(r, v, m, eps, delta) == pytest.approx(_direct_one_run_p(r, v, m, eps, delta), rel=1e-9)


def test_one_run_p_value_monotone_in_eps() -> None:
    ps = [one_run_p_value(500, 400, 1000, e, 1e-5) for e in np.linspace(0, 5, 60)]
    assert all(a <= b + 1e-15 for a, b in zip(ps, ps[1:], strict=False))
    # at eps = 0 beta ~ 1e-40, but the delta term alpha* * delta * 2m is ~ 0.5/150 * 0.02 ~ 1e-4
    assert ps[0] < 1e-3 and ps[-1] > 0.5


def test_one_run_eps_increases_with_v() -> None:
    lbs = [one_run_epsilon_lb(1000, v, 1000, 1e-5, 0.95) for v in range(500, 1001, 50)]
    assert lbs[0] == 0.0
    assert all(a < b for a, b in zip(lbs[1:], lbs[2:], strict=False))


def test_one_run_perfect_guesses_known_value() -> None:
    # delta = 0, v = r: p-value = q^r, so eps_lb = logit(0.05^(1/r)) exactly
    r = 1000
    q = 0.05 ** (1 / r)
    expected = math.log(q / (1 - q))
    got = one_run_epsilon_lb(r, r, r, 0.0, 0.95)
    assert got == pytest.approx(expected, abs=1e-5)
    assert 5.7 < got < 5.9
    assert one_run_p_value(r, r, r, got, 0.0) < 0.05
    # delta > 0 only weakens the bound
    assert one_run_epsilon_lb(r, r, r, 1e-5, 0.95) < got


def test_one_run_large_r_is_fast() -> None:
    import time

    t0 = time.perf_counter()
    e = one_run_epsilon_lb(10_000, 9_000, 10_000, 1e-5, 0.95)
    assert time.perf_counter() - t0 < 2.0
    assert 1.5 < e < math.log(9)  # v/r = 0.9 means point estimate logit(0.9) = ln 9


def test_one_run_coverage_on_randomized_response_canaries() -> None:
    eps, m, reps, conf = 1.0, 1000, 200, 0.95
    rng = np.random.default_rng(4)
    q = math.exp(eps) / (1 + math.exp(eps))
    vs = rng.binomial(m, q, size=reps)  # each canary guess correct with prob q: (eps, 0)-DP
    lbs = np.array([one_run_epsilon_lb(m, int(v), m, 0.0, conf) for v in vs])
    assert np.sum(lbs > eps) <= max_exceedances(reps, 1 - conf)
    assert lbs.mean() > 0.6 * eps


def test_one_run_bound_guessing_rule_and_ties() -> None:
    scores = np.array([0.1, 0.9, 0.2, 0.8, 0.5, 0.3])
    members = np.array([0, 1, 1, 0, 1, 0])
    b = one_run_bound(scores, members, k_pos=2, k_neg=2, delta=0.0, confidence=0.95)
    # "in" for 0.9 (member), 0.8 (non-member); "out" for 0.1 (non-member), 0.2 (member)
    assert b.method == "one-run" and b.valid and b.n == 6
    assert (b.details["r"], b.details["v"], b.details["m"]) == (4, 2, 6)
    assert b.details["k_pos"] == 2 and b.details["k_neg"] == 2
    assert b.epsilon == one_run_epsilon_lb(4, 2, 6, 0.0, 0.95)
    # all scores tied: ties broken by index (higher index counts as higher score)
    tied = np.zeros(6)
    mem = np.array([0, 0, 1, 1, 1, 1])
    b2 = one_run_bound(tied, mem, 2, 2, 0.0, 0.95)
    assert b2.details["v"] == 4  # out: idx 0, 1 (non-members); in: idx 4, 5 (members)
    assert one_run_bound(tied, mem, 2, 2, 0.0, 0.95).details == b2.details
    with pytest.raises(UserError):
        one_run_bound(tied, mem, 4, 3, 0.0, 0.95)
    with pytest.raises(UserError):
        one_run_epsilon_lb(10, 11, 20, 0.0, 0.95)


def test_one_run_bound_on_strong_attack() -> None:
    rng = np.random.default_rng(5)
    m = 2000
    members = rng.random(m) < 0.5
    scores = members * 3.0 + rng.normal(size=m)
    b = one_run_bound(scores, members, 200, 200, 1e-5, 0.95)
    assert b.details["v"] >= 398
    assert b.epsilon > 2.0
    json.dumps(b.block().to_dict(), allow_nan=False)
