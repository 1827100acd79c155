"""The noise a DP-SGD loop adds, measured where mistakes hide: per parameter tensor and per step, across
steps, in its shape, and across seeds (docs/references.md, "Configuration checks").

DP-SGD's accountant [Abadi et al. 2016, Alg. 1] assumes that every step adds fresh noise ``N(0, sigma^2
C^2 I)`` to the clipped sum, on every coordinate. :class:`NoiseRecorder` keeps, for each step the code
takes, sufficient statistics of the noise it added (the noisy sum minus the clipped sum, per parameter
tensor) in memory that does not grow with the parameter count; :func:`check_noise` tests them:

* **level** (violation): per tensor pooled over the steps, ``S_k / (sigma_t C)^2 ~ chi^2_{d_k T}`` when the
  noise multiplier is ``sigma_t = sigma_0 (1 - tol)`` (``sigma_0``: the multiplier the claim needs; ``tol``:
  :data:`LEVEL_TOLERANCE`, below; larger noise is stochastically larger), and per tensor and step
  ``S_{k,t} / (sigma_t C)^2 ~ chi^2_{d_k}``; a sum below its lower ``alpha`` quantile is noise below the
  ``sigma_0`` the claim needs, beyond the tolerance. The pooled test is the one-sided upper confidence limit
  ``sigma_k^+ = sqrt(S_k / chi^2_{d_k T}(a)) / C`` compared with ``sigma_t``; the smallest ``sigma_k^+``
  (the least noisy tensor) is the noise multiplier the configuration's epsilon is computed with (the epsilon
  test applies its own 1% to that epsilon, not this tolerance).
* **coverage** (violation): per coordinate ``i`` over its ``T - m_i`` steps of non-zero noise (``m_i``: the
  steps whose noise was exactly 0.0), ``S_i / (sigma_t C)^2`` is stochastically larger than
  ``chi^2_{T - m_i}`` (each step adds ``N(0, s^2 C^2)`` with ``s >= sigma_t``, and given which draws were
  exactly 0 the others keep their law); a coordinate whose sum lies below the lower ``alpha/16/d`` quantile
  (half the coverage share, union bound over the ``d`` coordinates of the model) gets less noise than the
  claim needs. The steps of exactly 0 are tested by their own law (**Exact zeros**, below): a coordinate that never
  gets noise (an input column of a weight skipped, a slice left out) reads 0 at every step, which Gaussian noise in
  float32 does with probability at most ``p0^T`` (``p0 = 2^-22``): at ``T >= 2`` one such coordinate is caught in
  any model up to ``10^9`` coordinates at the gate's levels (noise alpha 0.025/3 or more), however small its share
  of its tensor (the pooled level of its tensor barely moves, but its epsilon is infinite). At ``T = 1`` one
  never-noised coordinate cannot be told from a generator's exact 0.0 in a large model: the test then flags a few
  or more (7 at 10^6 coordinates and alpha = 0.05/3; 1 in a model of 650), and its message says so.
* **independence** (violation): for independent isotropic Gaussian vectors the cosine ``r`` of two of
  them in ``n`` dimensions satisfies ``r sqrt(n - 1) / sqrt(1 - r^2) ~ t_{n-1}`` exactly (the projection
  of one on the other's direction against the ``chi^2_{n-1}`` rest), whatever their scale. Consecutive
  steps' full noise vectors per tensor: the cosines of steps (1, 2), (2, 3), ... are i.i.d. under the null
  (given the middle vector, each is independent of the past, by rotation invariance), mapped to
  ``N(0, 1)`` and summed (Stouffer, two-sided). Every pair of steps (any lag, e.g. a generator reseeded
  every epoch): the cosines of a fixed subset of each tensor's coordinates (the *sketch*), the largest
  ``|r|`` against a union bound over the pairs. Noise reused gives ``r = 1``.
* **cross-tensor** (violation): the same exact law within a step, across tensors: for every pair of
  tensors ``(k, j)``, the cosine of their first ``m = min(d_k, d_j, CROSS_PREFIX)`` coordinates at each
  step (independent under fresh noise), mapped to ``N(0, 1)`` and summed over the steps (Stouffer,
  two-sided), union-bounded over the pairs. Noise reused across tensors in one step (the bias given the
  weight's first noise values; a generator re-seeded with the same seed before each tensor, so every
  tensor starts with the same draws; one flat noise buffer read from its start for every tensor) gives
  ``r = +-1`` at every step: the released sum then carries noise that cancels between tensors, and
  the step is not DP. Reuse at another offset is not what this test sees.
* **distribution** (violation): the angle of a pair of i.i.d. coordinates ``(x, y)`` is uniform exactly
  when their law is rotation invariant, and independent coordinates with a rotation-invariant law are
  Gaussian (Maxwell's characterisation; Bryc 1995). Folded to ``[0, pi/4]`` the angle falls below
  ``pi/8`` with probability exactly 1/2 for Gaussian noise of any scale, 0.586 for Laplace noise and
  0.414 for uniform noise (``min(|x|, |y|) < tan(pi/8) max(|x|, |y|)``): the count over the pairs of
  coordinates ``(2i, 2i+1)`` of each tensor and step (the first :data:`SHAPE_PAIRS` of each) is
  Binomial(n, 1/2), tested exactly (two-sided; only when the independence and cross-tensor tests pass and
  no coordinate is without noise, since coordinates that repeat, or are never noised, are not independent
  draws of one law).
  Why a violation: the accountant's epsilon is the Gaussian's. At a given variance the Gaussian has the
  smallest Fisher information of any location family (``J >= 1 / Var``, equality only for the Gaussian;
  Stam 1959), so a step's shift of C is more distinguishable under any other noise of the claimed
  variance: its KL divergence is ``J C^2 / 2`` to first order (Laplace: twice the Gaussian's), and the
  composition of many steps tends to a Gaussian tradeoff whose ``mu`` grows with those divergences (Dong,
  Roth, Su 2019, Sec. 3): the composed epsilon exceeds the accountant's. Uniform noise is worse: a
  shift of C leaves part of its bounded support, where one output reveals the record (``delta > 0`` per
  step that no Gaussian accountant covers).
* **seed** (violation): the sketches of two runs from different seeds, every pair of their steps, as the
  repeat test: noise identical across seeds (a generator seeded by a constant) gives ``r = 1``.

**Tolerance** (:data:`LEVEL_TOLERANCE`, 0.25%). The epsilon test allows the configuration's epsilon 1% above
the claim (:data:`audit.theory.config_check.CONFIG_TOLERANCE`); the level and coverage tests state the same
policy on sigma: their null is ``sigma >= sigma_0 (1 - 0.0025)``. On a grid of 11 DP-SGD configurations (epsilon
0.1 to 30, q 0.004 to 1, T 1 to 10^4, delta 1e-5, our PLD accountant) the relative decrease of sigma that raises
epsilon by 1% lies between 0.36% (epsilon 16, q 0.01, T 100, sigma 0.363) and 0.90% (one step): 0.25% of sigma
is within the epsilon test's 1% on every one of them (it is looser only below sigma ~0.3, where epsilon is
steeper). It also covers the calibration of ``sigma_0`` (:func:`audit.theory.dpsgd.calibrate_noise_multiplier`,
a search to 1e-4 absolute, at most 0.1% of sigma >= 0.1): a loop at the accountant's exact threshold is inside
the null and is flagged at most at its share of alpha at any number of coordinate-steps, where without a
tolerance it was flagged 17% of the time at 3e10 coordinate-steps and always at 2e11. Noise at 0.9 sigma_0 is
as far outside the null as before (0.9 against 0.9975). :func:`tolerated_sigma` is the one place it is applied.

**Exact zeros** (:data:`ZERO_RATES`). Float32 Gaussian generators return an exact 0.0 far more often than the
rounding of ``N(0, s^2)`` to float32 (``|x|`` below half the smallest subnormal, ``2^-150``: probability at most
``2^-149 phi(0) / s``): ``torch.randn`` and ``torch.normal`` on the CPU (Box-Muller on blocks of 16 uniforms of
the 2^-24 grid: a uniform 0 zeroes both outputs of a pair ``(j, j + 8)``, or the sine output alone) at
``1.5 x 2^-24 = 8.9e-8`` per draw on average and ``2^-23`` at the sine positions; measured on this project's
2-core machine (``benchmarks/float32_zeros.py``, ``benchmarks/results_float32_zeros.json``) 94 zeros in 10^9
draws of torch 2.14 (9.4e-8, 74 of them in pairs; 99.9% upper limit 1.28e-7), 123 in 10^9 of numpy's float32
ziggurat (1.23e-7; upper limit 1.61e-7) and 0 in 10^9 of ``jax.random.normal`` (erfinv of a uniform whose grid
holds no 0; upper limit 6.9e-9). ``p0`` is bounded by ``2^-22 = 2.4e-7`` (twice torch's largest per-position
rate, above every measured upper limit) plus the rounding term at ``sigma_t C``; float16 adds its larger
rounding term (subnormal 2^-24), float64 uses ``2^-48``. The recorded values are float64 copies, so the dtype is
float32 unless the caller names it (:class:`NoiseRecorder`). The recorded noise is the noisy sum minus the
clipped sum: in float32 a noise value below half an ulp of the gradient coordinate it is added to also reads 0
(probability about ``2^-24 |g| 0.8 / (sigma C)``), which ``p0`` covers while the coordinates' gradient sums stay
within about ``2.5 sigma C`` on average over the coordinates (the bound is needed on the mean of the
coordinates' probabilities, not on each); half precision sums are not covered. The test: with ``m_i`` the
steps of coordinate ``i`` whose noise was exactly 0 and ``N_m`` the coordinates with ``m_i >= m``, under the
null ``m_i`` is stochastically at most Bin(T, p0) (fresh noise every step), so ``E N_m <= mu_m = d P(Bin(T, p0)
>= m)``; zeros come at most two to a draw (the Box-Muller pair), so ``N_m <= 2 B_m`` with ``B_m`` a sum of
independent Bernoulli variables of total mean at most ``mu_m``, whose tail is at most Poisson(``mu_m``)'s at
``j >= mu_m + 1`` (Hoeffding 1956, Thm. 4; Anderson and Samuels 1967) and at most ``mu_m / j`` (Markov)
everywhere: the p-value bound is the smaller at ``j = ceil(N_m / 2)``. Every ``m`` is tested, ``m = T`` (no
noise at any step: the count of never-noised coordinates against ``d p0^T``) at half the zeros' share (all of it
at ``T = 1``) and each ``m < T`` at ``2^-(m+1)`` of it (union bound).

**Alpha split** (Bonferroni). The ``alpha`` the caller gives is split in eight equal shares
(:data:`ALPHA_SHARES`): the pooled level per tensor (``alpha/8/K`` each, ``K`` tensors), the per-step
level (``alpha/8/(K T)`` each), the coverage (``alpha/16/d`` per coordinate for the sums, ``alpha/16`` for the
exact zeros), the consecutive-steps test
(``alpha/8/K`` per tensor), the any-lag repeat test (``alpha/8/K`` per tensor, its largest ``|r|``
union-bounded over the pairs), the cross-tensor test (``alpha/8/P`` per pair of tensors, ``P`` pairs), the
distribution (``alpha/16`` pooled over every tensor and ``alpha/16/K`` per tensor) and the seed test
(``alpha/8/K`` per tensor, union over the pairs). A correct loop (Gaussian noise of multiplier at least
``sigma_0 (1 - tol)``, fresh, independent across tensors and of the seed, exact zeros at most ``p0`` a draw) is
flagged with probability at most ``alpha``.

**Memory** per run: ``K`` floats per step (sums of squares) and ``K`` per step (consecutive inner
products), the sketch (``min(d_k, max(4, 256 // K))`` coordinates per tensor, float32 per step: at most
``4 max(256, 4 K)`` bytes a step), the previous step's noise and the per-coordinate sums of squares
(``2 d`` floats) and steps of exactly 0 (``d`` 16-bit counters), ``3 K`` counters and ``2 K^2`` for the
cross-tensor sums: 5,000 steps of a 62-tensor model of 10^6 parameters hold about 28 MB (10 MB of per-step
statistics, 18 MB the three ``d``-vectors), whatever ``d``; :meth:`NoiseRecorder.nbytes`. Time: a few passes
over the noise per step (about 30 ms for 10^6 parameters on a loaded 2-core machine) and one ``K x K`` product
of prefixes of at most :data:`CROSS_PREFIX` coordinates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from audit.stats.outcome import Finding

__all__ = ["NoiseRecorder", "NoiseCheck", "check_noise", "ALPHA_SHARES", "SKETCH_TOTAL", "SHAPE_PAIRS", "cosine_z",
           "cosine_tail", "CROSS_PREFIX", "LEVEL_TOLERANCE", "ZERO_RATES", "zero_probability", "tolerated_sigma"]

#: The Bonferroni split of the caller's alpha across the sub-tests (module docstring).
ALPHA_SHARES = {"level-pooled": 1 / 8, "level-step": 1 / 8, "coverage": 1 / 8, "consecutive": 1 / 8,
                "repeat": 1 / 8, "cross-tensor": 1 / 8, "distribution": 1 / 8, "seed": 1 / 8}
#: Coordinates of each tensor's start compared across tensors within a step (the cross-tensor test).
CROSS_PREFIX = 1024
#: Sketch coordinates over all tensors (each tensor at least :data:`SKETCH_MIN`, at most its size).
SKETCH_TOTAL, SKETCH_MIN = 256, 4
#: Pairs of coordinates per tensor and step in the distribution test (the first ``2 x`` this many coordinates).
SHAPE_PAIRS = 1 << 15
#: The folded pair angle's median under Gaussian noise: ``tan(pi/8)``.
_TAN_PI_8 = math.tan(math.pi / 8)
#: Rows of a Gram matrix computed at once (memory ``_CHUNK x T`` floats).
_CHUNK = 1024
#: The level and coverage tests' tolerance on the noise multiplier: their null is ``sigma >= sigma_0 (1 -
#: LEVEL_TOLERANCE)`` (module docstring, "Tolerance"): the epsilon test's 1% on epsilon
#: (:data:`audit.theory.config_check.CONFIG_TOLERANCE`) stated on sigma.
LEVEL_TOLERANCE = 0.0025
#: Per noise dtype: a bound on the probability that one draw of its Gaussian generators is exactly 0.0, and the
#: dtype's smallest positive subnormal (module docstring, "Exact zeros"; ``benchmarks/float32_zeros.py``).
ZERO_RATES = {"float64": (2.0 ** -48, 2.0 ** -1074), "float32": (2.0 ** -22, 2.0 ** -149),
              "bfloat16": (2.0 ** -22, 2.0 ** -133), "float16": (2.0 ** -22, 2.0 ** -24)}
#: The dtype a recorder assumes when its caller does not name the noise's own (the recorded values are float64
#: copies): the one of the largest measured generator zero rate of the usual training dtypes.
DEFAULT_NOISE_DTYPE = "float32"
#: Standard normal density at 0.
_PHI0 = 1.0 / math.sqrt(2.0 * math.pi)


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    """``a . b`` by numpy's own loop (BLAS's threaded dot is many times slower on a loaded machine)."""
    return float(np.einsum("i,i->", a, b))


def _sketch_indices(sizes: tuple[int, ...]) -> list[np.ndarray]:
    """The fixed coordinates of each tensor in the sketch (seeded by the sizes alone: the same in every run)."""
    per = max(SKETCH_MIN, SKETCH_TOTAL // max(len(sizes), 1))
    out = []
    for k, d in enumerate(sizes):
        rng = np.random.default_rng([d, k, 97])
        out.append(np.sort(rng.choice(d, size=min(d, per), replace=False)))
    return out


class NoiseRecorder:
    """Sufficient statistics of the noise of one run, fed one step at a time (:meth:`add`: the noise of
    every tensor, concatenated in the order of ``sizes``). Per step: each tensor's sum of squares
    (``squares``, T x K), the inner product with the previous step's noise (``inner``, (T-1) x K) and the
    sketch (``sketch``, T x its coordinates); over all steps: per tensor ``fourth`` (sum of fourth powers),
    ``pairs`` and ``pairs_low`` (pairs of coordinates with a folded angle below pi/8), per coordinate
    ``coordinate_squares`` (sum of squares) and ``coordinate_zero_steps`` (steps whose noise was exactly 0.0,
    saturating at 65,535), per pair of tensors ``cross_z`` and ``cross_steps`` (the sum of the normal scores of
    their prefixes' cosines, and the steps it sums). ``dtypes``: the noise dtypes the caller named (``dtype``
    here or in :meth:`add`; none named: :data:`DEFAULT_NOISE_DTYPE`), which set the exact-zero rate."""

    def __init__(self, sizes: tuple[int, ...], dtype: Any = None) -> None:
        self.sizes = tuple(int(s) for s in sizes)
        self.dtypes: set[str] = set()
        self._note_dtype(dtype)
        self.bounds = np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)
        parts = _sketch_indices(self.sizes)
        self.sketch_tensor = np.concatenate([np.full(p.size, k) for k, p in enumerate(parts)]).astype(np.int64)
        self.sketch_index = np.concatenate([p + self.bounds[k] for k, p in enumerate(parts)]).astype(np.int64)
        k = len(self.sizes)
        self._squares: list[np.ndarray] = []
        self._inner: list[np.ndarray] = []
        self._sketch: list[np.ndarray] = []
        self.fourth = np.zeros(k)
        self.pairs = np.zeros(k, dtype=np.int64)
        self.pairs_low = np.zeros(k, dtype=np.int64)
        self._prev: np.ndarray | None = None
        self.coordinate_squares = np.zeros(int(self.bounds[-1]))
        self.coordinate_zero_steps = np.zeros(int(self.bounds[-1]), dtype=np.uint16)
        self.prefix_lengths = (np.minimum(np.minimum.outer(self.sizes, self.sizes), CROSS_PREFIX) if k
                               else np.zeros((0, 0), dtype=np.int64))
        self.cross_z = np.zeros((k, k))
        self.cross_steps = np.zeros((k, k), dtype=np.int64)

    def _note_dtype(self, dtype: Any) -> None:
        if dtype is None:
            return
        try:
            name = np.dtype(dtype).name  # numpy and jax dtypes, numpy scalar types, "float32"
        except TypeError:
            name = str(dtype).rsplit(".", 1)[-1]  # torch ("torch.float32")
        if name not in ZERO_RATES:
            raise ValueError(f"unknown noise dtype {dtype!r}; one of {sorted(ZERO_RATES)}")
        self.dtypes.add(name)

    @property
    def noise_dtypes(self) -> list[str]:
        """The noise dtypes the exact-zero rate is taken over (:data:`DEFAULT_NOISE_DTYPE` when none was named)."""
        return sorted(self.dtypes) or [DEFAULT_NOISE_DTYPE]

    def add(self, noise: np.ndarray, dtype: Any = None) -> None:
        """Record one step's noise (flat, the tensors concatenated; kept as float64); ``dtype``: the dtype the code
        drew it in, when the caller knows it (the values given are often float64 copies)."""
        self._note_dtype(dtype)
        noise = np.asarray(noise, dtype=np.float64).reshape(-1)
        if noise.size != self.bounds[-1]:
            raise ValueError(f"a step's noise has {noise.size} coordinates; the recorder expects {self.bounds[-1]}")
        parts = [noise[a:b] for a, b in zip(self.bounds[:-1], self.bounds[1:], strict=True)]
        flat_squares = noise * noise
        self.coordinate_squares += flat_squares
        zero = (noise == 0) & (self.coordinate_zero_steps < np.iinfo(np.uint16).max)
        if zero.any():
            self.coordinate_zero_steps[zero] += 1
        squares = [flat_squares[a:b] for a, b in zip(self.bounds[:-1], self.bounds[1:], strict=True)]
        self._add_cross(parts)
        self._squares.append(np.array([float(q.sum()) for q in squares]))
        if self._prev is not None:
            self._inner.append(np.array([_dot(p, self._prev[a:b]) for p, a, b in
                                         zip(parts, self.bounds[:-1], self.bounds[1:], strict=True)]))
        self._prev = noise
        self._sketch.append(noise[self.sketch_index].astype(np.float32))
        for k, (p, q) in enumerate(zip(parts, squares, strict=True)):
            self.fourth[k] += _dot(q, q)
            half = min(p.size // 2, SHAPE_PAIRS)
            x, y = np.abs(p[:2 * half:2]), np.abs(p[1:2 * half:2])
            larger = np.maximum(x, y)
            self.pairs[k] += int(np.count_nonzero(larger))
            self.pairs_low[k] += int(np.count_nonzero(np.minimum(x, y) < _TAN_PI_8 * larger))  # never a (0, 0) pair

    def _add_cross(self, parts: list[np.ndarray]) -> None:
        """One step of the cross-tensor test: the cosine of every pair of tensors' aligned prefixes."""
        k = len(parts)
        if k < 2:
            return
        width = int(self.prefix_lengths.max())
        prefix = np.zeros((k, width))
        for i, p in enumerate(parts):
            prefix[i, :min(p.size, width)] = p[:width]
        cumulative = np.cumsum(prefix * prefix, axis=1)
        m = self.prefix_lengths
        norms = cumulative[np.arange(k)[:, None], m - 1] * cumulative[np.arange(k)[None, :], m - 1]
        tested = np.triu((m >= 2) & (norms > 0), 1)
        if not tested.any():
            return
        r = (prefix @ prefix.T)[tested] / np.sqrt(norms[tested])
        self.cross_z[tested] += cosine_z(r, m[tested])
        self.cross_steps[tested] += 1

    @property
    def steps(self) -> int:
        return len(self._squares)

    @property
    def squares(self) -> np.ndarray:
        """(T, K) sums of squared noise per step and tensor."""
        return np.array(self._squares).reshape(-1, len(self.sizes))

    @property
    def inner(self) -> np.ndarray:
        """(T - 1, K) inner products of consecutive steps' noise per tensor."""
        return np.array(self._inner).reshape(-1, len(self.sizes))

    def sketch(self, k: int) -> np.ndarray:
        """(T, n_k) tensor ``k``'s sketch coordinates at every step."""
        return np.array(self._sketch).reshape(-1, self.sketch_index.size)[:, self.sketch_tensor == k]

    def nbytes(self) -> int:
        """Bytes held (the memory bound of the module docstring)."""
        held = self.steps * (2 * len(self.sizes) * 8 + self.sketch_index.size * 4)
        fixed = (self.coordinate_squares.nbytes + self.coordinate_zero_steps.nbytes + self.cross_z.nbytes
                 + self.cross_steps.nbytes + 3 * 8 * len(self.sizes))
        return held + (0 if self._prev is None else self._prev.nbytes) + fixed


