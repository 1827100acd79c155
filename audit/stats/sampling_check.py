"""Which sampling a training used, from the record indices it drew at each step.

DP-SGD's accounting assumes Poisson sampling: every record joins every step by its own coin with
rate q [Abadi et al. 2016, Alg. 1]. Shuffled fixed-size batches (every record exactly once per
epoch) accounted as Poisson understate epsilon [Chua et al. 2024]. Under Poisson sampling with n
records and T steps the n T indicators "record i is in step t" are i.i.d. Bernoulli(q), so **given
their total** ``S = sum_t B_t`` the set of (record, step) pairs drawn is a uniformly random S-subset of
the n x T grid, whatever q (S is sufficient for q: Lehmann & Romano 2005, Sec. 4.4, the conditional
test of a composite null). That law is exact and parameter-free:

* the batch sizes ``(B_1, ..., B_T)`` are multivariate hypergeometric (T urns of n cells, S drawn);
* the per-record counts ``(c_1, ..., c_n)`` are multivariate hypergeometric (n urns of T cells, S drawn).

Shuffling makes the counts (nearly) equal to the number of epochs, fixed-size batches make the sizes
constant: both are under-dispersion, seen in the statistics ``sum_t B_t^2`` and ``sum_i c_i^2``
(equivalently the dispersions ``D_B`` and ``D_c``, since S is fixed) against their conditional laws,
each in both tails (over-dispersion: batches that repeat, sizes that drift). The p-values are exact
at T = 2 (the batch sizes: ``B_1 ~ Hypergeom(2n, n, S)``; the counts: ``m_2`` records in both steps and
``S - 2 m_2`` in one have probability ``C(n, m_2) C(n - m_2, S - 2 m_2) 2^(S - 2 m_2) / C(2n, S)``), and
from B draws of the conditional law otherwise, as ``(1 + #{draws at least as extreme}) / (B + 1)``,
a valid p-value for any B (Davison & Hinkley 1997, Sec. 4.2.5; Phipson & Smyth 2010), with ties
counted as extreme. ``B = MC_PER_LEVEL / significance``, so the smallest p-value is a tenth of the
significance. Each draw is i.i.d. binomial counts brought to the total S by removing (or adding)
uniformly random cells, which is exact (:func:`conditional_counts`): about ``B (n + T)`` binomial
variates, 0.3 s at n 300, T 20 and the accounting check's 2,400 draws, about 12 s at n 60,000, T 500.
The generator is seeded by the caller's ``seed`` (independent of the records drawn), so the test is
deterministic and, over seeds, rejects a Poisson loop with probability at most its
significance per tail at every n, T >= 2 and q: the chi-square laws of the index of dispersion
(Cochran 1954) that this test replaces are large-sample approximations that fail on the lattice of
two steps (two equal Poisson batches read as fixed-size with probability ``sum_k Bin(n, q; k)^2``).

The rate itself is a second question: a loop may sample by Poisson coins at a rate other than the
one it declares (and the accountant uses). Under Poisson sampling at the declared q the total number
of records over the T steps is Bin(n T, q); :func:`rate_test` is the exact two-sided binomial test
of that count (Clopper & Pearson 1934; scipy's ``binomtest``), so a correct loop is flagged with
probability at most its ``alpha``.

Sources: docs/references.md, "Configuration checks".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import special, stats

from audit.errors import UserError

__all__ = ["SAMPLING_VERDICTS", "SamplingEvidence", "sampling_from_batches", "rate_test", "MC_PER_LEVEL",
           "conditional_counts", "COUNT_METHOD_CELLS"]

SAMPLING_VERDICTS = ("poisson", "shuffled", "fixed-size", "full-batch", "other", "inconclusive")
#: Draws of the conditional law per unit of ``1 / significance`` (module docstring).
MC_PER_LEVEL = 10
#: Cells (draws x urns) of the conditional law drawn at once (memory: 8 bytes each).
_CHUNK_CELLS = 1 << 21
#: Grids of at most this many cells are drawn by numpy's "count" method (about 8 ns a cell, vectorised), larger
#: ones by :func:`conditional_counts`'s binomial draws brought to the total (about 30 us a draw plus 15 ns an urn).
COUNT_METHOD_CELLS = 4096

_MESSAGES = {
    "poisson": "The batches are consistent with Poisson sampling (batch sizes and per-record counts vary "
               "as independent coins make them vary), as DP-SGD's accounting assumes.",
    "shuffled": "The batches look shuffled: records appear far more evenly than independent sampling allows "
                "(about once per epoch); accounting this as Poisson sampling understates epsilon (Chua et al. "
                "2024): sample each record by its own coin with rate q (e.g. Opacus poisson_sampling=True) "
                "or account for shuffling.",
    "fixed-size": "The batches have a fixed size rather than a binomial one: this is not Poisson sampling, "
                  "which the accounting assumes; sample each record by its own coin with rate q.",
    "full-batch": "Every step used every record (full batch): account it with sampling rate 1.",
    "other": "The batches are not consistent with Poisson sampling (over-dispersed batch sizes or record counts, "
             "or a record twice in one batch); the accounting's sampling assumption does not hold.",
    "inconclusive": "Too few steps or records to tell the sampling apart (need at least 2 steps and some records).",
}


@dataclass(frozen=True, kw_only=True)
class SamplingEvidence:
    """The sampling verdict and the statistics behind it.

    ``batch_dispersion`` and ``record_dispersion`` are D_B/(T-1) and D_c/(n-1) (the binomial indices of
    dispersion, ``q`` estimated): about 1 under Poisson sampling, near 0 for constant batch sizes /
    once-per-epoch records. ``*_p_low`` / ``*_p_high`` are the p-values of under- and over-dispersion
    against the law given the total (module docstring): exact at T = 2, else from ``draws`` draws.
    """

    verdict: str
    message: str
    steps: int
    dataset_size: int
    rate: float
    batch_size_mean: float
    batch_size_sd: float
    batch_dispersion: float
    batch_p_low: float
    batch_p_high: float
    record_dispersion: float
    record_p_low: float
    record_p_high: float
    duplicates: int
    significance: float
    draws: int

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        law = "exact" if self.draws == 0 else f"{self.draws} draws of"
        d["rule"] = (f"two-sided dispersion tests of the batch sizes and record counts against their law given the "
                     f"total ({law} the conditional law) at {self.significance:g} per tail: any over-dispersion or "
                     "duplicate -> other; record counts under-dispersed -> shuffled; batch sizes under-dispersed -> "
                     "fixed-size; neither -> poisson")
        return d


def _exact_batch_p(sizes: np.ndarray, n: int, total: int) -> tuple[float, float]:
    """(P[stat <= obs], P[stat >= obs]) of ``B_1^2 + B_2^2`` at T = 2, ``B_1 ~ Hypergeom(2n, n, S)``."""
    support = np.arange(max(0, total - n), min(n, total) + 1)
    pmf = stats.hypergeom.pmf(support, 2 * n, n, total)
    stat, obs = support**2 + (total - support) ** 2, int(np.sum(sizes.astype(np.int64) ** 2))
    return float(min(1.0, pmf[stat <= obs].sum())), float(min(1.0, pmf[stat >= obs].sum()))


def _exact_record_p(counts: np.ndarray, n: int, total: int) -> tuple[float, float]:
    """The same for ``sum_i c_i^2 = S + 2 m_2`` at T = 2 (module docstring: the law of ``m_2``)."""
    m2 = np.arange(max(0, total - n), total // 2 + 1)
    m1 = total - 2 * m2
    logw = (special.gammaln(n + 1) - special.gammaln(m2 + 1) - special.gammaln(m1 + 1)
            - special.gammaln(n - m2 - m1 + 1) + m1 * math.log(2.0))
    pmf = np.exp(logw - special.logsumexp(logw))
    obs = int(np.count_nonzero(counts == 2))
    return float(min(1.0, pmf[m2 <= obs].sum())), float(min(1.0, pmf[m2 >= obs].sum()))


def _move(counts: np.ndarray, room: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Per urn, how many of ``k`` cells drawn uniformly without replacement from the ``room.sum()`` cells
    (``room[i]`` in urn i) fall in each urn."""
    picked = rng.choice(int(room.sum()), size=k, replace=False)
    return np.bincount(np.searchsorted(np.cumsum(room), picked, side="right"), minlength=counts.size)


