"""Tests for audit.theory.rero: the ReRo bound 1 - f(kappa) of a claim's tradeoff curve (docs/references.md,
"Reconstruction robustness"). Expected values are computed independently of the code under test."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from audit.errors import UserError
from audit.theory.claims import ApproxDPClaim, GaussianClaim, LaplaceClaim, PureDPClaim, RandomizedResponseClaim
from audit.theory.dpsgd import DPSGDClaim
from audit.theory.rdp import ZCDPClaim
from audit.theory.rero import gaussian_rero_bound, rero_bound, uniform_prior_kappa
from audit.theory.tradeoff import tradeoff_from_profile

KAPPAS = np.unique(np.concatenate([np.logspace(-9, 0, 37), np.linspace(0.01, 1.0, 100), [1 / 10, 1 / 100]]))
MUS = [0.0, 0.01, 0.1, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 8.0]
#: Float rounding allowed where two mathematically equal quantities are computed in different ways.
ROUNDING = 1e-12


# --------------------------------------------------------------------------- Gaussian DP


@pytest.mark.parametrize("mu", MUS)
def test_gaussian_claim_matches_closed_form(mu: float) -> None:
    """rero_bound(GaussianClaim(mu), kappa) = Phi(Phi^-1(kappa) + mu) to 1e-9 (Kaissis et al. 2023)."""
    expected = stats.norm.cdf(stats.norm.ppf(KAPPAS) + mu)
    assert np.max(np.abs(rero_bound(GaussianClaim(mu), KAPPAS) - expected)) <= 1e-9
    assert np.max(np.abs(gaussian_rero_bound(mu, KAPPAS) - expected)) <= 1e-9


@pytest.mark.parametrize("mu", [m for m in MUS if m > 0])
def test_generic_path_agrees_for_gaussian(mu: float) -> None:
    """The generic 1 - f(kappa), f from the claim's profile by the primal-dual formula (not the closed
    form), agrees with the closed form to 1e-9, and so does 1 - the claim's own tradeoff."""
    claim = GaussianClaim(mu)
    expected = stats.norm.cdf(stats.norm.ppf(KAPPAS) + mu)
    generic = 1.0 - tradeoff_from_profile(claim.delta_array, KAPPAS)
    assert np.max(np.abs(generic - expected)) <= 1e-9
    assert np.max(np.abs(1.0 - claim.tradeoff(KAPPAS) - expected)) <= 1e-9


def test_gaussian_limits() -> None:
    assert gaussian_rero_bound(math.inf, 0.3) == 1.0
    assert gaussian_rero_bound(0.0, 0.3) == pytest.approx(0.3, abs=ROUNDING)
    assert gaussian_rero_bound(2.0, 1.0) == 1.0


def test_scalar_in_float_out_array_in_array_out() -> None:
    claim = PureDPClaim(1.0)
    assert isinstance(rero_bound(claim, 0.1), float)
    assert isinstance(rero_bound(GaussianClaim(1.0), 0.1), float)
    out = rero_bound(claim, [[0.1, 0.2], [0.3, 0.4]])
    assert isinstance(out, np.ndarray) and out.shape == (2, 2)
    assert uniform_prior_kappa(10) == 0.1


# --------------------------------------------------------------------------- other claims in closed form


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
@pytest.mark.parametrize("delta", [0.0, 1e-5, 0.05])
def test_approx_dp_closed_form(eps: float, delta: float) -> None:
    """1 - f_{eps,delta}(k) = min(1, delta + e^eps k, 1 - e^-eps (1 - delta - k)) (Dong, Roth, Su 2019, Prop. 2.5);
    pure DP with kappa = 1/n gives e^eps / n while that is below the other terms."""
    expected = np.minimum.reduce([np.ones_like(KAPPAS), delta + math.exp(eps) * KAPPAS,
                                  1.0 - math.exp(-eps) * (1.0 - delta - KAPPAS)])
    claim = ApproxDPClaim(eps, delta) if delta else PureDPClaim(eps)
    assert np.max(np.abs(rero_bound(claim, KAPPAS) - expected)) <= ROUNDING
    if delta == 0.0:
        assert rero_bound(claim, 1 / 100) == pytest.approx(math.exp(eps) / 100, abs=ROUNDING)


@pytest.mark.parametrize("claim", [GaussianClaim(0.0), PureDPClaim(0.0), ApproxDPClaim(0.0, 0.0), LaplaceClaim(0.0),
                                   RandomizedResponseClaim(0.0, k=5), ZCDPClaim(0.0)],
                         ids=["gdp", "pure", "approx", "laplace", "rr", "zcdp"])
def test_perfectly_private_claim_gives_kappa(claim) -> None:
    assert np.max(np.abs(rero_bound(claim, KAPPAS) - KAPPAS)) <= ROUNDING


# --------------------------------------------------------------------------- properties (hypothesis)

FAMILIES = {
    "gdp": lambda e: GaussianClaim(e),
    "pure": lambda e: PureDPClaim(e),
    "approx": lambda e: ApproxDPClaim(e, 1e-4),
    "laplace": lambda e: LaplaceClaim(e),
    "rr3": lambda e: RandomizedResponseClaim(e, k=3),
}
family = st.sampled_from(sorted(FAMILIES))
epsilon = st.floats(min_value=0.0, max_value=12.0)
kappa = st.floats(min_value=1e-9, max_value=1.0)