def cosine_tail(r: np.ndarray | float, n: int | np.ndarray) -> np.ndarray:
    """``P(R >= r)`` for the cosine ``R`` of two independent isotropic Gaussian vectors in ``n >= 2``
    dimensions (``R sqrt(n-1) / sqrt(1-R^2) ~ t_{n-1}``; ``n`` may be an array beside ``r``)."""
    r = np.clip(np.asarray(r, dtype=np.float64), -1.0, 1.0)
    dof = np.asarray(n, dtype=np.float64) - 1
    with np.errstate(divide="ignore", invalid="ignore"):
        t = r * np.sqrt(dof) / np.sqrt(np.maximum(1.0 - r * r, 0.0))
    return stats.t.sf(t, dof)


def cosine_z(r: np.ndarray, n: int | np.ndarray) -> np.ndarray:
    """The cosines mapped to exact ``N(0, 1)`` values under independence (:func:`cosine_tail`)."""
    r = np.asarray(r, dtype=np.float64)
    return np.sign(r) * stats.norm.isf(cosine_tail(np.abs(r), n))


def _normal_two_sided(z: float) -> float:
    """The two-sided p-value of a statistic that is exactly ``N(0, 1)`` under the null (Stouffer's sums of the
    cosines' normal scores): the null is symmetric, so twice the tail of ``|z|`` is exact (an infinite ``z``, as
    reused noise gives: 0). Every two-sided test of this module goes through it or :func:`_binomial_two_sided`
    (Binomial(n, 1/2), symmetric too): none doubles the tail of an asymmetric law."""
    return float(min(1.0, 2 * stats.norm.sf(abs(z)))) if np.isfinite(z) else 0.0


