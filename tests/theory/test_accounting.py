"""Checks of the accounting layer against independent computations."""

from __future__ import annotations

import math
import time

import dp_accounting
import numpy as np
import pytest
from dp_accounting import pld as dp_pld
from dp_accounting import rdp as dp_rdp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from audit.errors import UserError
from audit.theory.claim_json import claim_from_dict
from audit.theory.claims import (
    ApproxDPClaim,
    DiscretePairClaim,
    GaussianClaim,
    LaplaceClaim,
    PureDPClaim,
    RandomizedResponseClaim,
)
from audit.theory.composition import (
    advanced_composition,
    amplify_by_subsampling,
    basic_composition,
    compose_gaussian,
    compose_pld,
    compose_rdp,
)
from audit.theory.dpsgd import DPSGDClaim, calibrate_noise_multiplier, dpsgd_gdp_mu
from audit.theory.gaussian import analytic_gaussian_sigma, classic_gaussian_sigma, gaussian_delta
from audit.theory.pld import PLDClaim
from audit.theory.rdp import RDPClaim, ZCDPClaim, zcdp_to_dp_epsilon
from audit.theory.tradeoff import default_alpha_grid, tradeoff_from_profile

MNIST_Q = 256 / 60000
MNIST_STEPS = math.ceil(60 * 60000 / 256)  # 14063, as TF-Privacy's compute_dp_sgd_privacy rounds


# ---------------------------------------------------------------- direct Neyman-Pearson curves


def np_tradeoff_discrete(p: np.ndarray, q: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """Neyman-Pearson curve of H0: P vs H1: Q on a finite space, randomised tests.

    Reject H0 on outcomes in decreasing order of q/p; the curve interpolates linearly.
    """
    with np.errstate(divide="ignore"):
        lr = np.where(p > 0, q / np.where(p > 0, p, 1), np.inf)
    order = np.argsort(-lr, kind="stable")
    a_pts = np.concatenate([[0.0], np.cumsum(p[order])])
    b_pts = np.concatenate([[1.0], 1.0 - np.cumsum(q[order])])
    return np.interp(alpha, a_pts, b_pts)


def np_tradeoff_gaussian(alpha: np.ndarray, mu: float) -> np.ndarray:
    t = stats.norm.isf(alpha)  # reject when x > t: type-I error alpha under N(0, 1)
    return stats.norm.cdf(t, loc=mu)


def np_tradeoff_laplace(alpha: np.ndarray, eps: float) -> np.ndarray:
    t = stats.laplace.isf(alpha)  # Lap(0, 1) vs Lap(eps, 1): likelihood ratio increasing in x
    return stats.laplace.cdf(t, loc=eps)


def rr_pair(eps: float, k: int) -> tuple[np.ndarray, np.ndarray]:
    z = math.exp(eps) + k - 1
    p = np.ones(k) / z
    q = np.ones(k) / z
    p[0] = q[1] = math.exp(eps) / z
    return p, q


ALPHA = np.linspace(0.0, 1.0, 1001)


# ---------------------------------------------------------------- DP-SGD numbers


def test_dpsgd_mnist_rdp_epsilon_matches_current_accountants():
    eps = DPSGDClaim(1.1, MNIST_Q, MNIST_STEPS, accountant="rdp").epsilon(1e-5)
    assert eps == pytest.approx(2.597, abs=1e-3)
    # the older Mironov conversion gives the historical, larger figure
    rdp = DPSGDClaim(1.1, MNIST_Q, MNIST_STEPS, accountant="rdp")._impl()
    assert rdp.epsilon(1e-5, conversion="classic") > eps + 0.2


def test_dpsgd_mnist_pld_matches_dp_accounting():
    claim = DPSGDClaim(1.1, MNIST_Q, MNIST_STEPS)
    acc = dp_pld.PLDAccountant()
    acc.compose(dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(MNIST_Q, dp_accounting.GaussianDpEvent(1.1)), MNIST_STEPS))
    ours = claim.epsilon(1e-5)
    assert ours == pytest.approx(acc.get_epsilon(1e-5), abs=1e-3)
    assert 2.37 < ours < 2.40  # PLD is tighter than RDP (2.597)
    # our vectorised profile equals the library's hockey-stick divergence
    eps = np.linspace(0.0, 8.0, 41)
    assert np.max(np.abs(claim.delta(eps) - claim.pld.get_delta_for_epsilon(eps))) < 1e-12
    assert claim.delta(ours) <= 1e-5 + 1e-12
    # delta(epsilon) inverts epsilon(delta)
    assert claim.epsilon(float(claim.delta(2.0))) == pytest.approx(2.0, abs=2e-4)


