"""The noise a DP-SGD loop adds, measured where mistakes hide: per parameter tensor and per step, across
steps, in its shape, and across seeds (docs/references.md, "Configuration checks").

DP-SGD's accountant [Abadi et al. 2016, Alg. 1] assumes that every step adds fresh noise ``N(0, sigma^2
C^2 I)`` to the clipped sum, on every coordinate. :class:`NoiseRecorder` keeps, for each step the code
takes, sufficient statistics of the noise it added (the noisy sum minus the clipped sum, per parameter
tensor) in memory that does not grow with the parameter count; :func:`check_noise` tests them:

* **level** (violation): per tensor pooled over the steps, ``S_k / (sigma_0 C)^2 ~ chi^2_{d_k T}`` when the
  noise multiplier is ``sigma_0`` (larger noise is stochastically larger), and per tensor and step
  ``S_{k,t} / (sigma_0 C)^2 ~ chi^2_{d_k}``; a sum below its lower ``alpha`` quantile is noise below the
  ``sigma_0`` the claim needs. The pooled test is the one-sided upper confidence limit
  ``sigma_k^+ = sqrt(S_k / chi^2_{d_k T}(a)) / C`` compared with ``sigma_0``; the smallest ``sigma_k^+``
  (the least noisy tensor) is the noise multiplier the configuration's epsilon is computed with.
* **coverage** (violation): per coordinate ``i`` over the steps, ``S_i / (sigma_0 C)^2`` is stochastically
  larger than ``chi^2_T`` (each step adds ``N(0, sigma_t^2 C^2)`` with ``sigma_t >= sigma_0``); a coordinate
  whose sum lies below the lower ``alpha / d`` quantile (union bound over the ``d`` coordinates of the
  model) gets less noise than the claim needs. A coordinate that never gets noise (an input column of a
  weight skipped, a slice left out) sums to exactly 0 and is caught at any ``T``, however small its
  share of its tensor: the pooled level of its tensor barely moves, but its epsilon is infinite.
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

**Alpha split** (Bonferroni). The ``alpha`` the caller gives is split in eight equal shares
(:data:`ALPHA_SHARES`): the pooled level per tensor (``alpha/8/K`` each, ``K`` tensors), the per-step
level (``alpha/8/(K T)`` each), the coverage (``alpha/8/d`` per coordinate), the consecutive-steps test
(``alpha/8/K`` per tensor), the any-lag repeat test (``alpha/8/K`` per tensor, its largest ``|r|``
union-bounded over the pairs), the cross-tensor test (``alpha/8/P`` per pair of tensors, ``P`` pairs), the
distribution (``alpha/16`` pooled over every tensor and ``alpha/16/K`` per tensor) and the seed test
(``alpha/8/K`` per tensor, union over the pairs). A correct loop (Gaussian noise of multiplier at least
``sigma_0``, fresh, independent across tensors and of the seed) is flagged with probability at most
``alpha``.

**Memory** per run: ``K`` floats per step (sums of squares) and ``K`` per step (consecutive inner
products), the sketch (``min(d_k, max(4, 256 // K))`` coordinates per tensor, float32 per step: at most
``4 max(256, 4 K)`` bytes a step), the previous step's noise and the per-coordinate sums of squares
(``2 d`` floats), ``3 K`` counters and ``2 K^2`` for the cross-tensor sums: 5,000 steps of a 62-tensor model
of 10^6 parameters hold about 26 MB (10 MB of per-step statistics, 16 MB the two ``d``-vectors), whatever
``d``; :meth:`NoiseRecorder.nbytes`. Time: a few passes over the noise per step (about 30 ms for 10^6
parameters on a loaded 2-core machine) and one ``K x K`` product of prefixes of at most
:data:`CROSS_PREFIX` coordinates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from audit.stats.outcome import Finding

__all__ = ["NoiseRecorder", "NoiseCheck", "check_noise", "ALPHA_SHARES", "SKETCH_TOTAL", "SHAPE_PAIRS", "cosine_z",
           "cosine_tail", "CROSS_PREFIX"]

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
    ``coordinate_squares`` (sum of squares), per pair of tensors ``cross_z`` and ``cross_steps`` (the sum of
    the normal scores of their prefixes' cosines, and the steps it sums)."""

    def __init__(self, sizes: tuple[int, ...]) -> None:
        self.sizes = tuple(int(s) for s in sizes)
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
        self.prefix_lengths = (np.minimum(np.minimum.outer(self.sizes, self.sizes), CROSS_PREFIX) if k
                               else np.zeros((0, 0), dtype=np.int64))
        self.cross_z = np.zeros((k, k))
        self.cross_steps = np.zeros((k, k), dtype=np.int64)

    def add(self, noise: np.ndarray) -> None:
        """Record one step's noise (flat, float64, the tensors concatenated)."""
        noise = np.asarray(noise, dtype=np.float64).reshape(-1)
        if noise.size != self.bounds[-1]:
            raise ValueError(f"a step's noise has {noise.size} coordinates; the recorder expects {self.bounds[-1]}")
        parts = [noise[a:b] for a, b in zip(self.bounds[:-1], self.bounds[1:], strict=True)]
        flat_squares = noise * noise
        self.coordinate_squares += flat_squares
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
        fixed = self.coordinate_squares.nbytes + self.cross_z.nbytes + self.cross_steps.nbytes + 3 * 8 * len(self.sizes)
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