def _finding(check: str, problem: bool, message: str, fix: str, details: dict) -> Finding:
    """A finding as the accounting check reports it; every noise finding with a problem is a violation."""
    return Finding(check=check, problem=bool(problem), violation=bool(problem), message=message,
                   fix=fix if problem else "", details=details)


@dataclass(frozen=True)
class NoiseCheck:
    """What :func:`check_noise` returns: the findings, the worst tensor's upper noise multiplier (None
    when no tensor was measured) and the per-tensor summary for results.json."""

    findings: list[Finding]
    sigma_upper: float | None
    summary: dict[str, Any] = field(default_factory=dict)


def _tensor_name(k: int, sizes: tuple[int, ...]) -> str:
    return f"tensor {k} ({sizes[k]} coordinates)"


def _steps_below(count: int, sigma_needed: float, least: float) -> str:
    return f", below {sigma_needed:.4g} at {count} steps (per-step upper limits from {least:.3g})"


def tolerated_sigma(sigma_needed: float) -> float:
    """The noise multiplier at the edge of the level and coverage tests' null: ``sigma_needed (1 - tol)``, ``tol``
    :data:`LEVEL_TOLERANCE` (module docstring, "Tolerance")."""
    return float(sigma_needed) * (1.0 - LEVEL_TOLERANCE)