def test_dpsgd_gdp_clt_and_full_batch():
    mu = dpsgd_gdp_mu(1.1, MNIST_Q, MNIST_STEPS)
    assert mu == pytest.approx(MNIST_Q * math.sqrt(MNIST_STEPS * math.expm1(1 / 1.21)))
    assert DPSGDClaim(1.1, MNIST_Q, MNIST_STEPS, accountant="gdp").epsilon(1e-5) == pytest.approx(
        GaussianClaim(mu).epsilon(1e-5))
    assert dpsgd_gdp_mu(2.0, 1.0, 16) == pytest.approx(2.0)


def test_full_batch_pld_tradeoff_is_a_conservative_approximation_of_gaussian():
    # q = 1: T-fold composition of the Gaussian mechanism is exactly G_{sqrt(T)/sigma}; the
    # pessimistic PLD must lie at or below it and close to it.
    claim = DPSGDClaim(2.0, 1.0, 9, value_discretization_interval=1e-4)
    exact = GaussianClaim(1.5)
    a = default_alpha_grid()
    f_pld = claim.tradeoff(a)
    f_exact = exact.tradeoff(a)
    assert np.all(f_pld <= f_exact + 1e-9)
    assert np.max(f_exact - f_pld) < 2e-3
    assert claim.epsilon(1e-5) == pytest.approx(exact.epsilon(1e-5), abs=2e-3)
    assert claim.epsilon(1e-5) >= exact.epsilon(1e-5) - 1e-9


def test_rdp_vectorised_delta_matches_dp_accounting():
    claim = DPSGDClaim(1.1, MNIST_Q, MNIST_STEPS, accountant="rdp")._impl()
    eps = np.array([0.3, 1.0, 2.0, 2.6, 4.0, 9.0])
    ours = claim.delta(eps)
    lib = [dp_rdp.rdp_privacy_accountant.compute_delta(claim.orders, claim.rdp, e)[0] for e in eps]
    assert np.allclose(ours, lib, rtol=1e-10, atol=1e-300)


def test_calibrate_noise_multiplier_is_fast_and_tight():
    t0 = time.perf_counter()
    sigma = calibrate_noise_multiplier(2.0, 1e-5, 0.1, 200)
    assert time.perf_counter() - t0 < 10.0  # about 3 s on a laptop core
    assert DPSGDClaim(sigma, 0.1, 200).epsilon(1e-5) <= 2.0
    assert DPSGDClaim(sigma - 1e-3, 0.1, 200).epsilon(1e-5) > 2.0


def test_dpsgd_invalid_parameters_are_user_errors():
    with pytest.raises(UserError):
        DPSGDClaim(0.0, 0.1, 10)
    with pytest.raises(UserError):
        DPSGDClaim(1.0, 1.5, 10)
    with pytest.raises(UserError):
        DPSGDClaim(1.0, 0.1, 10, accountant="moments")


# ---------------------------------------------------------------- dual formula vs Neyman-Pearson


@pytest.mark.parametrize("mu", [0.2, 1.0, 3.0])
def test_dual_gaussian_equals_neyman_pearson(mu):
    claim = GaussianClaim(mu)
    direct = np_tradeoff_gaussian(ALPHA, mu)
    assert np.max(np.abs(tradeoff_from_profile(claim.delta, ALPHA) - direct)) < 1e-6
    assert np.max(np.abs(claim.tradeoff(ALPHA) - direct)) < 1e-12


@pytest.mark.parametrize("eps", [0.1, 1.0, 4.0])
def test_dual_laplace_equals_neyman_pearson(eps):
    claim = LaplaceClaim(eps)
    direct = np_tradeoff_laplace(ALPHA, eps)
    assert np.max(np.abs(tradeoff_from_profile(claim.delta, ALPHA) - direct)) < 1e-6
    assert np.max(np.abs(claim.tradeoff(ALPHA) - direct)) < 1e-12


