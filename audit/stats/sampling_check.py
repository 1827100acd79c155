"""Which sampling a training used, from the record indices it drew at each step.

DP-SGD's accounting assumes Poisson sampling: every record joins every step by its own coin with
rate q [Abadi et al. 2016, Alg. 1]. Shuffled fixed-size batches (every record exactly once per
epoch) accounted as Poisson understate epsilon [Chua et al. 2024]. Under Poisson sampling with n
records and T steps, the batch sizes are independent Bin(n, q) and each record's count of steps is
an independent Bin(T, q); shuffling makes the counts (nearly) equal to the number of epochs, and
fixed-size batches make the batch sizes constant. Both show as under-dispersion in the binomial
index-of-dispersion test (Cochran 1954):

    D_B = sum_t (B_t - mean B)^2 / (n q (1 - q))  ~  chi^2_{T-1}
    D_c = sum_i (c_i - mean c)^2 / (T q (1 - q))  ~  chi^2_{n-1}      (q = sum_t B_t / (n T))

The rate itself is a second question: a loop may sample by Poisson coins at a rate other than the
one it declares (and the accountant uses). Under Poisson sampling at the declared q the total number
of records over the T steps is Bin(n T, q); :func:`rate_test` is the exact two-sided binomial test
of that count (Clopper & Pearson 1934; scipy's ``binomtest``), so a correct loop is flagged with
probability at most its ``alpha``.

Sources: docs/references.md, "Configuration checks".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

from audit.errors import UserError

__all__ = ["SAMPLING_VERDICTS", "SamplingEvidence", "sampling_from_batches", "rate_test"]

SAMPLING_VERDICTS = ("poisson", "shuffled", "fixed-size", "full-batch", "other", "inconclusive")

_MESSAGES = {
    "poisson": "The batches are consistent with Poisson sampling (batch sizes and per-record counts vary "
               "binomially), as DP-SGD's accounting assumes.",
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

    ``batch_dispersion`` and ``record_dispersion`` are D_B/(T-1) and D_c/(n-1): about 1 under Poisson
    sampling, near 0 for constant batch sizes / once-per-epoch records. ``*_p_low`` / ``*_p_high``
    are the chi-square tail probabilities of under- and over-dispersion.
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

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["rule"] = (f"two-sided binomial dispersion tests at {self.significance:g} per tail: any over-dispersion or "
                     "duplicate -> other; record counts under-dispersed -> shuffled; batch sizes under-dispersed -> "
                     "fixed-size; neither -> poisson")
        return d


def _dispersion(values: np.ndarray, variance: float) -> tuple[float, float, float]:
    """(D/(k-1), P[chi^2_{k-1} <= D], P[chi^2_{k-1} >= D]) of the binomial dispersion statistic D."""
    dof = values.size - 1
    d = float(np.sum((values - values.mean()) ** 2) / variance)
    return d / dof, float(stats.chi2.cdf(d, dof)), float(stats.chi2.sf(d, dof))


def _verdict(batch: tuple[float, float, float], record: tuple[float, float, float], duplicates: int,
             alpha: float) -> str:
    if duplicates or batch[2] < alpha or record[2] < alpha:
        return "other"
    if record[1] < alpha:
        return "shuffled"
    if batch[1] < alpha:
        return "fixed-size"
    return "poisson"


def sampling_from_batches(batch_index_lists: Sequence[ArrayLike], n: int, *,
                          significance: float = 1e-3) -> SamplingEvidence:
    """Whether the batches a training drew look Poisson, shuffled or fixed-size.

    ``batch_index_lists[t]`` are the record indices (0..n-1) of step t. Rule, with the binomial
    dispersion tests of the module docstring at ``significance`` per tail (four tails, so Poisson
    sampling is misread with probability about 4 x ``significance`` or less):

    * a record twice in one batch, or batch sizes or record counts over-dispersed -> ``other``;
    * record counts under-dispersed (every record about once per epoch) -> ``shuffled``;
    * else batch sizes under-dispersed (constant batch size) -> ``fixed-size``;
    * else -> ``poisson``.

    Every step with every record is ``full-batch``; fewer than 2 steps or no records drawn is
    ``inconclusive``. The chi-square laws are large-sample approximations (Cochran 1954). Within
    one epoch the only trace of shuffling in the counts is that no record repeats, which the count
    test sees once ``T q`` is not small; before that shuffling reads as ``fixed-size``.
    Sources: docs/references.md, "Configuration checks".
    """
    if int(n) != n or n < 2:
        raise UserError(f"the dataset size must be an integer >= 2 (got {n!r})")
    if not 0.0 < significance < 0.5:
        raise UserError(f"significance must lie in (0, 0.5) (got {significance!r}); e.g. 1e-3")
    n = int(n)
    batches = [np.asarray(b, dtype=np.int64).reshape(-1) for b in batch_index_lists]
    sizes = np.array([b.size for b in batches], dtype=float)
    flat = np.concatenate(batches) if batches else np.zeros(0, np.int64)
    if flat.size and (flat.min() < 0 or flat.max() >= n):
        raise UserError(f"batch indices must lie in 0..{n - 1}")
    steps, total = len(batches), int(flat.size)
    duplicates = int(sum(b.size - np.unique(b).size for b in batches))
    q = total / (n * steps) if steps else 0.0
    nan = (float("nan"),) * 3
    batch, record = nan, nan
    if steps < 2 or total == 0:
        verdict = "inconclusive"
    elif q >= 1.0 and not duplicates:
        verdict = "full-batch"
    elif q >= 1.0:
        verdict = "other"
    else:
        batch = _dispersion(sizes, n * q * (1.0 - q))
        record = _dispersion(np.bincount(flat, minlength=n).astype(float), steps * q * (1.0 - q))
        verdict = _verdict(batch, record, duplicates, significance)
    return SamplingEvidence(
        verdict=verdict, message=_MESSAGES[verdict], steps=steps, dataset_size=n, rate=q,
        batch_size_mean=float(sizes.mean()) if steps else 0.0,
        batch_size_sd=float(sizes.std(ddof=1)) if steps > 1 else 0.0,
        batch_dispersion=batch[0], batch_p_low=batch[1], batch_p_high=batch[2],
        record_dispersion=record[0], record_p_low=record[1], record_p_high=record[2],
        duplicates=duplicates, significance=float(significance))


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
