"""Argument checks shared by the theory and the statistics layers: the one definition of a valid
epsilon, delta, confidence and FPR grid, each raising :class:`audit.errors.UserError` with a
one-line fix. With ``limited=True`` (a user's epsilon and delta that the DP-SGD noise calibration will search
with), they also stay within what that search computes in seconds (:mod:`audit.theory.limits`)."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from audit.errors import UserError
from audit.theory.limits import DELTA_MAX, DELTA_MAX_WHY, DELTA_MIN, DELTA_MIN_WHY, EPSILON_MAX, EPSILON_MAX_WHY

__all__ = ["as_alpha", "scalar_or_array", "check_epsilon", "check_delta", "check_confidence"]


def as_alpha(alpha: ArrayLike) -> np.ndarray:
    """FPR values (tradeoff-curve abscissae) as a float array; each must lie in [0, 1].

    Args:
        alpha: a scalar or an array of false-positive rates.

    Returns:
        A float64 array of alpha's shape.

    Raises:
        UserError: a value outside [0, 1].
    """
    a = np.asarray(alpha, dtype=np.float64)
    if a.size and (np.any(~np.isfinite(a)) or np.any(a < 0.0) or np.any(a > 1.0)):
        raise UserError("tradeoff alpha (false-positive rate) must lie in [0, 1]; pass values in that range")
    return a


def scalar_or_array(x: ArrayLike, values: np.ndarray) -> float | np.ndarray:
    """Return a float when the caller passed a scalar, else an array of the input's shape.

    Args:
        x: what the caller passed.
        values: the computed values, one per element of ``x``.

    Returns:
        A float when ``x`` is a scalar, else ``values`` in ``x``'s shape.
    """
    if np.ndim(x) == 0:
        return float(np.asarray(values).reshape(-1)[0])
    return np.asarray(values, dtype=np.float64).reshape(np.shape(x))


def check_epsilon(epsilon: float, name: str = "epsilon", *, positive: bool = False, limited: bool = False) -> float:
    """``epsilon`` as a float: non-negative (``inf`` allowed), or with ``positive`` finite and > 0; with ``limited``
    also at most :data:`audit.theory.limits.EPSILON_MAX`.

    Args:
        epsilon: the value to check.
        name: how the error names it.
        positive: require a finite epsilon > 0.
        limited: require at most ``EPSILON_MAX`` (an epsilon the DP-SGD noise calibration searches with).

    Returns:
        epsilon as a float.

    Raises:
        UserError: a value outside the range.
    """
    e = float(epsilon)
    if math.isnan(e) or e < 0.0 or (positive and not (0.0 < e < math.inf)):
        need = "a positive finite number" if positive else "a non-negative number"
        raise UserError(f"{name} must be {need} (got {epsilon!r}); e.g. {name} 1.0")
    if limited and e > EPSILON_MAX:
        raise UserError(f"{name} must be at most {EPSILON_MAX:g} (got {epsilon!r}): {EPSILON_MAX_WHY}; e.g. {name} 8")
    return e


def check_delta(delta: float, name: str = "delta", *, positive: bool = False, limited: bool = False) -> float:
    """``delta`` as a float in [0, 1) (every mechanism is (eps, 1)-DP, so 1 says nothing), or with
    ``positive`` in (0, 1); with ``limited`` from :data:`audit.theory.limits.DELTA_MIN` to
    :data:`audit.theory.limits.DELTA_MAX`.

    Args:
        delta: the value to check.
        name: how the error names it.
        positive: require delta > 0.
        limited: require ``DELTA_MIN`` <= delta <= ``DELTA_MAX`` (a delta the DP-SGD noise calibration searches
            with).

    Returns:
        delta as a float.

    Raises:
        UserError: a value outside the range.
    """
    d = float(delta)
    if not (0.0 <= d < 1.0) or (positive and d == 0.0):
        interval = "(0, 1)" if positive else "[0, 1)"
        raise UserError(f"{name} must lie in {interval} (got {delta!r}); e.g. {name} 1e-5")
    if limited and d < DELTA_MIN:
        raise UserError(f"{name} must be at least {DELTA_MIN:g} (got {delta!r}): {DELTA_MIN_WHY}; e.g. {name} 1e-5")
    if limited and d > DELTA_MAX:
        raise UserError(f"{name} must be at most {DELTA_MAX:g} (got {delta!r}): {DELTA_MAX_WHY}; e.g. {name} 1e-5")
    return d


def check_confidence(confidence: float) -> float:
    """A confidence level strictly between 0 and 1.

    Args:
        confidence: the value to check.

    Returns:
        confidence as a float.

    Raises:
        UserError: a value outside (0, 1).
    """
    c = float(confidence)
    if not (0.0 < c < 1.0):
        raise UserError(f"confidence must lie strictly between 0 and 1 (got {confidence}); use e.g. 0.95")
    return c