def zero_probability(dtypes: list[str], sigma: float, clip: float) -> float:
    """A bound on the probability that one coordinate's noise at one step is exactly 0.0 under noise of multiplier at
    least ``sigma`` drawn in one of ``dtypes``: the generator's rate (:data:`ZERO_RATES`) plus the rounding of
    ``N(0, (sigma C)^2)`` to 0 (``|x|`` below half the smallest subnormal: at most ``subnormal phi(0) / (sigma C)``)."""
    scale = float(sigma) * float(clip)
    rates = [ZERO_RATES[d][0] + (ZERO_RATES[d][1] * _PHI0 / scale if scale > 0 else 1.0) for d in dtypes]
    return float(min(1.0, max(rates)))


def _level(rec: NoiseRecorder, clip: float, sigma_needed: float, sigma_floor: float,
           alpha: float) -> tuple[Finding, np.ndarray, list]:
    """The level finding, the per-tensor upper noise multipliers and the per-tensor summaries (``sigma_floor``:
    :func:`tolerated_sigma` of ``sigma_needed``, the edge of the null)."""
    sq, d, steps = rec.squares, np.asarray(rec.sizes, dtype=np.float64), rec.steps
    k = len(rec.sizes)
    a_pool = alpha * ALPHA_SHARES["level-pooled"] / k
    a_step = alpha * ALPHA_SHARES["level-step"] / (k * steps)
    total = sq.sum(axis=0)
    upper = np.sqrt(total / stats.chi2.ppf(a_pool, d * steps)) / clip
    estimate = np.sqrt(total / (d * steps)) / clip
    step_floor = stats.chi2.ppf(a_step, d) * (sigma_floor * clip) ** 2
    below = sq < step_floor[None, :]
    step_upper = np.sqrt(sq / stats.chi2.ppf(a_step, d)[None, :]) / clip
    tensors = []
    for i in range(k):
        kurt = float(rec.fourth[i] * d[i] * steps / total[i] ** 2) if total[i] > 0 else None
        tensors.append({"tensor": i, "coordinates": rec.sizes[i], "estimate": float(estimate[i]),
                        "upper": float(upper[i]), "steps_below": int(below[:, i].sum()),
                        "least_step_upper": float(step_upper[:, i].min()), "kurtosis": kurt})
    low_pool = [i for i in range(k) if upper[i] < sigma_floor]
    low_step = [i for i in range(k) if below[:, i].any()]
    problem = bool(low_pool or low_step)
    if problem:
        worst = int(np.argmin(np.minimum(upper, step_upper.min(axis=0))))
        bad = sorted(set(low_pool) | set(low_step))
        parts = [f"{_tensor_name(i, rec.sizes)}: noise multiplier at most {upper[i]:.3g} over the {steps} steps "
                 f"(estimate {estimate[i]:.3g})" + (_steps_below(int(below[:, i].sum()), sigma_needed,
                                                                 float(step_upper[:, i].min()))
                                                    if below[:, i].any() else "") for i in bad]
        message = (f"The noise is below the multiplier {sigma_needed:.4g} the claim needs (less its tolerance of "
                   f"{LEVEL_TOLERANCE:.2%}: {sigma_floor:.4g}) in {len(bad)} of {k} parameter tensors: "
                   + "; ".join(parts[:4])
                   + ("; ..." if len(parts) > 4 else "") + f" (worst {_tensor_name(worst, rec.sizes)}).")
    else:
        message = (f"Every parameter tensor at every step has noise consistent with a multiplier of at least "
                   f"{sigma_needed:.4g}, less its tolerance of {LEVEL_TOLERANCE:.2%} ({k} tensors, {steps} steps).")
    fix = (f"add N(0, sigma^2 C^2) noise with sigma >= {sigma_needed:.4g} to every coordinate of every parameter "
           f"tensor at every step")
    counts = below.sum(axis=0)
    details = {"noise_multiplier_needed": sigma_needed, "noise_multiplier_tested": sigma_floor,
               "tolerance": LEVEL_TOLERANCE, "tensors_below": sorted(set(low_pool) | set(low_step)),
               # no tensor below at some steps only: a shortfall over the whole training (too many steps for the
               # noise, or too little noise), not a step without its noise
               "uniform_over_steps": bool(np.all((counts == 0) | (counts == steps))),
               "alpha_pooled_per_tensor": a_pool, "alpha_per_tensor_step": a_step}
    return _finding("noise-level", problem, message, fix, details), upper, tensors


