"""The distribution of a gradient canary's likelihood-ratio score under DP-SGD, computed once per
mechanism, so that the one-run design simulates its games by drawing M scores instead of M x T
observations [Steinke, Nasr, Jagielski 2023, Sec. 6; Mahloujifar, Melis, Chaudhuri 2025].

A canary's score (:func:`audit.stats.one_run.design.dpsgd_canary_llr`) is the sum over the T steps of
``l(o_t) = log((1 - q) + q exp((2 o_t - 1) / (2 s^2)))``, the steps independent and identically
distributed given the canary's coin: ``o_t ~ N(0, s^2)`` when out, ``(1 - q) N(0, s^2) + q N(1, s^2)``
when in. So the score's law is the T-fold convolution of one step's law of ``l(o)`` — the privacy
loss distribution of the pair (Koskela, Jalko, Honkela 2020 compute it the same way, by FFT) — and
the canaries of a game are independent draws from it given their coins.

:func:`score_distribution` discretises one step's ``l(o)`` on a grid of spacing h (each value's mass
split between its two grid neighbours in proportion, so the mean is kept), convolves T times by one
FFT power, and keeps the two distributions of the score (out, in); :meth:`CanaryScoreDistribution.game`
draws a game from them by inverse CDF. The window covers the score's range up to 14 standard
deviations above the larger mean, so what wraps around in the circular convolution is below 1e-40;
the grid's rounding adds at most ``T h^2 / 4`` to a score's variance, with ``h`` a few thousandths of
its standard deviation. A design made from these games only chooses guess counts: any design keeps
the one-run bound valid (docs/references.md, "One-run auditing").
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

__all__ = ["CanaryScoreDistribution", "score_distribution", "GRID_POINTS"]

#: Points of the score grid (one FFT of this length per mechanism).
GRID_POINTS = 1 << 16
#: Points of the one-step observation grid, over [-12 s, 1 + 12 s].
STEP_POINTS = 1 << 15


@dataclass(frozen=True)
class CanaryScoreDistribution:
    """The score's law out and in on the grid ``start + h * j`` (``cdf_out``, ``cdf_in``: cumulative masses)."""

    start: float
    h: float
    cdf_out: np.ndarray
    cdf_in: np.ndarray

    def _draw(self, cdf: np.ndarray, u: np.ndarray, jitter: np.ndarray) -> np.ndarray:
        j = np.minimum(np.searchsorted(cdf, u * cdf[-1]), cdf.size - 1)
        return self.start + self.h * (j + jitter - 0.5)

    def game(self, canaries: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """One simulated one-run game: ``(scores, members)`` of ``canaries`` canaries, each in by a fair coin,
        its score drawn from the law of its side (a uniform jitter within a grid step breaks ties)."""
        members = rng.random(canaries) < 0.5
        u, jitter = rng.random(canaries), rng.random(canaries)
        scores = np.empty(canaries)
        scores[members] = self._draw(self.cdf_in, u[members], jitter[members])
        scores[~members] = self._draw(self.cdf_out, u[~members], jitter[~members])
        return scores, members


def _step_law(sample_rate: float, noise_multiplier: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One step's ``l(o)`` on the observation grid and its masses out and in (each summing to one)."""
    q, s = sample_rate, noise_multiplier
    o = np.linspace(-12.0 * s, 1.0 + 12.0 * s, STEP_POINTS)
    z = (2.0 * o - 1.0) / (2.0 * s * s)
    llr = z if q >= 1.0 else np.logaddexp(math.log1p(-q), math.log(q) + z)
    out = stats.norm.pdf(o, 0.0, s)
    inn = (1.0 - q) * out + q * stats.norm.pdf(o, 1.0, s)
    return llr, out / out.sum(), inn / inn.sum()


def _on_grid(llr: np.ndarray, mass: np.ndarray, low: float, h: float, n: int) -> np.ndarray:
    """The masses of values ``llr`` on the grid ``low + h * j``, split between the two neighbours (mean kept)."""
    x = (llr - low) / h
    j = np.floor(x).astype(np.int64)
    frac = x - j
    pmf = np.bincount(j, mass * (1.0 - frac), minlength=n + 1) + np.bincount(j + 1, mass * frac, minlength=n + 1)
    return pmf[:n]


@functools.lru_cache(maxsize=16)
def score_distribution(sample_rate: float, noise_multiplier: float, steps: int) -> CanaryScoreDistribution:
    """The score's law out and in for the mechanism (module docstring); cached per mechanism."""
    llr, out, inn = _step_law(float(sample_rate), float(noise_multiplier))
    low = float(llr.min())
    moments = [(float(np.dot(w, llr)), float(np.dot(w, (llr - np.dot(w, llr)) ** 2))) for w in (out, inn)]
    top = max(steps * m + 14.0 * math.sqrt(steps * v) for m, v in moments)
    width = max(top - steps * low, 2.0 * (float(llr.max()) - low))
    h = width / (GRID_POINTS - 2)
    laws = []
    for w in (out, inn):
        step = np.zeros(GRID_POINTS)
        step[:] = _on_grid(llr, w, low, h, GRID_POINTS)
        law = np.fft.irfft(np.fft.rfft(step) ** steps, n=GRID_POINTS)
        laws.append(np.cumsum(np.clip(law, 0.0, None)))
    return CanaryScoreDistribution(start=steps * low, h=h, cdf_out=laws[0], cdf_in=laws[1])
