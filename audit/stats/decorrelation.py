"""Correlated noise undone step by step, so that the noise tests see i.i.d. Gaussian noise again
(docs/references.md, "Correlated noise").

A matrix-factorisation mechanism (Choquette-Choo et al. 2023, arXiv 2306.08153, Sec. 2; jax_privacy's
``matrix_factorization_privatizer``) adds to step ``t``'s clipped gradient sum the noise ``n_t = s (C^{-1} Z)_t``:
``Z`` has i.i.d. ``N(0, 1)`` entries per coordinate and step, ``C`` is the lower-triangular strategy matrix and
``s = sigma * clip * sens(C)`` (jax_privacy's ``BandMFExecutionPlanConfig``: the noise multiplier, the clip norm
and the strategy's largest column norm). So ``(C n)_t = s Z_t``: multiplying the recorded noise sequence by ``C``
gives fresh, independent, isotropic Gaussian noise of standard deviation ``s`` at every step, on which every test
of :mod:`audit.stats.noise_check` holds exactly as for DP-SGD, with the clip norm read as ``clip * sens(C)``
(:func:`noise_scale`), so the multiplier they measure is the mechanism's ``sigma``.

:class:`ToeplitzDecorrelator` computes ``(C n)_t`` as the steps arrive, for a Toeplitz ``C`` given by the
entries of its first column: ``(C n)_t = sum_{k < b, k <= t} c_k n_{t-k}``, holding the last ``b - 1`` noise
vectors (memory ``(b - 1) d`` floats). A loop whose noise is not the declared correlation (another strategy, or
independent noise declared as correlated) leaves ``C n`` correlated across steps or at another scale, which the
independence and level tests read.

**Sensitivity** (:func:`noise_scale`). For a ``b``-banded ``C`` and participations at least ``b`` steps apart (the
cyclic participation of BandMF, cycle ``>= b``), a record's columns of ``C`` do not overlap, so its sensitivity
is the largest column norm, ``||c||_2`` for a banded Toeplitz ``C`` (Choquette-Choo et al. 2023, Thm. 2 and
Sec. 4). Other participations (cycle below the bands) are not covered: :func:`noise_scale` says so.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

import numpy as np

__all__ = ["ToeplitzDecorrelator", "noise_scale", "banded_sensitivity_reason"]


class ToeplitzDecorrelator:
    """``(C n)_t`` for the lower-triangular Toeplitz ``C`` whose first column starts with ``coefficients``
    (module docstring); call it with each step's noise vector in turn."""

    def __init__(self, coefficients: Sequence[float]) -> None:
        c = np.asarray(coefficients, dtype=np.float64).reshape(-1)
        if c.size == 0 or c[0] == 0 or not np.all(np.isfinite(c)):
            raise ValueError(f"a Toeplitz strategy needs finite coefficients with a non-zero first (got {c!r})")
        self.coefficients = c
        self._history: deque[np.ndarray] = deque(maxlen=max(c.size - 1, 0))

    def __call__(self, noise: np.ndarray) -> np.ndarray:
        """The decorrelated noise of this step, from its recorded noise ``noise``."""
        current = np.asarray(noise, dtype=np.float64)
        out = self.coefficients[0] * current
        for k, past in enumerate(reversed(self._history), start=1):
            out = out + self.coefficients[k] * past
        if self._history.maxlen:
            self._history.append(current.copy())
        return out


def banded_sensitivity_reason(bands: int, cycle: int) -> str:
    """"" when a ``bands``-banded strategy's sensitivity is its largest column norm under cyclic participation of
    ``cycle`` (module docstring), else why not."""
    if cycle >= bands:
        return ""
    return (f"its {bands} bands overlap a record's participations {cycle} steps apart, and the sensitivity of a "
            "banded strategy under such participation is not read yet")


def noise_scale(coefficients: Sequence[float]) -> float:
    """``sens(C)`` of a banded Toeplitz strategy under participations at least its band count apart: its largest
    column norm, the norm of its first column (module docstring)."""
    return float(np.linalg.norm(np.asarray(coefficients, dtype=np.float64)))
