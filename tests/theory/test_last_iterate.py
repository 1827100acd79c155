"""The last-iterate heuristic (audit.theory.last_iterate) against the figure Steinke et al. (2025) give and
against the closed forms it must reduce to."""

from __future__ import annotations

import pytest

from audit.errors import UserError
from audit.theory.dpsgd import DPSGDClaim
from audit.theory.gaussian import gaussian_epsilon
from audit.theory.last_iterate import last_iterate_delta, last_iterate_epsilon

#: The noise multiplier at which DP-SGD with q = 0.01 and T = 10^4 is (8, 1e-5)-DP by the PLD accountant.
SIGMA_AT_8 = 0.8827


def test_the_papers_figure_at_epsilon_8():
    # Steinke et al. 2025: the heuristic gives 5.19 where the standard analysis gives epsilon 8 (q 0.01, T 10^4)
    assert DPSGDClaim(SIGMA_AT_8, 0.01, 10_000).epsilon(1e-5) == pytest.approx(8.0, abs=0.01)
    assert last_iterate_epsilon(1e-5, SIGMA_AT_8, 0.01, 10_000) == pytest.approx(5.19, abs=0.005)


def test_full_batch_is_the_gaussian_mechanism_of_sqrt_t_over_sigma():
    # q = 1: every step samples the example, Q = N(T, sigma^2 T), so mu = sqrt(T) / sigma exactly
    assert last_iterate_epsilon(1e-5, 2.0, 1.0, 64) == pytest.approx(gaussian_epsilon(4.0, 1e-5), rel=1e-6)


def test_the_last_iterate_is_no_less_private_than_every_iterate():
    assert last_iterate_epsilon(1e-5, 1.0, 0.05, 200) < DPSGDClaim(1.0, 0.05, 200).epsilon(1e-5)


def test_the_profile_decreases_and_the_epsilon_meets_its_delta():
    deltas = [last_iterate_delta(e, 1.0, 0.05, 200) for e in (0.0, 0.5, 1.0, 2.0)]
    assert deltas == sorted(deltas, reverse=True) and deltas[-1] > 0
    eps = last_iterate_epsilon(1e-5, 1.0, 0.05, 200)
    assert last_iterate_delta(eps, 1.0, 0.05, 200) <= 1e-5 < last_iterate_delta(eps * 0.99, 1.0, 0.05, 200)


def test_a_bad_configuration_is_the_users_error():
    with pytest.raises(UserError):
        last_iterate_epsilon(1e-5, 1.0, 1.5, 10)