def _level(rec: NoiseRecorder, clip: float, sigma_needed: float, alpha: float) -> tuple[Finding, np.ndarray, list]:
    """The level finding, the per-tensor upper noise multipliers and the per-tensor summaries."""
    sq, d, steps = rec.squares, np.asarray(rec.sizes, dtype=np.float64), rec.steps
    k = len(rec.sizes)
    a_pool = alpha * ALPHA_SHARES["level-pooled"] / k
    a_step = alpha * ALPHA_SHARES["level-step"] / (k * steps)
    total = sq.sum(axis=0)
    upper = np.sqrt(total / stats.chi2.ppf(a_pool, d * steps)) / clip
    estimate = np.sqrt(total / (d * steps)) / clip
    step_floor = stats.chi2.ppf(a_step, d) * (sigma_needed * clip) ** 2
    below = sq < step_floor[None, :]
    step_upper = np.sqrt(sq / stats.chi2.ppf(a_step, d)[None, :]) / clip
    tensors = []
    for i in range(k):
        kurt = float(rec.fourth[i] * d[i] * steps / total[i] ** 2) if total[i] > 0 else None
        tensors.append({"tensor": i, "coordinates": rec.sizes[i], "estimate": float(estimate[i]),
                        "upper": float(upper[i]), "steps_below": int(below[:, i].sum()),
                        "least_step_upper": float(step_upper[:, i].min()), "kurtosis": kurt})
    low_pool = [i for i in range(k) if upper[i] < sigma_needed]
    low_step = [i for i in range(k) if below[:, i].any()]
    problem = bool(low_pool or low_step)
    if problem:
        worst = int(np.argmin(np.minimum(upper, step_upper.min(axis=0))))
        bad = sorted(set(low_pool) | set(low_step))
        parts = [f"{_tensor_name(i, rec.sizes)}: noise multiplier at most {upper[i]:.3g} over the {steps} steps "
                 f"(estimate {estimate[i]:.3g})" + (_steps_below(int(below[:, i].sum()), sigma_needed,
                                                                 float(step_upper[:, i].min()))
                                                    if below[:, i].any() else "") for i in bad]
        message = (f"The noise is below the multiplier {sigma_needed:.4g} the claim needs in "
                   f"{len(bad)} of {k} parameter tensors: " + "; ".join(parts[:4])
                   + ("; ..." if len(parts) > 4 else "") + f" (worst {_tensor_name(worst, rec.sizes)}).")
    else:
        message = (f"Every parameter tensor at every step has noise consistent with a multiplier of at least "
                   f"{sigma_needed:.4g} ({k} tensors, {steps} steps).")
    fix = (f"add N(0, sigma^2 C^2) noise with sigma >= {sigma_needed:.4g} to every coordinate of every parameter "
           f"tensor at every step")
    details = {"noise_multiplier_needed": sigma_needed, "tensors_below": sorted(set(low_pool) | set(low_step)),
               "alpha_pooled_per_tensor": a_pool, "alpha_per_tensor_step": a_step}
    return _finding("noise-level", problem, message, fix, details), upper, tensors


def _coverage(rec: NoiseRecorder, clip: float, sigma_needed: float, alpha: float) -> Finding:
    """The coverage finding: coordinates whose sum of squares over the steps lies below the lower
    ``alpha/8/d`` quantile of ``(sigma_0 C)^2 chi^2_T`` (module docstring)."""
    d = int(rec.bounds[-1])
    level = alpha * ALPHA_SHARES["coverage"] / d
    floor = float(stats.chi2.ppf(level, rec.steps)) * (sigma_needed * clip) ** 2
    below = rec.coordinate_squares < floor
    per = [int(np.count_nonzero(below[a:b])) for a, b in zip(rec.bounds[:-1], rec.bounds[1:], strict=True)]
    zero = [int(np.count_nonzero(rec.coordinate_squares[a:b] == 0))
            for a, b in zip(rec.bounds[:-1], rec.bounds[1:], strict=True)]
    bad = [i for i, c in enumerate(per) if c]
    if bad:
        parts = [f"{_tensor_name(i, rec.sizes)}: {per[i]} coordinates ({zero[i]} with no noise at all, e.g. "
                 f"coordinate {int(np.flatnonzero(below[rec.bounds[i]:rec.bounds[i + 1]])[0])})" for i in bad[:4]]
        message = (f"{sum(per)} of {d} coordinates get less noise over the {rec.steps} steps than a multiplier of "
                   f"{sigma_needed:.4g} allows: " + "; ".join(parts) + ("; ..." if len(bad) > 4 else "")
                   + ". A coordinate without noise releases its gradient sum exactly: its epsilon is infinite.")
    else:
        message = f"Every one of the {d} coordinates gets noise at every step, as the claim needs."
    details = {"coordinates_below": per, "coordinates_without_noise": zero, "floor": floor,
               "alpha_per_coordinate": level}
    return _finding("noise-coverage", bool(bad), message,
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
        p = float(min(1.0, 2 * stats.norm.sf(abs(z)))) if np.isfinite(z) else 0.0
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
        p = float(min(1.0, 2 * stats.norm.sf(abs(stat)))) if np.isfinite(stat) else 0.0
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
    level, upper, tensors = _level(rec, clip, sigma_needed, alpha)
    coverage, independence, cross = (_coverage(rec, clip, sigma_needed, alpha), _independence(rec, alpha),
                                      _cross_tensor(rec, alpha))
    never_noised = bool(np.any(rec.coordinate_squares == 0))
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
