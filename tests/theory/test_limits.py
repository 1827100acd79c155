"""An epsilon and delta the DP-SGD noise calibration searches with stay within what it computes in seconds
(:mod:`audit.theory.limits`, issue 53): every caller of the calibration, not only the command line, gets the one-line
error naming the limit and why, at once instead of a search that runs for minutes; claims computed in closed form
(DP-ERM, mechanisms) are not limited."""

from __future__ import annotations

import time

import pytest

from audit.errors import UserError
from audit.theory.checks import check_delta, check_epsilon
from audit.theory.dpsgd import calibrate_noise_multiplier
from audit.theory.limits import DELTA_MAX, DELTA_MIN, EPSILON_MAX


def test_a_limited_epsilon_may_reach_the_limit_and_no_further() -> None:
    assert check_epsilon(EPSILON_MAX, positive=True, limited=True) == EPSILON_MAX
    with pytest.raises(UserError, match=r"epsilon must be at most 32 \(got 1e\+308\): the DP-SGD noise calibration"):
        check_epsilon(1e308, positive=True, limited=True)
    assert check_epsilon(1e6, positive=True) == 1e6  # a closed-form claim (DP-ERM at 1e6: almost no noise)
    assert check_epsilon(1e308) == 1e308  # an epsilon that is no claim (a bound, a composition) has no limit


def test_a_limited_delta_lies_between_the_limits() -> None:
    assert check_delta(DELTA_MIN, limited=True) == DELTA_MIN and check_delta(DELTA_MAX, limited=True) == DELTA_MAX
    with pytest.raises(UserError, match=r"delta must be at least 1e-12 \(got 1e-300\)"):
        check_delta(1e-300, positive=True, limited=True)
    with pytest.raises(UserError, match=r"delta must be at most 0.001 \(got 0.5\)"):
        check_delta(0.5, positive=True, limited=True)
    assert check_delta(0.5, positive=True) == 0.5 and check_delta(0.5) == 0.5


@pytest.mark.parametrize("call", [lambda: calibrate_noise_multiplier(1e308, 1e-5, 0.17, 88),
                                  lambda: calibrate_noise_multiplier(8.0, 1e-300, 0.17, 88),
                                  lambda: calibrate_noise_multiplier(8.0, 0.999999, 0.17, 88)],
                         ids=["epsilon 1e308", "delta 1e-300", "delta 0.999999"])
def test_the_calibration_refuses_beyond_the_limits_at_once(call) -> None:
    """Each of these searched for minutes, or failed inside dp-accounting (exit 3)."""
    started = time.perf_counter()
    with pytest.raises(UserError):
        call()
    assert time.perf_counter() - started < 1.0