def _zero_weight(m: int, steps: int) -> float:
    """The share of the zeros' alpha spent on "``m`` or more zero steps": half on ``m = T`` (every step; all of it
    at ``T = 1``), ``2^-(m+1)`` on each ``m < T`` (module docstring, "Exact zeros")."""
    if m == steps:
        return 1.0 if steps == 1 else 0.5
    return 2.0 ** -(m + 1)


def _cluster_tail(j: np.ndarray | int, mu: np.ndarray | float) -> np.ndarray:
    """A bound on ``P(B >= j)`` for a sum ``B`` of independent Bernoulli variables of total mean at most ``mu``: the
    Poisson tail where ``j >= mu + 1`` (Hoeffding 1956, Thm. 4; Anderson and Samuels 1967), Markov's ``mu / j``
    everywhere (at ``j = 1``: the union bound), 1 at ``j <= 0``."""
    j, mu = np.asarray(j, dtype=np.float64), np.asarray(mu, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        markov = np.where(j > 0, mu / j, 1.0)
    poisson = np.where(j >= mu + 1, stats.poisson.sf(j - 1, mu), 1.0)
    return np.minimum(1.0, np.minimum(markov, poisson))


def _zero_rows(zero_steps: np.ndarray, steps: int, p0: float, alpha: float) -> list[dict]:
    """The zeros test (module docstring, "Exact zeros"): for every ``m`` that some coordinate reaches, ``N_m`` (the
    coordinates with at least ``m`` steps of noise exactly 0), its mean bound ``mu_m = d P(Bin(T, p0) >= m)``, the
    p-value bound :func:`_cluster_tail` at ``ceil(N_m / 2)`` and its level."""
    d = zero_steps.size
    counts = np.bincount(np.minimum(zero_steps, steps), minlength=steps + 1)
    at_least = np.cumsum(counts[::-1])[::-1]
    ms = np.flatnonzero(at_least[1:]) + 1
    if ms.size == 0:
        return []
    mu = d * stats.binom.sf(ms - 1, steps, p0)
    clusters = (at_least[ms] + 1) // 2
    p = _cluster_tail(clusters, mu)
    levels = [alpha * _zero_weight(int(m), steps) for m in ms]
    return [{"zero_steps_at_least": int(m), "coordinates": int(at_least[m]), "mean_bound": float(u), "p": float(q),
             "alpha": a, "rejected": bool(q <= a)} for m, u, q, a in zip(ms, mu, p, levels, strict=True)]


def _fewest_flagged(d: int, steps: int, p0: float, alpha: float) -> int:
    """The fewest coordinates without noise at every step the zeros test flags (module docstring)."""
    mu, level = d * p0 ** steps, alpha * _zero_weight(steps, steps)
    j = 1
    while float(_cluster_tail(j, mu)) > level:
        j += 1
    return 2 * j - 1


def _coverage(rec: NoiseRecorder, clip: float, sigma_needed: float, sigma_floor: float,
              alpha: float) -> Finding:
    """The coverage finding (module docstring): coordinates whose sum of squares over their steps of non-zero noise
    lies below the lower ``alpha/16/d`` quantile of ``(sigma C)^2 chi^2_{T - m}`` (``m`` steps of exactly 0), and
    the count of coordinates with many steps of exactly 0 against what the generator's exact zeros explain."""
    d, steps = int(rec.bounds[-1]), rec.steps
    a_floor = alpha * ALPHA_SHARES["coverage"] / 2
    a_zero = alpha * ALPHA_SHARES["coverage"] - a_floor
    level = a_floor / d
    scale = (sigma_floor * clip) ** 2
    floor = float(stats.chi2.ppf(level, steps)) * scale
    zero_steps = np.minimum(rec.coordinate_zero_steps.astype(np.int64), steps)
    dof = steps - zero_steps
    below = np.zeros(d, dtype=bool)
    for k in np.unique(dof[dof > 0]):
        rows = dof == k
        below[rows] = rec.coordinate_squares[rows] < float(stats.chi2.ppf(level, int(k))) * scale
    p0 = zero_probability(rec.noise_dtypes, sigma_floor, clip)
    rows = _zero_rows(zero_steps, steps, p0, a_zero)
    rejected = [r for r in rows if r["rejected"]]
    least = min((r["zero_steps_at_least"] for r in rejected), default=None)
    zeroed = zero_steps >= least if least is not None else np.zeros(d, dtype=bool)
    bounds = list(zip(rec.bounds[:-1], rec.bounds[1:], strict=True))
    per = [int(np.count_nonzero(below[a:b])) for a, b in bounds]
    zero = [int(np.count_nonzero(zero_steps[a:b] == steps)) for a, b in bounds]
    per_zeroed = [int(np.count_nonzero(zeroed[a:b])) for a, b in bounds]
    fewest = _fewest_flagged(d, steps, p0, a_zero)
    one_step = (f" At one step a coordinate never noised reads as a generator's exact 0.0 (at most {p0:.2g} per draw): "
                f"the test flags {fewest} or more such coordinates here, fewer cannot be told apart." if steps == 1
                else "")
    parts = []
    for i in [i for i in range(len(per)) if per[i] or per_zeroed[i]][:4]:
        what = []
        if per_zeroed[i]:
            first = int(np.flatnonzero(zeroed[rec.bounds[i]:rec.bounds[i + 1]])[0])
            what.append(f"{per_zeroed[i]} coordinates with noise exactly 0 at {least} or more of the {steps} steps "
                        f"({zero[i]} at every step, e.g. coordinate {first})")
        if per[i]:
            first = int(np.flatnonzero(below[rec.bounds[i]:rec.bounds[i + 1]])[0])
            what.append(f"{per[i]} coordinates with too little noise (e.g. coordinate {first})")
        parts.append(f"{_tensor_name(i, rec.sizes)}: " + ", ".join(what))
    bad = bool(rejected) or bool(below.any())
    if bad:
        explained = (f" A float32 generator's exact zeros (at most {p0:.2g} per draw) explain at most "
                     f"{rejected[0]['mean_bound']:.2g} coordinates with {least} or more such steps on average."
                     if rejected else "")
        message = (f"{int(below.sum()) + int(zeroed.sum())} of {d} coordinates get less noise over the {steps} steps "
                   f"than a multiplier of {sigma_needed:.4g} allows: " + "; ".join(parts)
                   + ("; ..." if sum(1 for i in range(len(per)) if per[i] or per_zeroed[i]) > 4 else "") + "."
                   + explained + " A coordinate without noise releases its gradient sum exactly: its epsilon is "
                   "infinite." + one_step)
    else:
        zeros = int(np.count_nonzero(zero_steps))
        message = (f"Every one of the {d} coordinates gets noise at every step, as the claim needs"
                   + (f" ({zeros} readings of exactly 0.0, as many as a generator's exact zeros explain)" if zeros
                      else "") + "." + one_step)
    details = {"coordinates_below": per, "coordinates_without_noise": zero, "coordinates_zeroed": per_zeroed,
               "zeros_beyond_chance": bool(rejected), "floor": floor, "alpha_per_coordinate": level,
               "zero_rate": p0, "noise_dtypes": rec.noise_dtypes, "alpha_zeros": a_zero, "zero_tests": rows[:32],
               "fewest_flagged": fewest}
    return _finding("noise-coverage", bad, message,
                    f"add noise to every coordinate of every parameter tensor (sigma >= {sigma_needed:.4g}): "
                    "draw it with the full shape of each gradient, never a slice of it", details)


def _cross_tensor(rec: NoiseRecorder, alpha: float) -> Finding:
    """The cross-tensor finding: per pair of tensors, Stouffer's ``Z`` of their prefixes' cosines over the
    steps, two-sided, each pair at ``alpha/8/P`` (module docstring)."""
    tested = rec.cross_steps > 0
    pairs = int(np.count_nonzero(tested))
    level = alpha * ALPHA_SHARES["cross-tensor"] / max(pairs, 1)
    rows = []
    for i, j in zip(*np.nonzero(tested), strict=True):
        z = float(rec.cross_z[i, j] / math.sqrt(rec.cross_steps[i, j]))
        p = _normal_two_sided(z)
        rows.append({"tensors": [int(i), int(j)], "coordinates": int(rec.prefix_lengths[i, j]), "z": z, "p": p,
                     "rejected": p <= level})
    bad = [r for r in rows if r["rejected"]]
    if bad:
        parts = [f"{_tensor_name(r['tensors'][0], rec.sizes)} and {_tensor_name(r['tensors'][1], rec.sizes)} "
                 f"(first {r['coordinates']} coordinates, Z = {r['z']:.3g})" for r in bad[:4]]
        message = ("The noise of different parameter tensors in one step is the same noise: " + "; ".join(parts)
                   + ("; ..." if len(bad) > 4 else "") + ". DP-SGD adds independent noise to every coordinate; "
                   "noise shared between tensors cancels between them and adds no privacy.")
    else:
        message = f"The noise of different parameter tensors is uncorrelated ({pairs} pairs of tensors)."
    return _finding("noise-cross-tensor", bool(bad), message,
                    "draw each tensor's noise separately from one generator that is not re-seeded between tensors "
                    "(never copy one tensor's noise, or the start of a noise buffer, into another)",
                    {"pairs": rows, "alpha_per_pair": level})


def _gram_max(a: np.ndarray, b: np.ndarray | None) -> tuple[float, int, int]:
    """Largest ``|cosine|`` between rows of ``a`` and rows of ``b`` (``b`` None: pairs of distinct rows of
    ``a``, i < j), with its pair; rows of zero norm are left out (cosine 0)."""
    def unit(m: np.ndarray) -> np.ndarray:
        n = np.linalg.norm(m, axis=1, keepdims=True)
        return np.divide(m, n, out=np.zeros_like(m), where=n > 0)

    ua = unit(a.astype(np.float64)).astype(np.float32)
    ub = ua if b is None else unit(b.astype(np.float64)).astype(np.float32)
    best, pair = -1.0, None
    for start in range(0, ua.shape[0], _CHUNK):
        g = np.abs(ua[start:start + _CHUNK] @ ub.T)
        if b is None:
            rows = np.arange(start, start + g.shape[0])[:, None]
            g[np.arange(ub.shape[0])[None, :] <= rows] = -1.0  # each pair once, never a row with itself
        if g.size and g.max() > best:
            i, j = np.unravel_index(int(np.argmax(g)), g.shape)
            best, pair = float(g[i, j]), (int(start + i), int(j))
    if pair is None:
        return 0.0, 0, 0
    i, j = pair
    other = a if b is None else b
    x, y = a[i].astype(np.float64), other[j].astype(np.float64)
    norms = np.linalg.norm(x) * np.linalg.norm(y)
    exact = abs(float(x @ y) / norms) if norms > 0 else 0.0
    return max(exact, 0.0), i, j


def _consecutive(rec: NoiseRecorder, alpha: float) -> tuple[list[dict], list[int]]:
    """Per tensor: Stouffer's ``Z`` of the consecutive steps' cosines, its two-sided p-value and whether it
    is rejected at ``alpha/6/K`` (tensors of one coordinate, or with a step of no noise, are not tested)."""
    sq, inner, k = rec.squares, rec.inner, len(rec.sizes)
    level = alpha * ALPHA_SHARES["consecutive"] / k
    rows, rejected = [], []
    for i in range(k):
        d = rec.sizes[i]
        if d < 2 or rec.steps < 2 or np.any(sq[:, i] <= 0):
            rows.append({"tensor": i, "tested": False})
            continue
        r = inner[:, i] / np.sqrt(sq[:-1, i] * sq[1:, i])
        z = cosine_z(r, d)
        stat = float(np.sum(z) / math.sqrt(z.size))
        p = _normal_two_sided(stat)
        rows.append({"tensor": i, "tested": True, "z": stat, "p": p, "largest_cosine": float(np.max(np.abs(r)))})
        if p <= level:
            rejected.append(i)
    return rows, rejected


def _pairs_test(a: np.ndarray, b: np.ndarray | None, level: float) -> dict[str, Any]:
    """The largest ``|cosine|`` over every pair of sketch rows (within ``a``, or across ``a`` and ``b``),
    its union-bound p-value (pairs x two-sided :func:`cosine_tail`) and the rejection at ``level``."""
    n = a.shape[1]
    pairs = a.shape[0] * (a.shape[0] - 1) // 2 if b is None else a.shape[0] * b.shape[0]
    if n < 2 or pairs == 0:
        return {"tested": False}
    r, i, j = _gram_max(a, b)
    p = float(min(1.0, pairs * 2 * float(cosine_tail(r, n))))
    return {"tested": True, "largest_cosine": r, "steps": [i, j], "pairs": int(pairs), "p": p, "rejected": p <= level}


def _independence(rec: NoiseRecorder, alpha: float) -> Finding:
    """The independence finding: consecutive steps (full vectors) and any two steps (sketch)."""
    k = len(rec.sizes)
    consecutive, rejected = _consecutive(rec, alpha)
    repeat_level = alpha * ALPHA_SHARES["repeat"] / k
    repeats = [_pairs_test(rec.sketch(i), None, repeat_level) | {"tensor": i} for i in range(k)]
    repeated = [r["tensor"] for r in repeats if r.get("rejected")]
    bad = sorted(set(rejected) | set(repeated))
    if bad:
        parts = []
        for i in bad[:4]:
            c, rep = consecutive[i], repeats[i]
            what = (f"consecutive steps' noise correlated (Z = {c['z']:.3g}, largest cosine "
                    f"{c['largest_cosine']:.4f})" if i in rejected else
                    f"the noise of steps {rep['steps'][0]} and {rep['steps'][1]} has cosine "
                    f"{rep['largest_cosine']:.4f}")
            parts.append(f"{_tensor_name(i, rec.sizes)}: {what}")
        message = ("The noise is not drawn afresh at every step: " + "; ".join(parts)
                   + ("; ..." if len(bad) > 4 else "")
                   + ". DP-SGD's accountant assumes independent noise at every step; reused noise adds no privacy.")
    else:
        message = f"The noise of different steps is uncorrelated ({k} tensors, {rec.steps} steps)."
    details = {"consecutive": consecutive, "repeat": repeats, "alpha_consecutive_per_tensor":
               alpha * ALPHA_SHARES["consecutive"] / k, "alpha_repeat_per_tensor": repeat_level}
    return _finding("noise-independence", bool(bad), message,
                    "draw new noise at every step (never store a noise tensor and add it again)", details)


def _binomial_two_sided(low: int, n: int) -> float:
    """Exact two-sided p-value of ``low`` successes in ``n`` Binomial(n, 1/2) trials (twice the smaller tail)."""
    if n == 0:
        return 1.0
    return float(min(1.0, 2 * min(stats.binom.cdf(low, n, 0.5), stats.binom.sf(low - 1, n, 0.5))))


def _distribution(rec: NoiseRecorder, alpha: float, independent: bool) -> Finding:
    """The distribution finding: the folded pair angles below pi/8, pooled over the tensors and per tensor
    (not tested when the coordinates are not ``independent`` draws of one law -- repeated across steps or
    tensors, or some never noised, whose pairs fall below pi/8 every time: the counts are then not binomial)."""
    if not independent:
        return _finding("noise-distribution", False, "The noise's distribution was not tested: its coordinates are "
                        "not independent draws (coordinates without noise, noise-independence or noise-cross-tensor).",
                        "",
                        {"tested": False})
    k, share = len(rec.sizes), alpha * ALPHA_SHARES["distribution"]
    pooled_p = _binomial_two_sided(int(rec.pairs_low.sum()), int(rec.pairs.sum()))
    per = [{"tensor": i, "pairs": int(rec.pairs[i]),
            "fraction_below": float(rec.pairs_low[i] / rec.pairs[i]) if rec.pairs[i] else None,
            "p": _binomial_two_sided(int(rec.pairs_low[i]), int(rec.pairs[i]))} for i in range(k)]
    bad = [r["tensor"] for r in per if r["p"] <= share / 2 / k]
    pooled_frac = float(rec.pairs_low.sum() / rec.pairs.sum()) if rec.pairs.sum() else None
    problem = pooled_p <= share / 2 or bool(bad)
    if problem:
        frac = pooled_frac if pooled_p <= share / 2 else per[bad[0]]["fraction_below"]
        shape = ("heavier-tailed than Gaussian (Laplace-like)" if frac > 0.5 else
                 "lighter-tailed than Gaussian (uniform-like)")
        where = ("every tensor pooled" if pooled_p <= share / 2 else
                 ", ".join(_tensor_name(i, rec.sizes) for i in bad[:4]))
        message = (f"The noise is not Gaussian ({where}): {frac:.3f} of the coordinate pairs have a folded angle below "
                   f"pi/8, where Gaussian noise gives 1/2 (Laplace 0.586, uniform 0.414): {shape}. The accountant's "
                   f"epsilon holds for Gaussian noise only; any other noise of the claimed variance is less private.")
    else:
        message = f"The noise is consistent with Gaussian noise ({int(rec.pairs.sum())} coordinate pairs)."
    details = {"pooled": {"pairs": int(rec.pairs.sum()), "fraction_below": pooled_frac, "p": pooled_p},
               "tensors": per, "alpha_pooled": share / 2, "alpha_per_tensor": share / 2 / k}
    return _finding("noise-distribution", problem, message,
                    "draw the noise from a Gaussian (torch.randn / torch.normal times sigma C)", details)


def _seed(rec: NoiseRecorder, other: NoiseRecorder | None, alpha: float) -> Finding | None:
    """The seed finding: every pair of steps across two runs from different seeds (None when not comparable)."""
    if other is None or other.sizes != rec.sizes or other.steps == 0:
        return None
    k = len(rec.sizes)
    level = alpha * ALPHA_SHARES["seed"] / k
    tests = [_pairs_test(rec.sketch(i), other.sketch(i), level) | {"tensor": i} for i in range(k)]
    bad = [t["tensor"] for t in tests if t.get("rejected")]
    if bad:
        t = tests[bad[0]]
        message = (f"The noise does not change with the seed: in {len(bad)} of {k} tensors the noise of a run from "
                   f"another seed repeats this run's (e.g. {_tensor_name(bad[0], rec.sizes)}: step {t['steps'][0]} and "
                   f"the other run's step {t['steps'][1]}, cosine {t['largest_cosine']:.4f}); the generator is "
                   f"seeded by a constant, so anyone who knows the code knows the noise.")
    else:
        message = f"The noise changes with the seed ({k} tensors; runs of {rec.steps} and {other.steps} steps)."
    return _finding("noise-seed", bool(bad), message,
                    "seed the noise generator from the seed train receives (or a secure random source), never a "
                    "constant", {"tensors": tests, "alpha_per_tensor": level})


def check_noise(rec: NoiseRecorder, other: NoiseRecorder | None, clip: float, sigma_needed: float,
                alpha: float) -> NoiseCheck:
    """Every test of the module docstring on the noise of one run (``rec``) and, for the seed test, a run
    from another seed (``other``, or None); ``sigma_needed``: the noise multiplier the claim needs at the
    code's rate and steps; ``alpha``: the family's error rate, split by :data:`ALPHA_SHARES`."""
    if rec.steps == 0:
        return NoiseCheck([], None, {})
    sigma_floor = tolerated_sigma(sigma_needed)
    level, upper, tensors = _level(rec, clip, sigma_needed, sigma_floor, alpha)
    coverage, independence, cross = (_coverage(rec, clip, sigma_needed, sigma_floor, alpha),
                                     _independence(rec, alpha), _cross_tensor(rec, alpha))
    never_noised = coverage.details["zeros_beyond_chance"]
    findings = [level, coverage, independence, cross,
                _distribution(rec, alpha, not (never_noised or independence.problem or cross.problem))]
    seed = _seed(rec, other, alpha)
    if seed is not None:
        findings.append(seed)
    worst = int(np.argmin(upper))
    total = float(rec.squares.sum())
    n = int(sum(rec.sizes) * rec.steps)
    summary = {"estimate": math.sqrt(total / n) / clip, "upper": float(upper[worst]), "worst_tensor": worst,
               "coordinates_x_steps": n, "steps": rec.steps, "tensors": tensors, "alpha": alpha,
               "alpha_split": dict(ALPHA_SHARES), "memory_bytes": rec.nbytes(),
               "tests": {f.check: ("violation" if f.violation else "ok") for f in findings}}
    return NoiseCheck(findings, float(upper[worst]), summary)