@pytest.mark.parametrize("eps,k", [(0.5, 2), (2.0, 2), (1.0, 5), (3.0, 10)])
def test_dual_randomized_response_equals_neyman_pearson(eps, k):
    claim = RandomizedResponseClaim(eps, k)
    p, q = rr_pair(eps, k)
    direct = np_tradeoff_discrete(p, q, ALPHA)
    assert np.max(np.abs(tradeoff_from_profile(claim.delta, ALPHA) - direct)) < 1e-6
    assert np.max(np.abs(claim.tradeoff(ALPHA) - direct)) < 1e-12
    # profile = hockey-stick divergence of the pair
    for e in [0.0, 0.3 * eps, eps, 2 * eps]:
        assert claim.delta(e) == pytest.approx(np.sum(np.maximum(p - math.exp(e) * q, 0)), abs=1e-14)


def test_dual_approx_dp_equals_closed_form():
    for eps, delta in [(0.5, 0.0), (1.0, 1e-3), (3.0, 0.05)]:
        claim = ApproxDPClaim(eps, delta)
        assert np.max(np.abs(tradeoff_from_profile(claim.delta, ALPHA) - claim.tradeoff(ALPHA))) < 1e-6
        # the four-point pair with tradeoff f_{eps,delta} (Kairouz et al.) has this profile
        e = math.exp(eps)
        p = np.array([delta, (1 - delta) * e / (1 + e), (1 - delta) / (1 + e), 0.0])
        q = p[::-1]
        assert np.max(np.abs(np_tradeoff_discrete(p, q, ALPHA) - claim.tradeoff(ALPHA))) < 1e-12
        for x in [0.0, eps / 2, eps, eps + 1]:
            assert claim.delta(x) == pytest.approx(np.sum(np.maximum(p - math.exp(x) * q, 0)), abs=1e-14)


def test_discrete_pair_claim_matches_neyman_pearson():
    p = np.array([0.5, 0.3, 0.15, 0.05])
    q = np.array([0.2, 0.3, 0.2, 0.3])
    claim = DiscretePairClaim(p, q)
    f = claim.tradeoff(ALPHA)
    # the symmetrised curve is the convex hull of min(T(P,Q), T(Q,P)): below both, and exact where
    # the pair is already symmetric
    assert np.all(f <= np_tradeoff_discrete(p, q, ALPHA) + 1e-9)
    assert np.all(f <= np_tradeoff_discrete(q, p, ALPHA) + 1e-9)
    sym = DiscretePairClaim(*rr_pair(1.0, 3))
    assert np.max(np.abs(sym.tradeoff(ALPHA) - np_tradeoff_discrete(*rr_pair(1.0, 3), ALPHA))) < 1e-6
    assert claim.max_privacy_loss() == pytest.approx(math.log(6.0))
    assert claim.epsilon(0.0) == pytest.approx(math.log(6.0), abs=1e-9)


# ---------------------------------------------------------------- Gaussian mechanism


def test_analytic_gaussian_sigma_balle_wang():
    sigma = analytic_gaussian_sigma(1.0, 1e-5, 1.0)
    assert sigma == pytest.approx(3.7306, abs=1e-4)
    assert gaussian_delta(1.0, 1.0 / sigma) == pytest.approx(1e-5, rel=1e-8)
    assert gaussian_delta(1.0, 1.0 / (sigma * 0.999)) > 1e-5
    assert analytic_gaussian_sigma(1.0, 1e-5, 2.5) == pytest.approx(2.5 * sigma, rel=1e-10)


def test_classic_gaussian_sigma_and_its_domain():
    assert classic_gaussian_sigma(0.5, 1e-5) == pytest.approx(math.sqrt(2 * math.log(1.25e5)) / 0.5)
    # the classic calibration is more conservative than the analytic one
    assert classic_gaussian_sigma(0.5, 1e-5) > analytic_gaussian_sigma(0.5, 1e-5)
    with pytest.raises(UserError):
        classic_gaussian_sigma(1.0, 1e-5)


