"""The one place that calls Google's ``dp-accounting`` library.

Every accountant computation of the project (DP-SGD's privacy-loss distribution and Renyi-DP
curve, the RDP conversion, PLD noise calibration) goes through these functions, so a change of the
library touches one module. Two of them read fields the library does not expose publicly (the
composed PLD of an accountant and the dense probability arrays of a PLD): they are tied to the
versions in :data:`TESTED_VERSIONS`, which the package pins, and :func:`check_version` refuses
others with a one-line message instead of computing a wrong profile. The test-suite compares the
profiles read here with the library's own ``get_delta_for_epsilon``.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import dp_accounting
import numpy as np
from dp_accounting import pld as dp_pld
from dp_accounting import rdp as dp_rdp

from audit.errors import UserError
from audit.theory.disk_cache import remembered

__all__ = ["TESTED_VERSIONS", "check_version", "dpsgd_event", "dpsgd_pld", "dpsgd_rdp", "rdp_epsilon",
           "pld_profile_arrays", "calibrate_dpsgd_sigma", "event_epsilon", "calibrate_event_sigma",
           "EVENT_DISCRETIZATION"]

#: The PLD value discretisation of :func:`event_epsilon` and :func:`calibrate_event_sigma` (the library's default).
EVENT_DISCRETIZATION = 1e-4

#: Versions of dp-accounting this module was tested with: [lowest, first untested minor).
TESTED_VERSIONS = ("0.4.3", "0.7")


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".")[:3] if part.isdigit())


@functools.lru_cache(maxsize=1)
def check_version() -> str:
    """The installed dp-accounting version; UserError when it is missing or outside
    :data:`TESTED_VERSIONS` (the internals read here may differ there).

    Returns:
        The version string.

    Raises:
        UserError: dp-accounting is missing or its version is outside the tested range.
    """
    try:
        installed = version("dp-accounting")
    except PackageNotFoundError:
        raise UserError("dp-accounting is not installed; run `pip install -e .` (README)") from None
    lo, hi = (_version_tuple(v) for v in TESTED_VERSIONS)
    if not lo <= _version_tuple(installed) < hi:
        raise UserError(f"dp-accounting {installed} is untested (supported: >= {TESTED_VERSIONS[0]}, "
                        f"< {TESTED_VERSIONS[1]}); install a supported version: pip install "
                        f"'dp-accounting>={TESTED_VERSIONS[0]},<{TESTED_VERSIONS[1]}'")
    return installed


def dpsgd_event(noise_multiplier: float, sample_rate: float, steps: int) -> Any:
    """The dp-accounting event of DP-SGD: a Poisson-subsampled Gaussian composed ``steps`` times.

    Args:
        noise_multiplier: sigma.
        sample_rate: q.
        steps: T.

    Returns:
        The ``dp_accounting`` DpEvent.
    """
    check_version()

    return dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(sample_rate, dp_accounting.GaussianDpEvent(noise_multiplier)), steps)


@functools.lru_cache(maxsize=32)
def dpsgd_pld(noise_multiplier: float, sample_rate: float, steps: int, discretization: float,
              replace_one: bool = False) -> Any:
    """The composed privacy-loss distribution of DP-SGD (pessimistic discretisation), for
    add/remove neighbours or, with ``replace_one``, replace-one neighbours. Cached.

    Args:
        noise_multiplier: sigma.
        sample_rate: q.
        steps: T.
        discretization: the PLD's value discretisation interval.
        replace_one: replace-one neighbours instead of add/remove.

    Returns:
        The ``dp_accounting`` PrivacyLossDistribution.
    """

    relation = (dp_accounting.NeighboringRelation.REPLACE_ONE if replace_one
                else dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE)
    accountant = dp_pld.PLDAccountant(relation, value_discretization_interval=discretization)
    accountant.compose(dpsgd_event(noise_multiplier, sample_rate, steps))
    return accountant._pld  # not public: the composed PLD (pinned versions)


@functools.lru_cache(maxsize=64)
def dpsgd_rdp(noise_multiplier: float, sample_rate: float, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """(orders, RDP values) of DP-SGD from dp-accounting's RdpAccountant (default orders). Cached.

    Args:
        noise_multiplier: sigma.
        sample_rate: q.
        steps: T.

    Returns:
        The orders and the RDP value at each.
    """

    accountant = dp_rdp.RdpAccountant()
    logger = logging.getLogger("absl")
    level = logger.level
    logger.setLevel(logging.ERROR)  # dp-accounting warns when it drops an order it cannot compute
    try:
        accountant.compose(dpsgd_event(noise_multiplier, sample_rate, steps))
    finally:
        logger.setLevel(level)
    return accountant.orders, accountant.rdp


def rdp_epsilon(orders: np.ndarray, rdp: np.ndarray, delta: float) -> float:
    """eps(delta) of an RDP curve by dp-accounting's ``compute_epsilon`` (Canonne, Kamath, Steinke
    2020, Prop. 12).

    Args:
        orders: the Renyi orders.
        rdp: the RDP value at each order.
        delta: the target delta.

    Returns:
        eps(delta).
    """
    check_version()

    return float(dp_rdp.compute_epsilon(orders, rdp, delta)[0])


def _dense_arrays(pmf: Any) -> tuple[np.ndarray, np.ndarray, float]:
    dense = pmf.to_dense_pmf()
    probs = np.asarray(dense._probs, dtype=np.float64)  # not public (pinned versions)
    losses = (np.arange(probs.size) + dense._lower_loss) * dense._discretization
    return losses, probs, float(dense._infinity_mass)


def pld_profile_arrays(pld: Any) -> list[tuple[np.ndarray, np.ndarray, float]]:
    """(losses, probabilities, infinity mass) of each direction of a PLD: the remove direction and,
    for an asymmetric PLD, the add direction. Mass is returned as stored (never renormalised).

    Args:
        pld: a ``dp_accounting`` PrivacyLossDistribution.

    Returns:
        One (losses, probabilities, infinity mass) triple per direction.
    """
    check_version()
    arrays = [_dense_arrays(pld._pmf_remove)]
    if not pld._symmetric:
        arrays.append(_dense_arrays(pld._pmf_add))
    return arrays


def calibrate_dpsgd_sigma(sample_rate: float, steps: int, epsilon: float, delta: float, discretization: float,
                          bracket: tuple[float, float], tol: float) -> float:
    """Noise multiplier for (eps, delta) by dp-accounting's ``calibrate_dp_mechanism`` on a PLD
    accountant of the given discretisation, searched inside ``bracket``.

    Args:
        sample_rate: q.
        steps: T.
        epsilon: the target epsilon.
        delta: the target delta.
        discretization: the PLD's value discretisation interval.
        bracket: (lowest, highest) noise multiplier searched.
        tol: the search's tolerance on sigma.

    Returns:
        The noise multiplier.
    """

    make_event: Callable[[float], Any] = lambda s: dpsgd_event(s, sample_rate, steps)  # noqa: E731
    return float(dp_accounting.calibrate_dp_mechanism(
        lambda: dp_pld.PLDAccountant(value_discretization_interval=discretization), make_event, epsilon, delta,
        bracket_interval=dp_accounting.ExplicitBracketInterval(*bracket), tol=tol))


def event_epsilon(event: Any, delta: float, discretization: float = EVENT_DISCRETIZATION) -> float:
    """Epsilon at ``delta`` of any ``dp_accounting`` DpEvent (a declared mechanism's, e.g. the ones jax_privacy's
    execution plans emit) by the PLD accountant (add/remove neighbours, pessimistic discretisation).

    Args:
        event: the DpEvent.
        delta: the delta.
        discretization: the PLD's value discretisation interval.

    Returns:
        The epsilon.

    Raises:
        UserError: the PLD accountant does not support the event (``supports`` declines it).
    """
    check_version()
    accountant = dp_pld.PLDAccountant(value_discretization_interval=discretization)
    if not accountant.supports(event):
        raise UserError(f"dp-accounting's PLD accountant does not support the event {type(event).__name__}")
    accountant.compose(event)
    return float(accountant.get_epsilon(delta))


def calibrate_event_sigma(make_event: Callable[[float], Any], epsilon: float, delta: float,
                          bracket: tuple[float, float] = (0.05, 500.0), tol: float = 1e-4,
                          discretization: float = EVENT_DISCRETIZATION) -> float:
    """The noise multiplier at which ``make_event(sigma)`` is (epsilon, delta)-DP by the PLD accountant
    (dp-accounting's ``calibrate_dp_mechanism``, to ``tol``): first inside ``bracket`` on a PLD 100 times coarser
    (pessimistic, so its root lies at or above the fine one; about a second), then within 2% below that root at
    ``discretization`` (about 90 s for a 40-step amplified BandMF event done at once, 6 s in two passes).
    Remembered on disk (:func:`audit.theory.disk_cache.remembered`), keyed by the events ``make_event`` builds at
    sigma 1 and 2 (their repr) and the search's arguments.

    Args:
        make_event: sigma -> DpEvent.
        epsilon: the target epsilon.
        delta: the target delta.
        bracket: (lowest, highest) noise multiplier searched.
        tol: the search's tolerance on sigma.
        discretization: the PLD's value discretisation interval.

    Returns:
        The noise multiplier.
    """
    check_version()

    def search(interval: tuple[float, float], step: float, within: float) -> float:
        return float(dp_accounting.calibrate_dp_mechanism(
            lambda: dp_pld.PLDAccountant(value_discretization_interval=step), make_event, epsilon, delta,
            bracket_interval=dp_accounting.ExplicitBracketInterval(*interval), tol=within))

    def two_passes() -> float:
        coarse = search(bracket, 100 * discretization, 10 * tol)
        try:
            return search((0.98 * coarse, coarse * 1.001 + tol), discretization, tol)
        except (ValueError, RuntimeError):  # the fine root outside the narrow bracket: search the whole one
            return search(bracket, discretization, tol)

    question = {"events": [repr(make_event(1.0)), repr(make_event(2.0))], "epsilon": float(epsilon),
                "delta": float(delta), "bracket": [float(b) for b in bracket], "tol": float(tol),
                "discretization": float(discretization)}
    return remembered("event_noise_multiplier", question, two_passes)
