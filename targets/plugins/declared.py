"""A trainer plugin's ``"mechanism"``: the DP mechanism its training runs, declared as our value or read from the
user's jax_privacy objects (docs/references.md, "Correlated noise"; :mod:`audit.theory.declared_mechanism`).

Accepted values:

* an :class:`audit.theory.declared_mechanism.DeclaredMechanism` (the participation and the noising matrix);
* jax_privacy's ``BandMFExecutionPlanConfig``: cyclic Poisson participation at its ``sampling_prob`` over
  ``len(strategy)`` groups (truncated to ``truncated_batch_size`` when set), noise correlated by the banded
  Toeplitz strategy ``strategy`` (what its ``plan`` builds: ``CyclicPoissonSampling`` with ``cycle_length =
  len(strategy)`` and ``matrix_factorization_privatizer`` with the strategy's Toeplitz inverse);
* one of jax_privacy's batch-selection strategies with independent noise: ``CyclicPoissonSampling``,
  ``BallsInBinsSampling``, ``BMinSepSampling``.

The objects are read by their class and public fields, without importing jax_privacy here (a plugin that gives
one has imported it). Anything else is a one-line :class:`audit.errors.UserError` naming what is accepted.

**Accounting** (:func:`event_maker`, :func:`accounting_gap`): the declared mechanism's ``dp_accounting`` DpEvent as
jax_privacy builds it (``jax_privacy.experimental.accounting``), as a function of the noise multiplier, for the
steps and records the code ran: cyclic Poisson with a banded (or independent) noise of at most ``cycle`` bands is
``amplified_bandmf_event`` with ``num_bands = cycle`` (Choquette-Choo et al. 2023: BandMF with cyclic Poisson
participation amplifies like DP-SGD over ``ceil(T / cycle)`` rounds; independent noise is the one-band case), and
with a cap ``truncated_amplified_bandmf_event`` (its largest group ``ceil(n / cycle)``). jax_privacy has no DpEvent
for balls-in-bins or min-separation participation (only a Monte-Carlo estimate) nor for BLT or dense strategies: for
those the gate says it has no accountant, never inventing one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from audit.errors import UserError
from audit.theory.declared_mechanism import (
    DPSGD,
    BallsInBins,
    DeclaredMechanism,
    MinSeparation,
    NoisingMatrix,
    PoissonParticipation,
)

__all__ = ["declared_mechanism", "accounting_gap", "event_maker"]

ACCEPTED = ("a DeclaredMechanism (audit.theory.declared_mechanism), jax_privacy's BandMFExecutionPlanConfig, or one "
            "of its batch-selection strategies (CyclicPoissonSampling, BallsInBinsSampling, BMinSepSampling)")


def _jax_privacy_class(value: Any) -> str:
    """The class name of a jax_privacy object, else ""."""
    kind = type(value)
    return kind.__name__ if kind.__module__.split(".")[0] == "jax_privacy" else ""


def _cyclic(value: Any) -> PoissonParticipation:
    """A ``CyclicPoissonSampling``'s participation."""
    return PoissonParticipation(rate=float(value.sampling_prob), cycle=int(value.cycle_length),
                                cap=None if value.truncated_batch_size is None else int(value.truncated_batch_size))


def _bandmf(spec: str, value: Any) -> DeclaredMechanism:
    """A ``BandMFExecutionPlanConfig``'s mechanism (module docstring)."""
    if getattr(value, "column_normalize", False):
        raise UserError(f"plugin {spec}: 'mechanism': a BandMFExecutionPlanConfig with column_normalize=True is not "
                        "read yet (its strategy matrix is not Toeplitz); use column_normalize=False")
    strategy = tuple(float(c) for c in np.asarray(value.strategy, dtype=float).ravel())
    cap = value.truncated_batch_size
    participation = PoissonParticipation(rate=float(value.sampling_prob), cycle=len(strategy),
                                         cap=None if cap is None else int(cap))
    return DeclaredMechanism(participation, NoisingMatrix("banded-toeplitz", strategy),
                             source="jax_privacy's BandMFExecutionPlanConfig")


def declared_mechanism(spec: str, value: Any) -> DeclaredMechanism:
    """The mechanism a plugin's ``"mechanism"`` declares (module docstring); None: DP-SGD."""
    if value is None:
        return DPSGD
    if isinstance(value, DeclaredMechanism):
        return value
    name = _jax_privacy_class(value)
    if name == "BandMFExecutionPlanConfig":
        return _bandmf(spec, value)
    source = f"jax_privacy's {name}"
    if name == "CyclicPoissonSampling":
        return DeclaredMechanism(_cyclic(value), source=source)
    if name == "BallsInBinsSampling":
        return DeclaredMechanism(BallsInBins(int(value.cycle_length)), source=source)
    if name == "BMinSepSampling":
        return DeclaredMechanism(MinSeparation(float(value.sampling_prob), int(value.min_sep)), source=source)
    what = f"jax_privacy's {name}" if name else type(value).__name__
    raise UserError(f"plugin {spec}: 'mechanism' must be {ACCEPTED} (got {what})")


def accounting_gap(mechanism: DeclaredMechanism) -> str:
    """"" when jax_privacy accounts the declared mechanism (module docstring), else why it does not."""
    p, noise = mechanism.participation, mechanism.noise
    if not isinstance(p, PoissonParticipation):
        return (f"jax_privacy has no DpEvent accountant for {p.describe()} (only a Monte-Carlo estimate), so its "
                "epsilon is not computed")
    bands = 1 if noise.independent else len(noise.coefficients)
    if noise.kind not in ("identity", "banded-toeplitz") or bands > p.cycle:
        return (f"jax_privacy has no DpEvent accountant for {noise.describe()} under {p.describe()} (its amplified "
                "accounting needs a banded strategy of at most cycle bands)")
    try:
        import jax_privacy.experimental.accounting  # noqa: F401
    except ImportError:
        return ("its accounting is jax_privacy's (amplified BandMF), and jax_privacy is not installed: pip install "
                "-e '.[jax]'")
    return ""


def event_maker(mechanism: DeclaredMechanism, rate: float, steps: int, n: int) -> Callable[[float], Any]:
    """The declared mechanism's DpEvent as a function of the noise multiplier (module docstring), at the Poisson
    ``rate`` (per eligible step), ``steps`` and ``n`` records the code ran; only where :func:`accounting_gap`
    is ""."""
    from jax_privacy.experimental import accounting

    p = mechanism.participation
    if p.cap is None:
        return lambda sigma: accounting.amplified_bandmf_event(sigma, steps, num_bands=p.cycle, sampling_prob=rate)
    largest = math.ceil(n / p.cycle)
    return lambda sigma: accounting.truncated_amplified_bandmf_event(
        sigma, steps, num_bands=p.cycle, sampling_prob=rate, largest_group_size=largest, truncated_batch_size=p.cap)