def test_epsilon_delta_round_trips():
    claims = [GaussianClaim(0.8), LaplaceClaim(1.3), RandomizedResponseClaim(2.0, 3),
              ApproxDPClaim(1.0, 1e-4), PureDPClaim(0.5), ZCDPClaim(0.3)]
    for c in claims:
        for d in [1e-6, 1e-3, 0.05]:
            e = c.epsilon(d)
            if math.isinf(e):  # only when the claim's own delta floor exceeds d
                assert c.delta(1e3) > d
                continue
            assert c.delta(e) <= d * (1 + 1e-6) + 1e-15
            if e > 1e-6:
                assert c.delta(max(e - 1e-4, 0.0)) > d * (1 - 1e-9) - 1e-15
    assert ApproxDPClaim(1.0, 1e-4).epsilon(1e-5) == math.inf
    assert PureDPClaim(0.7).epsilon(0.0) == pytest.approx(0.7)
    assert LaplaceClaim(0.7).epsilon(0.0) == pytest.approx(0.7)


# ---------------------------------------------------------------- conversions and composition


def test_zcdp_conversions():
    rho = 0.5  # the Gaussian mechanism with mu = 1 is 0.5-zCDP and exactly 1-GDP
    exact = GaussianClaim(1.0).epsilon(1e-5)
    improved = zcdp_to_dp_epsilon(rho, 1e-5)
    simple = zcdp_to_dp_epsilon(rho, 1e-5, "simple")
    assert exact < improved < simple
    assert simple == pytest.approx(0.5 + 2 * math.sqrt(0.5 * math.log(1e5)))
    assert improved <= ZCDPClaim(rho).epsilon(1e-5) <= improved + 1e-3


def test_basic_and_advanced_composition():
    assert basic_composition([0.1, 0.2, 0.3], [1e-6, 0, 1e-6]) == pytest.approx((0.6, 2e-6))
    eps, delta = advanced_composition(0.1, 1e-6, 100, 1e-5)
    assert eps == pytest.approx(0.1 * math.sqrt(200 * math.log(1e5)) + 100 * 0.1 * math.expm1(0.1))
    assert delta == pytest.approx(100 * 1e-6 + 1e-5)
    assert eps < 100 * 0.1  # beats basic composition here


def test_gaussian_pld_rdp_composition_agree():
    # 4 Gaussian mechanisms with sigma = 2: exactly G_{1}
    mus = [0.5] * 4
    g = compose_gaussian(mus)
    assert g.mu == pytest.approx(1.0)
    one = dp_pld.privacy_loss_distribution.from_gaussian_mechanism(2.0, value_discretization_interval=1e-4)
    pld = compose_pld([PLDClaim(one)] * 4)
    assert pld.epsilon(1e-5) == pytest.approx(g.epsilon(1e-5), abs=2e-3)
    acc = dp_rdp.RdpAccountant()
    acc.compose(dp_accounting.GaussianDpEvent(2.0))
    single = RDPClaim(acc.orders, acc.rdp)
    comp = compose_rdp([single] * 4)
    acc4 = dp_rdp.RdpAccountant()
    acc4.compose(dp_accounting.GaussianDpEvent(2.0), 4)
    assert comp.epsilon(1e-5) == pytest.approx(acc4.get_epsilon(1e-5), rel=1e-12)
    assert comp.epsilon(1e-5) > g.epsilon(1e-5)  # RDP is an upper bound


def test_amplification_by_subsampling():
    eps, delta = amplify_by_subsampling(1.0, 1e-5, 0.01)
    assert eps == pytest.approx(math.log(1 + 0.01 * (math.e - 1)))
    assert delta == pytest.approx(1e-7)
    assert amplify_by_subsampling(2.0, 0.0, 1.0) == pytest.approx((2.0, 0.0))