def conditional_counts(urns: int, cells: int, total: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` draws of the occupancy counts of ``urns`` urns of ``cells`` cells each when a uniformly random
    ``total``-subset of the cells is drawn (multivariate hypergeometric): i.i.d. Bernoulli(p) cells given their
    total S' are a uniform S'-subset, and a uniform subset of it (or of its complement) of the right size is a
    uniform ``total``-subset, so each draw is i.i.d. Bin(cells, total / (urns cells)) counts with the difference
    to ``total`` removed from (or added to) uniformly random occupied (empty) cells. Exact, and about ten times
    faster than one hypergeometric variate per urn. Grids of at most :data:`COUNT_METHOD_CELLS` cells: numpy's
    multivariate hypergeometric ("count" method), also exact."""
    if urns * cells <= COUNT_METHOD_CELLS:
        return rng.multivariate_hypergeometric(np.full(urns, cells, dtype=np.int64), total, size=size,
                                               method="count")
    out = rng.binomial(cells, total / (urns * cells), size=(size, urns)).astype(np.int64)
    for row in out:
        extra = int(row.sum()) - total
        if extra > 0:
            row -= _move(row, row, extra, rng)
        elif extra < 0:
            row += _move(row, cells - row, -extra, rng)
    return out


def _mc_p(observed: int, urns: int, cells: int, total: int, draws: int,
          rng: np.random.Generator) -> tuple[float, float]:
    """Monte-Carlo p-values ``(1 + #{sim <= obs}) / (B + 1)``, ``(1 + #{sim >= obs}) / (B + 1)`` of the sum of
    squares of ``urns`` multivariate hypergeometric counts (``cells`` per urn, ``total`` drawn)."""
    low = high = 0
    per = max(1, _CHUNK_CELLS // urns)
    for start in range(0, draws, per):
        sims = conditional_counts(urns, cells, total, min(per, draws - start), rng)
        sq = np.einsum("ij,ij->i", sims, sims)
        low += int(np.count_nonzero(sq <= observed))
        high += int(np.count_nonzero(sq >= observed))
    return (1 + low) / (draws + 1), (1 + high) / (draws + 1)


def _p_values(sizes: np.ndarray, counts: np.ndarray, n: int, significance: float,
              seed: int) -> tuple[tuple[float, float], tuple[float, float], int]:
    """The two tails of the batch-size and record-count tests, and the draws used (0: exact)."""
    steps, total = sizes.size, int(sizes.sum())
    if steps == 2:
        return _exact_batch_p(sizes, n, total), _exact_record_p(counts, n, total), 0
    draws = int(math.ceil(MC_PER_LEVEL / significance))
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x5A4D]))
    batch = _mc_p(int(np.sum(sizes**2)), steps, n, total, draws, rng)
    record = _mc_p(int(np.sum(counts**2)), n, steps, total, draws, rng)
    return batch, record, draws


def _verdict(batch: tuple[float, float], record: tuple[float, float], duplicates: int, alpha: float) -> str:
    if duplicates or batch[1] < alpha or record[1] < alpha:
        return "other"
    if record[0] < alpha:
        return "shuffled"
    if batch[0] < alpha:
        return "fixed-size"
    return "poisson"


def sampling_from_batches(batch_index_lists: Sequence[ArrayLike], n: int, *, significance: float = 1e-3,
                          seed: int = 0) -> SamplingEvidence:
    """Whether the batches a training drew look Poisson, shuffled or fixed-size.

    ``batch_index_lists[t]`` are the record indices (0..n-1) of step t. Rule, with the dispersion tests
    of the module docstring (the law given the total) at ``significance`` per tail (four tails, so
    Poisson sampling is misread with probability at most 4 x ``significance``, at any n, T and rate):

    * a record twice in one batch, or batch sizes or record counts over-dispersed -> ``other``;
    * record counts under-dispersed (every record about once per epoch) -> ``shuffled``;
    * else batch sizes under-dispersed (constant batch size) -> ``fixed-size``;
    * else -> ``poisson``.

    Every step with every record is ``full-batch``; fewer than 2 steps or no records drawn is
    ``inconclusive``. ``seed`` seeds the draws of the conditional law (T > 2). Within one epoch the only
    trace of shuffling in the counts is that no record repeats, which the count test sees once ``T q``
    is not small; before that shuffling reads as ``fixed-size``. At T = 2 two batches of equal size are
    what Poisson sampling gives often: the test then has little power against fixed sizes, and keeps
    its level. Sources: docs/references.md, "Configuration checks".
    """
    if int(n) != n or n < 2:
        raise UserError(f"the dataset size must be an integer >= 2 (got {n!r})")
    if not 0.0 < significance < 0.5:
        raise UserError(f"significance must lie in (0, 0.5) (got {significance!r}); e.g. 1e-3")
    n = int(n)
    batches = [np.asarray(b, dtype=np.int64).reshape(-1) for b in batch_index_lists]
    sizes = np.array([b.size for b in batches], dtype=np.int64)
    flat = np.concatenate(batches) if batches else np.zeros(0, np.int64)
    if flat.size and (flat.min() < 0 or flat.max() >= n):
        raise UserError(f"batch indices must lie in 0..{n - 1}")
    steps, total = len(batches), int(flat.size)
    duplicates = int(sum(b.size - np.unique(b).size for b in batches))
    q = total / (n * steps) if steps else 0.0
    nan = float("nan")
    batch, record, dispersion, draws = (nan, nan), (nan, nan), (nan, nan), 0
    if steps < 2 or total == 0:
        verdict = "inconclusive"
    elif q >= 1.0 and not duplicates:
        verdict = "full-batch"
    elif q >= 1.0 or duplicates:
        verdict = "other"
    else:
        counts = np.bincount(flat, minlength=n).astype(np.int64)
        batch, record, draws = _p_values(sizes, counts, n, significance, seed)
        dispersion = (float(np.var(sizes) * steps / (steps - 1) / (n * q * (1 - q))),
                      float(np.var(counts) * n / (n - 1) / (steps * q * (1 - q))))
        verdict = _verdict(batch, record, duplicates, significance)
    return SamplingEvidence(
        verdict=verdict, message=_MESSAGES[verdict], steps=steps, dataset_size=n, rate=q,
        batch_size_mean=float(sizes.mean()) if steps else 0.0,
        batch_size_sd=float(sizes.std(ddof=1)) if steps > 1 else 0.0,
        batch_dispersion=dispersion[0], batch_p_low=batch[0], batch_p_high=batch[1],
        record_dispersion=dispersion[1], record_p_low=record[0], record_p_high=record[1],
        duplicates=duplicates, significance=float(significance), draws=draws)


def rate_test(batch_index_lists: Sequence[ArrayLike], n: int, declared: float, alpha: float) -> dict[str, Any]:
    """Whether the records the batches held match the declared Poisson rate ``declared``.

    Under Poisson sampling at rate q, the total count ``S = sum_t B_t`` over T steps of n records is
    Bin(n T, q) (module docstring); the exact two-sided binomial test rejects q when its p-value is
    below ``alpha``, so a loop sampling at its declared rate is flagged with probability at most
    ``alpha``. At q = 1 every record must be in every step. Returns the JSON-serialisable test:
    ``declared``, ``observed`` (S / (n T)), ``records``, ``trials``, ``p_value``, ``alpha``,
    ``rejected``. Sources: docs/references.md, "Configuration checks".
    """
    if not 0.0 < declared <= 1.0:
        raise UserError(f"the declared sampling rate must lie in (0, 1] (got {declared!r})")
    if not 0.0 < alpha < 1.0:
        raise UserError(f"alpha must lie in (0, 1) (got {alpha!r})")
    total = int(sum(np.asarray(b).size for b in batch_index_lists))
    trials = int(n) * len(batch_index_lists)
    if trials == 0:
        raise UserError("the rate test needs at least one step of a non-empty dataset")
    p_value = float(total == trials) if declared >= 1.0 else float(stats.binomtest(total, trials, declared).pvalue)
    return {"declared": float(declared), "observed": total / trials, "records": total, "trials": trials,
            "p_value": p_value, "alpha": float(alpha), "rejected": bool(p_value < alpha),
            "test": "exact two-sided binomial test of the records over steps x dataset size against the declared rate"}