@given(family, epsilon, st.lists(kappa, min_size=2, max_size=20))
def test_bound_between_kappa_and_one_and_non_decreasing_in_kappa(name: str, eps: float, ks: list[float]) -> None:
    k = np.sort(np.asarray(ks))
    b = rero_bound(FAMILIES[name](eps), k)
    assert np.all(b >= k) and np.all(b <= 1.0)
    assert np.all(np.diff(b) >= -ROUNDING)


@given(family, epsilon, epsilon, kappa)
def test_bound_non_decreasing_in_epsilon(name: str, e1: float, e2: float, k: float) -> None:
    lo, hi = sorted((e1, e2))
    assert rero_bound(FAMILIES[name](lo), k) <= rero_bound(FAMILIES[name](hi), k) + ROUNDING


@given(st.floats(min_value=0.0, max_value=6.0), st.floats(min_value=1e-3, max_value=2.0),
       st.floats(min_value=1e-6, max_value=0.999))
def test_gaussian_bound_strictly_increases_with_mu(mu: float, step: float, k: float) -> None:
    assert gaussian_rero_bound(mu + step, k) > gaussian_rero_bound(mu, k)


# --------------------------------------------------------------------------- accountant-based claims


@pytest.mark.parametrize(("sigma", "steps"), [(2.0, 4), (0.5, 1)])
def test_full_batch_dpsgd_is_gaussian(sigma: float, steps: int) -> None:
    """Full-batch DP-SGD is exactly G_mu with mu = sqrt(T)/sigma (Dong, Roth, Su 2019, Cor. 3.3). The PLD
    accountant's discretisation (interval h, T steps) moves each privacy loss up by at most s = T h, so
    delta_pld(e) <= delta(e - s) and hence f_pld(a) >= e^-s G_mu(e^s a): the PLD bound lies between the exact
    Gaussian bound and 1 - e^-s G_mu(e^s kappa)."""
    claim = DPSGDClaim(sigma, 1.0, steps)
    mu = math.sqrt(steps) / sigma
    s = steps * claim.value_discretization_interval
    exact = stats.norm.cdf(stats.norm.ppf(KAPPAS) + mu)
    upper = 1.0 - math.exp(-s) * stats.norm.cdf(stats.norm.isf(np.minimum(math.exp(s) * KAPPAS, 1.0)) - mu)
    b = rero_bound(claim, KAPPAS)
    assert np.all(b >= exact - 1e-12) and np.all(b <= upper + 1e-12)


def test_subsampled_dpsgd_bound_is_a_curve_of_its_own() -> None:
    """Poisson-subsampled DP-SGD (q = 0.1, T = 100): in [kappa, 1], non-decreasing in kappa, larger with less
    noise, and not the CLT Gaussian's (the CLT overstates it at small kappa for sigma = 0.8)."""
    k = np.array([1e-3, 1e-2, 0.1, 0.5])
    low_noise, high_noise = DPSGDClaim(0.8, 0.1, 100), DPSGDClaim(1.0, 0.1, 100)
    b_low, b_high = rero_bound(low_noise, k), rero_bound(high_noise, k)
    assert np.all(b_low >= k) and np.all(b_low <= 1) and np.all(np.diff(b_low) >= 0)
    assert np.all(b_low > b_high)
    assert rero_bound(low_noise, 0.01) < gaussian_rero_bound(low_noise.gdp_mu(), 0.01)


def test_zcdp_bound_is_at_least_the_gaussian_mechanisms() -> None:
    """The Gaussian mechanism of mu is (mu^2/2)-zCDP, so any valid bound for all rho-zCDP mechanisms is at least
    that mechanism's exact bound Phi(Phi^-1(kappa) + sqrt(2 rho))."""
    rho = 0.5
    k = np.array([1e-4, 1e-2, 0.1, 0.5])
    assert np.all(rero_bound(ZCDPClaim(rho), k) >= gaussian_rero_bound(math.sqrt(2 * rho), k) - ROUNDING)


# --------------------------------------------------------------------------- input checks


@pytest.mark.parametrize("bad", [0.0, -0.1, 1.5, math.nan, math.inf, "x", [], [0.5, 0.0]])
def test_kappa_outside_zero_one_is_a_user_error(bad) -> None:
    with pytest.raises(UserError, match="kappa"):
        rero_bound(PureDPClaim(1.0), bad)
    with pytest.raises(UserError, match="kappa"):
        gaussian_rero_bound(1.0, bad)


def test_other_bad_inputs_are_one_line_user_errors() -> None:
    for call in (lambda: rero_bound(object(), 0.1), lambda: gaussian_rero_bound(-1.0, 0.1),
                 lambda: gaussian_rero_bound(math.nan, 0.1), lambda: uniform_prior_kappa(0),
                 lambda: uniform_prior_kappa(2.5), lambda: uniform_prior_kappa(True)):
        with pytest.raises(UserError) as info:
            call()
        assert "\n" not in str(info.value)
