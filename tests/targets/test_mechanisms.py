"""Mechanism targets: correct sampling, consistent claims (their audits: tests/kinds/mechanism/)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from audit.errors import UserError
from audit.theory.gaussian import analytic_gaussian_sigma, classic_gaussian_sigma
from targets.mechanisms import (
    MECHANISMS,
    ExponentialMechanism,
    GaussianCount,
    LaplaceCount,
    LaplaceMean,
    RandomizedResponse,
    ReportNoisyMax,
    make_mechanism,
)

ALPHA = np.linspace(0, 1, 501)


def _within_binomial(k: int, n: int, p: float, z: float = 5.0) -> bool:
    """Empirical count k of n is within z standard deviations (plus a count) of n p."""
    return abs(k - n * p) <= z * math.sqrt(n * p * (1 - p)) + 1


def _delta_for(mech) -> float:
    return getattr(mech, "delta", 1e-5)


@pytest.mark.parametrize("name", list(MECHANISMS))
def test_pair_is_at_most_as_leaky_as_the_claim(name):
    mech = make_mechanism(name)
    f_pair = mech.pair_claim().tradeoff(ALPHA)
    f_claim = mech.claim.tradeoff(ALPHA)
    assert np.all(f_pair >= f_claim - 1e-7)
    assert mech.claim.epsilon(_delta_for(mech)) <= mech.nominal_claim.epsilon(_delta_for(mech)) + 1e-9
    d = mech.to_dict()
    assert d["name"] == name and d["claim"]["neighbouring"] == mech.neighbouring


def test_laplace_count_samples_have_the_laplace_law():
    mech = LaplaceCount(0.5, n_records=10)
    d0, d1 = mech.neighbouring_pair()
    assert mech.query(d1) - mech.query(d0) == mech.sensitivity == 1.0
    x = mech.sample(d0, 200_000, 3)
    for t in [-2.0, 0.0, 1.0, 5.0]:
        p = stats.laplace.sf(10 + t, loc=10, scale=2.0)
        assert _within_binomial(int(np.sum(x > 10 + t)), x.size, p)
    with pytest.raises(UserError):
        mech.sample(np.array([0, 2]), 5, 0)


def test_laplace_mean_clips_and_has_bounded_sensitivity():
    mech = LaplaceMean(1.0, n_records=50, lower=0.0, upper=2.0)
    d0, d1 = mech.neighbouring_pair()
    assert mech.query(d1) - mech.query(d0) == pytest.approx(mech.sensitivity) == pytest.approx(2.0 / 50)
    wild = np.full(50, 100.0)
    assert mech.query(wild) == pytest.approx(2.0)
    x = mech.sample(d0, 100_000, 4)
    assert _within_binomial(int(np.sum(x > 0.05)), x.size, stats.laplace.sf(0.05, scale=mech.scale))
    with pytest.raises(UserError):
        mech.sample(np.zeros(49), 5, 0)


def test_gaussian_calibrations():
    an = GaussianCount(1.0, 1e-5, "analytic")
    assert an.sigma == pytest.approx(analytic_gaussian_sigma(1.0, 1e-5)) == pytest.approx(3.7306, abs=1e-4)
    assert an.claim.epsilon(1e-5) == pytest.approx(1.0, abs=1e-9)
    cl = GaussianCount(0.5, 1e-5, "classic")
    assert cl.sigma == pytest.approx(classic_gaussian_sigma(0.5, 1e-5))
    assert cl.claim.epsilon(1e-5) < 0.5  # the classic calibration is loose
    with pytest.raises(UserError):
        GaussianCount(2.0, 1e-5, "classic")
    x = an.sample(an.neighbouring_pair()[0], 200_000, 5)
    assert abs(x.mean() - 100.0) < 5 * an.sigma / math.sqrt(x.size)
    assert _within_binomial(int(np.sum(x > 100 + an.sigma)), x.size, stats.norm.sf(1.0))


def test_randomized_response_probabilities():
    mech = RandomizedResponse(1.2, k=4, n_records=6)
    d0, d1 = mech.neighbouring_pair()
    out = mech.sample(d1, 100_000, 6)
    assert out.shape == (100_000, 6)
    p_keep = math.exp(1.2) / (math.exp(1.2) + 3)
    assert mech.keep_probability == pytest.approx(p_keep)
    assert _within_binomial(int(np.sum(out[:, 0] == 1)), out.shape[0], p_keep)
    for other in (0, 2, 3):  # each other value w.p. 1/(e^eps + k - 1)
        assert _within_binomial(int(np.sum(out[:, 0] == other)), out.shape[0], (1 - p_keep) / 3)
    assert _within_binomial(int(np.sum(out[:, 3] == 0)), out.shape[0], p_keep)


def test_exponential_mechanism_probabilities_and_loss():
    mech = ExponentialMechanism(1.0, k=4, n_records=5)
    d0, d1 = mech.neighbouring_pair()
    w = np.exp(0.5 * np.array([5.0, 0, 0, 0]))
    assert np.allclose(mech.output_probabilities(d0), w / w.sum())
    out = mech.sample(d0, 100_000, 7)
    for o in range(4):
        assert _within_binomial(int(np.sum(out == o)), out.size, w[o] / w.sum())
    assert mech.pair_claim().max_privacy_loss() <= 1.0 + 1e-12
    # automatic size: the pair leaks more than the smallest pair (n_records=1, loss eps/2)
    auto = ExponentialMechanism(1.0)
    assert auto.pair_claim().epsilon(1e-3) > ExponentialMechanism(1.0, n_records=1).pair_claim().epsilon(1e-3)


def test_report_noisy_max_probabilities_exact_for_two_candidates():
    # k = 2: P(argmax = 1) = P(L1 - L0 > c0 - c1); the difference of two Lap(b) has tail
    # P(Z > d) = e^{-d/b} (2 + d/b) / 4 for d >= 0.
    mech = ReportNoisyMax(0.7, k=2)
    b = 1 / 0.7
    d0, d1 = mech.neighbouring_pair()  # counts (1, 0) and (1, 1)
    p0 = mech.output_probabilities(d0)
    assert p0[1] == pytest.approx(math.exp(-1 / b) * (2 + 1 / b) / 4, abs=1e-7)
    assert mech.output_probabilities(d1)[1] == pytest.approx(0.5, abs=1e-7)
    big = ReportNoisyMax(1.0, k=5)
    probs = big.output_probabilities(big.neighbouring_pair()[1])
    out = big.sample(big.neighbouring_pair()[1], 200_000, 8)
    for o in range(5):
        assert _within_binomial(int(np.sum(out == o)), out.size, probs[o])
    assert big.pair_claim().max_privacy_loss() <= 1.0 + 1e-6


def test_make_mechanism_overrides_and_errors():
    assert make_mechanism("laplace_count", epsilon=2.0).epsilon == 2.0
    assert make_mechanism("gaussian_analytic", epsilon=2.0, delta=1e-6).delta == 1e-6
    with pytest.raises(UserError):
        make_mechanism("laplace_count", delta=1e-5)
    with pytest.raises(UserError):
        make_mechanism("nope")
    with pytest.raises(UserError):
        LaplaceCount(0.0)