def test_claim_json_round_trip():
    for c in [GaussianClaim(1.2), LaplaceClaim(0.5), RandomizedResponseClaim(1.0, 4), ApproxDPClaim(1, 1e-5),
              PureDPClaim(2), ZCDPClaim(0.2), DPSGDClaim(1.0, 0.01, 50, accountant="rdp")]:
        d = c.to_dict()
        c2 = claim_from_dict(d)
        assert c2.to_dict() == d
        assert c2.epsilon(1e-5) == pytest.approx(c.epsilon(1e-5))
        assert isinstance(c.description, str) and c.accountant in c.to_dict()["accountant"]


def test_invalid_alpha_is_user_error():
    with pytest.raises(UserError):
        GaussianClaim(1.0).tradeoff([1.5])


# ---------------------------------------------------------------- tradeoff-curve invariants


UNIFORM = np.linspace(0.0, 1.0, 401)


def check_tradeoff_function(f_of: callable, symmetric: bool, tol: float = 1e-7) -> None:
    f = np.asarray(f_of(UNIFORM))
    assert np.all(f >= -1e-12) and np.all(f <= 1.0 - UNIFORM + tol), "must lie in [0, 1 - alpha]"
    assert np.all(np.diff(f) <= tol), "must be non-increasing"
    assert np.all(np.diff(f, 2) >= -tol), "must be convex"
    if symmetric:
        # f = f^{-1}: where f is strictly decreasing, f(f(alpha)) = alpha
        zero_from = UNIFORM[np.argmax(f <= 1e-12)] if np.any(f <= 1e-12) else 1.0
        inside = (UNIFORM > 0.0) & (UNIFORM < zero_from - 1e-3) & (f < f[0] - 1e-3)
        a = UNIFORM[inside]
        ff = np.asarray(f_of(np.asarray(f_of(a))))
        assert np.max(np.abs(ff - a), initial=0.0) < 100 * tol, "must be symmetric"


@settings(max_examples=25, deadline=None)
@given(mu=st.floats(0.01, 6.0))
def test_gaussian_tradeoff_properties(mu):
    c = GaussianClaim(mu)
    check_tradeoff_function(c.tradeoff, symmetric=True)
    check_tradeoff_function(lambda a: tradeoff_from_profile(c.delta, a), symmetric=True, tol=1e-7)


@settings(max_examples=25, deadline=None)
@given(eps=st.floats(0.01, 6.0))
def test_laplace_tradeoff_properties(eps):
    c = LaplaceClaim(eps)
    check_tradeoff_function(c.tradeoff, symmetric=True)
    check_tradeoff_function(lambda a: tradeoff_from_profile(c.delta, a), symmetric=True)


@settings(max_examples=25, deadline=None)
@given(eps=st.floats(0.01, 6.0), k=st.integers(2, 20))
def test_randomized_response_tradeoff_properties(eps, k):
    c = RandomizedResponseClaim(eps, k)
    check_tradeoff_function(c.tradeoff, symmetric=True)
    check_tradeoff_function(lambda a: tradeoff_from_profile(c.delta, a), symmetric=True)


@settings(max_examples=25, deadline=None)
@given(eps=st.floats(0.0, 6.0), delta=st.floats(0.0, 0.5))
def test_approx_dp_tradeoff_properties(eps, delta):
    c = ApproxDPClaim(eps, delta)
    check_tradeoff_function(c.tradeoff, symmetric=True)


@settings(max_examples=8, deadline=None)
@given(rho=st.floats(0.01, 3.0))
def test_rdp_profile_tradeoff_properties(rho):
    c = ZCDPClaim(rho)  # an RDP-derived profile: only an upper bound on the true profile
    check_tradeoff_function(c.tradeoff, symmetric=True, tol=1e-7)
    # never above the exact Gaussian curve with the same zCDP parameter (mu = sqrt(2 rho))
    assert np.all(c.tradeoff(UNIFORM) <= GaussianClaim(math.sqrt(2 * rho)).tradeoff(UNIFORM) + 1e-9)


@settings(max_examples=6, deadline=None)
@given(sigma=st.floats(0.6, 3.0), q=st.floats(0.01, 1.0), steps=st.integers(1, 30))
def test_dpsgd_pld_tradeoff_properties(sigma, q, steps):
    c = DPSGDClaim(sigma, q, steps, value_discretization_interval=1e-3)
    check_tradeoff_function(c.tradeoff, symmetric=True, tol=1e-7)
