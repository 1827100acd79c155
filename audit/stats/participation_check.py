"""Whether a training's batches follow the participation scheme it is accounted for.

jax_privacy 2.0 accounts several participation schemes besides plain Poisson sampling; each states its
law as guarantees of its batch iterator (docs/references.md, "Configuration checks"). This module tests
a batch log (the record indices of each noisy step, records 0..n-1) against one declared scheme. Facts
(what the law never produces: a record twice in a batch, outside its cycle group, a batch above the
cap) are violations without a test; the rest is tested exactly, each test within a stated share of the
caller's ``alpha``, with Monte-Carlo p-values ``(1 + #{draws as extreme}) / (B + 1)`` (valid for any B,
ties counted as extreme; Davison & Hinkley 1997, Sec. 4.2.5) from ``B = MC_PER_LEVEL / share`` draws
seeded by the caller's ``seed``.

* **Cyclic Poisson** (Choquette-Choo et al. 2023, arXiv 2306.08153; jax_privacy ``CyclicPoissonSampling``):
  the records are split into ``c`` groups (INDEPENDENT: each record's group uniform and independent;
  EQUAL_SPLIT: a uniform shuffle cut into ``c`` groups of ``n // c``, the remainder never sampled), step
  t samples group ``t mod c``, each member by its own coin at q. Fact: a record's steps share one residue
  mod c. Statistics, :func:`cyclic_poisson_check`:

  - *dispersion* (no cap): fold the complete cycles, cycle j being the union of steps ``jc .. jc + c - 1``.
    Given the partition, record i's cell in cycle j is its coin at its group's step of that cycle, so the
    folded n x k grid (``k = T // c``) is iid Bernoulli(q) on the records of the groups and zero elsewhere:
    plain Poisson sampling over k steps. Its batch sizes and record counts are then tested by
    :func:`audit.stats.sampling_check.sampling_from_batches`, whose conditional law needs only the number
    of records that can be drawn: n under INDEPENDENT, ``c (n // c)`` under EQUAL_SPLIT (the zero rows of
    the discarded records change no statistic), the groups' union when the partition is given. With the
    partition type unknown each tail's p-value is the larger of the two, valid under either law (a
    p-value valid under every law of a composite null is the largest of theirs). Exact whatever the
    unseen group sizes; the trailing partial cycle is left out of this test (not of the rate test).
  - *rate* (no cap): given the partition the records over the T steps are ``Bin(sum_g m_g T_g, q)``
    (``m_g`` records in group g, ``T_g`` steps of residue g). EQUAL_SPLIT: ``m_g = n // c``; given groups:
    their sizes; INDEPENDENT with unknown groups: each record adds an independent ``Bin(k, q)`` over the
    complete cycles and a ``Bernoulli(q r / c)`` for the ``r = T mod c`` steps of the partial cycle (its
    group is uniform, independent of the coins), so the total is ``Bin(n k, q) * Bin(n, q r / c)``
    (exact convolution). Exact two-sided test, p-value the sum of the probabilities no larger than the
    observed one (scipy's ``binomtest`` rule), the larger of the two partitions' when unknown.
  - *truncation* (cap given; Chua et al. 2024, arXiv 2411.04205): each step's size is
    ``min(Bin(m_g, q), cap)``, iid within a residue given the partition, and given the sizes each batch
    is a uniform subset of its group. Fact: no batch above the cap. The sizes' total and their sum of
    squared deviations are tested in both tails against that law by seeded draws (group sizes drawn from
    Multinomial(n, 1/c) for INDEPENDENT, fixed ``n // c`` for EQUAL_SPLIT, the larger p-value when the
    partition is unknown). The uniform-subset property is tested through the record counts given the
    sizes (the sum of squared counts, both tails, draws of independent uniform subsets), which needs the
    group sizes: at cycle 1, with the groups given, or with ``partition="equal_split"``; otherwise it is not
    tested (INDEPENDENT group sizes are unknown) and ``details`` says so.

* **Balls in bins** (Chua et al. 2024, arXiv 2410.06266; jax_privacy ``BallsInBinsSampling``): each
  record's bin is uniform and independent, and it appears in every step of its residue and no other.
  Facts: one residue per record, every step of it; every record appears once T >= c. Statistic: the bin
  sizes are Multinomial(n, 1/c): Pearson's X^2 of them against draws of that law, both tails
  (:func:`balls_in_bins_check`). Equal bins are a violation, not a variant: the accountant's
  amplification comes from a record's bin being random and independent of the others'; with bins of
  fixed equal sizes (a shuffle cut into equal parts, a fixed cyclic order) the neighbouring dataset's
  batch sizes reveal the bin of the added record, which is shuffling, not the accounted scheme. A
  deterministic assignment whose sizes look multinomial cannot be told from one run.

* **b-min-sep** (jax_privacy ``BMinSepSampling``; arXiv 2602.09338): Poisson sampling at q of the records
  that were not in the previous ``b - 1`` steps. Fact: two participations of a record are at least b
  steps apart. Statistic: each record is an independent renewal chain (eligible, joins with probability
  q, then ineligible for b - 1 steps); from step ``b - 1`` on, its state is known from the log, so the
  total participations of steps ``b - 1 .. T - 1`` has an exact law, the convolution over records of
  each chain's count (dynamic programming), tested two-sided (twice the smaller tail)
  (:func:`min_separation_check`). Pooling "eligible inclusions" as one binomial is not exact (the
  eligible pairs depend on earlier coins), which is why the chains are used.

* **Periodic participation under a declared Poisson law** (:func:`periodic_participation_check`): under
  Poisson sampling the n x T indicators are iid, so given its count ``c_i`` a record's steps are a
  uniform ``c_i``-subset of the T steps, independently across records (Lehmann & Romano 2005, Sec. 4.4).
  The number ``A_c`` of records with ``c_i >= 2`` whose steps share one residue mod c is then a sum of
  independent Bernoulli variables with ``p(c_i) = sum_r C(T_r, c_i) / C(T, c_i)`` (``T_r`` steps of
  residue r): its upper tail is exact (convolution). Each candidate c with a residue of two or more
  steps is tested at ``alpha / (#candidates)`` (Bonferroni). A loop that runs cyclic Poisson or balls in
  bins but accounts plain Poisson puts every record on one residue of its cycle and of the cycle's
  divisors.

Sources: docs/references.md, "Configuration checks".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import signal, special, stats

from audit.errors import UserError
from audit.stats.sampling_check import MC_PER_LEVEL, rate_test, sampling_from_batches

__all__ = ["ParticipationResult", "cyclic_poisson_check", "balls_in_bins_check", "min_separation_check",
           "periodic_participation_check", "cap_under_poisson_check", "PARTITIONS"]

#: Partition types of cyclic Poisson sampling (jax_privacy ``PartitionType``); None: unknown, valid under both.
PARTITIONS = ("independent", "equal_split")
_SEED_TAG = 0x9A27


@dataclass(frozen=True, kw_only=True)
class ParticipationResult:
    """A participation check's finding. ``violation``: the log is not what the declared law produces (a
    fact broken, or a test at its share of ``alpha``); ``read``: False when the log cannot test the law
    (``message`` says why; never a pass); ``fix``: "" when fine; ``details``: JSON-serialisable numbers;
    ``fact``: the violation is a fact the declared law never produces (no test, no alpha: nothing to confirm)."""

    check: str
    violation: bool
    read: bool
    message: str
    fix: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    fact: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"check": self.check, "violation": self.violation, "read": self.read, "message": self.message,
                "fix": self.fix, "details": dict(self.details), "fact": self.fact}


# ---------------------------------------------------------------------------------------------- common pieces

def _batches(batches: Sequence[ArrayLike], n: int) -> tuple[list[np.ndarray], int]:
    if isinstance(n, bool) or int(n) != n or n < 1:
        raise UserError(f"the dataset size must be a positive integer (got {n!r})")
    out = [np.asarray(b, dtype=np.int64).reshape(-1) for b in batches]
    flat = np.concatenate(out) if out else np.zeros(0, np.int64)
    if flat.size and (flat.min() < 0 or flat.max() >= n):
        raise UserError(f"batch indices must lie in 0..{int(n) - 1}")
    return out, int(sum(b.size - np.unique(b).size for b in out))


def _check_alpha(alpha: float) -> float:
    if not 0.0 < alpha < 1.0:
        raise UserError(f"alpha must lie in (0, 1) (got {alpha!r})")
    return float(alpha)


def _check_rate(rate: float) -> float:
    if not 0.0 < rate <= 1.0:
        raise UserError(f"the declared sampling rate must lie in (0, 1] (got {rate!r})")
    return float(rate)


def _check_cycle(cycle: int, name: str = "cycle") -> int:
    if isinstance(cycle, bool) or int(cycle) != cycle or cycle < 1:
        raise UserError(f"the {name} must be a positive integer (got {cycle!r})")
    return int(cycle)


def _rng(seed: int, tag: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([int(seed), _SEED_TAG, tag]))


def _draws(share: float) -> int:
    return int(math.ceil(MC_PER_LEVEL / share))


def _mc_tails(observed: float, sims: np.ndarray) -> tuple[float, float]:
    """``(1 + #{sim <= obs}) / (B + 1)`` and ``(1 + #{sim >= obs}) / (B + 1)``, ties as extreme (a relative
    tolerance of 1e-9 absorbs rounding in float statistics)."""
    tol = 1e-9 * max(1.0, abs(observed))
    b = sims.size
    return ((1 + int(np.count_nonzero(sims <= observed + tol))) / (b + 1),
            (1 + int(np.count_nonzero(sims >= observed - tol))) / (b + 1))


def _steps_and_records(batches: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    sizes = np.array([b.size for b in batches], dtype=np.int64)
    steps = np.repeat(np.arange(len(batches), dtype=np.int64), sizes)
    flat = np.concatenate(batches) if batches else np.zeros(0, np.int64)
    return steps, flat


def _residues(batches: list[np.ndarray], n: int, cycle: int) -> tuple[np.ndarray, np.ndarray]:
    """Per record: its residue mod ``cycle`` (-1: never seen) and whether it was seen at two or more."""
    steps, flat = _steps_and_records(batches)
    pairs = np.unique(flat * cycle + steps % cycle)
    recs, res = pairs // cycle, pairs % cycle
    multi = np.bincount(recs, minlength=n) > 1
    residue = np.full(n, -1, dtype=np.int64)
    residue[recs] = res
    return residue, multi


def _class_sizes(steps: int, cycle: int) -> np.ndarray:
    """``T_r``: the number of steps t < ``steps`` with t mod ``cycle`` = r."""
    return np.array([steps // cycle + (r < steps % cycle) for r in range(cycle)], dtype=np.int64)


def _fmt(x: float) -> str:
    return f"{x:.3g}"


def _num(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def _minlike_p(pmf: np.ndarray, observed: int) -> float:
    """Two-sided p-value: the probability of the outcomes no likelier than the observed one."""
    if observed < 0 or observed >= pmf.size:
        return 0.0
    return float(min(1.0, pmf[pmf <= pmf[observed] * (1 + 1e-7)].sum()))


def _convolve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = signal.fftconvolve(a, b) if min(a.size, b.size) > 64 else np.convolve(a, b)
    out = np.clip(out, 0.0, None)
    return out / out.sum()


def _power(pmf: np.ndarray, k: int) -> np.ndarray:
    """The k-fold convolution of a pmf (k >= 0), by repeated squaring."""
    result, base = np.ones(1), pmf
    while k:
        if k & 1:
            result = _convolve(result, base)
        k >>= 1
        if k:
            base = _convolve(base, base)
    return result


# ---------------------------------------------------------------------------------------------- cyclic Poisson

def _partition_options(partition: str | None, groups: Sequence[ArrayLike] | None,
                       cycle: int) -> tuple[str, ...]:
    if groups is not None:
        return ("given",)
    if partition is None:
        return PARTITIONS if cycle > 1 else ("independent",)
    if partition not in PARTITIONS:
        raise UserError(f"partition must be one of {', '.join(PARTITIONS)}, the groups, or None "
                        f"(got {partition!r})")
    return (partition,)


def _given_groups(groups: Sequence[ArrayLike], n: int, cycle: int) -> list[np.ndarray]:
    out = [np.unique(np.asarray(g, dtype=np.int64).reshape(-1)) for g in groups]
    if len(out) != cycle:
        raise UserError(f"groups must hold one index array per cycle group ({cycle}), got {len(out)}")
    flat = np.concatenate(out) if out else np.zeros(0, np.int64)
    if flat.size and (flat.min() < 0 or flat.max() >= n):
        raise UserError(f"group indices must lie in 0..{n - 1}")
    if np.unique(flat).size != flat.size:
        raise UserError("groups must be disjoint: a record belongs to one cycle group")
    return out


def _cyclic_facts(batches: list[np.ndarray], n: int, cycle: int, cap: int | None,
                  groups: list[np.ndarray] | None, options: tuple[str, ...]) -> tuple[list[str], tuple[str, ...],
                                                                                      dict[str, Any]]:
    """The broken facts (sentences), the partitions still possible, and the counts behind them."""
    residue, multi = _residues(batches, n, cycle)
    sizes = np.array([b.size for b in batches], dtype=np.int64)
    broken: list[str] = []
    facts: dict[str, Any] = {"records_outside_cycle_group": int(multi.sum())}
    if multi.any():
        broken.append(f"{int(multi.sum())} records participate outside their cycle group (steps of two or more "
                      f"residues mod {cycle})")
    if cap is not None:
        over = int(np.count_nonzero(sizes > cap))
        facts["batches_over_cap"] = over
        if over:
            broken.append(f"{over} batches hold more than the cap of {cap} records (largest {int(sizes.max())})")
    if groups is not None:
        outside = 0
        for g, members in enumerate(groups):
            in_class = np.concatenate([batches[t] for t in range(g, len(batches), cycle)] or [np.zeros(0, np.int64)])
            outside += int(np.count_nonzero(~np.isin(np.unique(in_class), members)))
        facts["records_outside_given_group"] = outside
        if outside:
            broken.append(f"{outside} records participate at steps of a group they are not in")
    seen_per_class = np.array([int(np.count_nonzero(residue[~multi] == r)) for r in range(cycle)])
    facts["records_seen_per_group"] = seen_per_class.tolist()
    possible = options
    if "equal_split" in options and (seen_per_class > n // cycle).any():
        possible = tuple(o for o in options if o != "equal_split")
        if not possible:
            broken.append(f"a group holds more records than an equal split of {n} into {cycle} allows "
                          f"({int(seen_per_class.max())} > {n // cycle})")
    return broken, possible, facts


def _fold(batches: list[np.ndarray], cycle: int) -> list[np.ndarray]:
    k = len(batches) // cycle
    return [np.concatenate(batches[j * cycle:(j + 1) * cycle]) for j in range(k)]


def _relabel(batches: list[np.ndarray], universe: np.ndarray | None) -> tuple[list[np.ndarray], int]:
    """The batches with records renamed 0..; ``universe``: the records that can be drawn (None: the seen ones)."""
    flat = np.concatenate(batches) if batches else np.zeros(0, np.int64)
    labels = np.unique(flat) if universe is None else universe
    sizes = np.cumsum([b.size for b in batches])[:-1]
    return np.split(np.searchsorted(labels, flat), sizes), int(labels.size)


@dataclass(frozen=True)
class _Law:
    """A declared cyclic Poisson law: the partitions still possible and the groups when given."""

    n: int
    rate: float
    cycle: int
    possible: tuple[str, ...]
    groups: list[np.ndarray] | None


def _dispersion(batches: list[np.ndarray], law: _Law, significance: float, seed: int) -> dict[str, Any]:
    """The four dispersion tails of the folded log, each the largest over the possible partitions."""
    n, cycle, possible, groups = law.n, law.cycle, law.possible, law.groups
    folded = _fold(batches, cycle)
    tails = ("batch_p_low", "batch_p_high", "record_p_low", "record_p_high")
    out: dict[str, Any] = {"folded_steps": len(folded), "significance_per_tail": significance}
    evidences = []
    if len(folded) < 2:
        out.update(read=False, verdict="inconclusive")
        return out
    for option in possible:
        if option == "independent":
            log, size = folded, n
        elif option == "equal_split":
            log, size = _relabel(folded, None)[0], cycle * (n // cycle)
        else:
            assert groups is not None
            log, size = _relabel(folded, np.sort(np.concatenate(groups)))
        if size < 2:
            continue
        evidences.append(sampling_from_batches(log, size, significance=significance, seed=seed))
    verdicts = {e.verdict for e in evidences}
    if not evidences or verdicts & {"inconclusive"}:
        out.update(read=False, verdict="inconclusive")
        return out
    p = {t: max(getattr(e, t) for e in evidences) for t in tails}
    if "full-batch" in verdicts:
        verdict = "full-batch"
    elif evidences[0].duplicates or p["batch_p_high"] < significance or p["record_p_high"] < significance:
        verdict = "other"
    elif p["record_p_low"] < significance:
        verdict = "shuffled"
    elif p["batch_p_low"] < significance:
        verdict = "fixed-size"
    else:
        verdict = "poisson"
    out.update(read=True, verdict=verdict, draws=evidences[0].draws,
               **{t: _num(v) for t, v in p.items()})
    return out


def _cyclic_rate(batches: list[np.ndarray], law: _Law, share: float) -> dict[str, Any]:
    n, rate, cycle, possible, groups = law.n, law.rate, law.cycle, law.possible, law.groups
    steps = len(batches)
    total = int(sum(b.size for b in batches))
    t_r = _class_sizes(steps, cycle)
    if cycle == 1 and groups is None:
        test = rate_test(batches, n, rate, share)
        return {"read": True, "p_value": test["p_value"], "observed": test["observed"], "trials": test["trials"],
                "records": total, "alpha": share, "rejected": test["rejected"]}
    ps: list[float] = []
    expected: list[float] = []
    for option in possible:
        if option == "independent":
            k, r = steps // cycle, steps % cycle
            if r == 0:
                ps.append(float(total == n * k) if rate >= 1.0 else float(stats.binomtest(total, n * k, rate).pvalue))
            else:
                pmf = _convolve(stats.binom.pmf(np.arange(n * k + 1), n * k, rate),
                                stats.binom.pmf(np.arange(n + 1), n, rate * r / cycle))
                ps.append(_minlike_p(pmf, total))
            expected.append(rate * n * steps / cycle)
        else:
            sizes = [len(g) for g in groups] if option == "given" and groups is not None else [n // cycle] * cycle
            trials = int(np.dot(sizes, t_r))
            if trials == 0:
                ps.append(float(total == 0))
            else:
                ps.append(float(total == trials) if rate >= 1.0 else float(stats.binomtest(total, trials,
                                                                                           rate).pvalue))
            expected.append(rate * trials)
    p = max(ps) if ps else float("nan")
    return {"read": bool(ps), "p_value": _num(p), "records": total, "expected_records": [float(e) for e in expected],
            "alpha": share, "rejected": bool(ps) and p < share}


def _size_laws(law: _Law, cap: int, steps: int, draws: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Per possible partition, ``draws`` x T batch sizes drawn from the truncated law."""
    n, rate, cycle, possible, groups = law.n, law.rate, law.cycle, law.possible, law.groups
    residue = np.arange(steps) % cycle
    out = []
    for option in possible:
        if option == "independent":
            m = rng.multinomial(n, np.full(cycle, 1.0 / cycle), size=draws)[:, residue]
        elif option == "equal_split":
            m = np.full((draws, steps), n // cycle, dtype=np.int64)
        else:
            assert groups is not None
            m = np.broadcast_to(np.array([len(g) for g in groups], dtype=np.int64)[residue], (draws, steps))
        out.append(np.minimum(rng.binomial(m, rate), cap))
    return out


def _sq_counts_given_sizes(m: int, sizes: np.ndarray, draws: int, rng: np.random.Generator) -> np.ndarray:
    """``draws`` draws of ``sum_i c_i^2`` over a group of ``m`` records when step t's batch is a uniform
    ``sizes[t]``-subset of the group, independently: the histogram of the counts is updated per step by a
    multivariate hypergeometric draw over the count classes (sequential hypergeometric variates, exact)."""
    hist = np.zeros((draws, sizes.size + 1), dtype=np.int64)
    hist[:, 0] = m
    low = top = 0  # the occupied classes of any draw lie in low..top
    for size in sizes:
        remaining = np.full(draws, int(size), dtype=np.int64)
        rest = np.full(draws, m, dtype=np.int64)
        moved = np.zeros((draws, top + 1 - low), dtype=np.int64)
        for j, k in enumerate(range(low, top + 1)):
            if not remaining.any():
                break
            good = hist[:, k]
            rest = rest - good
            moved[:, j] = rng.hypergeometric(good, rest, remaining)
            remaining = remaining - moved[:, j]
        hist[:, low:top + 1] -= moved
        hist[:, low + 1:top + 2] += moved
        if moved[:, -1].any():
            top += 1
        while low < top and not hist[:, low].any():
            low += 1
    return hist[:, :top + 1] @ (np.arange(top + 1, dtype=np.int64) ** 2)


def _truncated(batches: list[np.ndarray], law: _Law, cap: int, share: float, seed: int) -> dict[str, Any]:
    """The size tests (share / 2: four tails) and the count test given the sizes (share / 2: two tails)."""
    n, cycle, possible, groups = law.n, law.cycle, law.possible, law.groups
    sizes = np.array([b.size for b in batches], dtype=np.int64)
    steps = sizes.size
    out: dict[str, Any] = {"cap": cap, "capped_steps": int(np.count_nonzero(sizes == cap)),
                           "size_mean": float(sizes.mean()), "size_sd": float(sizes.std())}
    size_tail = share / 8
    draws = _draws(size_tail)
    laws = _size_laws(law, cap, steps, draws, _rng(seed, 1))
    keys = ("total_p_low", "total_p_high", "spread_p_low", "spread_p_high")
    p = dict.fromkeys(keys, 0.0)
    obs_total, obs_spread = float(sizes.sum()), float(((sizes - sizes.mean()) ** 2).sum())
    for sims in laws:
        sims = sims.astype(np.float64)
        tot = _mc_tails(obs_total, sims.sum(axis=1))
        spread = _mc_tails(obs_spread, ((sims - sims.mean(axis=1, keepdims=True)) ** 2).sum(axis=1))
        for key, value in zip(keys, tot + spread, strict=True):
            p[key] = max(p[key], value)
    out.update({k: float(v) for k, v in p.items()}, size_draws=draws, size_significance_per_tail=size_tail)
    out["sizes_rejected"] = bool(min(p.values()) < size_tail)
    out["expected_size_per_law"] = [float(s.mean()) for s in laws]
    # the record counts given the sizes: needs the group sizes
    if groups is not None:
        group_sizes: list[int] | None = [len(g) for g in groups]
    elif cycle == 1:
        group_sizes = [n]
    elif possible == ("equal_split",):
        group_sizes = [n // cycle] * cycle
    else:
        group_sizes = None
    count_tail = share / 4
    if group_sizes is None or steps < 2:
        out.update(counts_read=False, counts_rejected=False,
                   counts_note="the record counts given the sizes need the group sizes (pass the groups or "
                               "partition='equal_split')" if steps >= 2 else "fewer than 2 steps")
        return out
    draws = _draws(count_tail)
    rng = _rng(seed, 2)
    sims = np.zeros(draws, dtype=np.int64)
    for g, m in enumerate(group_sizes):
        if m > 0:
            sims += _sq_counts_given_sizes(m, sizes[g::cycle], draws, rng)
    _, flat = _steps_and_records(batches)
    counts = np.bincount(flat, minlength=n).astype(np.int64)
    low, high = _mc_tails(float(counts @ counts), sims.astype(np.float64))
    out.update(counts_read=True, counts_p_low=low, counts_p_high=high, counts_draws=draws,
               counts_significance_per_tail=count_tail, counts_rejected=bool(min(low, high) < count_tail))
    return out


def _untruncated_problems(logs: list[np.ndarray], spec: _Law, alpha: float, seed: int,
                          details: dict[str, Any]) -> tuple[list[str], bool, str]:
    """The tests of :func:`cyclic_poisson_check` without a cap: what they reject, whether they read, the fix."""
    disp = _dispersion(logs, spec, alpha / 8, seed)
    rate_res = _cyclic_rate(logs, spec, alpha / 2)
    details.update(dispersion=disp, rate_test=rate_res)
    problems = []
    if disp.get("verdict") in ("shuffled", "fixed-size", "other"):
        problems.append({"shuffled": "records take part far more evenly than independent coins allow "
                                     "(shuffled batches within the groups)",
                         "fixed-size": "the batch sizes vary less than binomial sizes do (fixed-size batches)",
                         "other": "the batch sizes or record counts vary more than independent coins "
                                  "allow"}[disp["verdict"]])
    if rate_res["rejected"]:
        problems.append(f"{rate_res['records']} records were drawn where rate {_fmt(spec.rate)} expects about "
                        f"{_fmt(max(rate_res.get('expected_records', [rate_res.get('trials', 0) * spec.rate])))} "
                        f"(p = {_fmt(rate_res['p_value'])})")
    fix = ("Draw each eligible record by its own coin at the declared rate at every step of its group "
           "(e.g. jax_privacy CyclicPoissonSampling), or declare and account the rate and sampling the loop "
           "really uses.") if problems else ""
    return problems, bool(disp["read"] or rate_res["read"]), fix


def _truncated_problems(logs: list[np.ndarray], spec: _Law, cap: int, alpha: float, seed: int,
                        details: dict[str, Any]) -> tuple[list[str], bool, str]:
    """The tests of :func:`cyclic_poisson_check` with a cap: what they reject, whether they read, the fix."""
    trunc = _truncated(logs, spec, cap, alpha, seed)
    details.update(truncation=trunc)
    problems = []
    if trunc["sizes_rejected"]:
        problems.append(f"the batch sizes (mean {_fmt(trunc['size_mean'])}, sd {_fmt(trunc['size_sd'])}) do "
                        f"not follow min(Binomial, {cap}) at rate {_fmt(spec.rate)} (expected mean about "
                        f"{_fmt(max(trunc['expected_size_per_law']))})")
    if trunc["counts_rejected"]:
        problems.append("given the batch sizes, the records do not take part as uniform subsets would")
    fix = ("Draw each eligible record by its own coin at the declared rate and cut a batch above the cap to a "
           "uniform subset of the cap (e.g. jax_privacy CyclicPoissonSampling with truncated_batch_size); "
           "a fixed batch size is not truncated Poisson sampling.") if problems else ""
    return problems, True, fix


def cyclic_poisson_check(batches: Sequence[ArrayLike], n: int, rate: float, cycle: int, alpha: float, seed: int,
                         cap: int | None = None, *,
                         partition: str | Sequence[ArrayLike] | None = None) -> ParticipationResult:
    """Whether the batches follow (truncated) cyclic Poisson sampling at ``rate`` with ``cycle`` groups.

    Facts (no alpha): no record twice in a batch; a record's steps share one residue mod ``cycle``; with
    ``cap``, no batch above it; with the groups given (``partition``), records only at their group's
    steps; under EQUAL_SPLIT no group above ``n // cycle``. Tests (module docstring), ``alpha`` split in
    two halves: without a cap, the folded dispersion test (``alpha / 8`` per tail) and the exact rate
    test (``alpha / 2``); with a cap, the size law (``alpha / 16`` per tail, total and spread) and the
    record counts given the sizes (``alpha / 4`` per tail; tested only when the group sizes are known).
    ``partition``: "independent", "equal_split", the groups themselves (one index array per residue, when
    the plugin can read them: every test is then exact given them), or None (unknown: every p-value is the
    largest of the two partition types'). At cycle 1 without a cap the verdicts are those of
    :func:`~audit.stats.sampling_check.sampling_from_batches` (significance ``alpha / 8``) and
    :func:`~audit.stats.sampling_check.rate_test` (``alpha / 2``) on the same log.
    Sources: docs/references.md, "Configuration checks".
    """
    alpha, rate, cycle = _check_alpha(alpha), _check_rate(rate), _check_cycle(cycle)
    if cap is not None:
        cap = _check_cycle(cap, "cap (truncated batch size)")
    logs, duplicates = _batches(batches, n)
    groups = None if partition is None or isinstance(partition, str) else partition
    options = _partition_options(None if groups is not None else partition, groups, cycle)
    given = _given_groups(groups, n, cycle) if groups is not None else None
    broken, possible, facts = _cyclic_facts(logs, n, cycle, cap, given, options)
    if duplicates:
        broken.insert(0, f"{duplicates} records appear twice in one batch")
    spec = _Law(n=int(n), rate=rate, cycle=cycle, possible=possible, groups=given)
    details: dict[str, Any] = {"n": int(n), "steps": len(logs), "rate": rate, "cycle": cycle, "cap": cap,
                               "alpha": alpha, "partitions": list(possible), "duplicates": duplicates, **facts}
    law = (f"cyclic Poisson sampling (rate {_fmt(rate)}, cycle {cycle}"
           + (f", truncated at {cap})" if cap is not None else ")"))
    if broken:
        fix = ("Sample with the declared scheme (e.g. jax_privacy CyclicPoissonSampling) so that each record is "
               "eligible only at its group's steps" + (" and batches above the cap are cut to a uniform subset "
                                                       "of the cap" if cap is not None else "")
               + ", or account for the sampling the loop really uses.")
        return ParticipationResult(check="cyclic-poisson", violation=True, read=True,
                                   message=f"The batches break {law}: " + "; ".join(broken) + ".", fix=fix,
                                   details=details, fact=True)
    if not logs:
        return ParticipationResult(check="cyclic-poisson", violation=False, read=False,
                                   message="No steps were recorded: the participation cannot be tested.",
                                   details=details)
    problems, read, fix = (_untruncated_problems(logs, spec, alpha, seed, details) if cap is None else
                           _truncated_problems(logs, spec, cap, alpha, seed, details))
    if problems:
        return ParticipationResult(check="cyclic-poisson", violation=True, read=True,
                                   message=f"The batches are not {law}: " + "; ".join(problems) + ".", fix=fix,
                                   details=details)
    if not read:
        return ParticipationResult(check="cyclic-poisson", violation=False, read=False,
                                   message=f"Too few steps to test {law} (need a complete cycle).",
                                   details=details)
    return ParticipationResult(check="cyclic-poisson", violation=False, read=True,
                               message=f"The batches are consistent with {law}.", details=details)


# ---------------------------------------------------------------------------------------------- balls in bins

def balls_in_bins_check(batches: Sequence[ArrayLike], n: int, cycle: int, alpha: float,
                        seed: int) -> ParticipationResult:
    """Whether the batches follow balls-in-bins sampling with ``cycle`` bins.

    Facts (no alpha): no record twice in a batch; every record seen appears at every step of one residue
    mod ``cycle`` and at no other; with ``T >= cycle`` every record appears. Test: Pearson's X^2 of the bin
    sizes (the records per residue; when T < cycle the unseen records form one more cell of probability
    ``(cycle - T) / cycle``) against Multinomial(n, 1/cycle), both tails at ``alpha / 2`` each, from
    ``MC_PER_LEVEL / (alpha / 2)`` seeded draws. Bins of equal fixed sizes are the lower tail, a violation
    (module docstring). Sources: docs/references.md, "Configuration checks".
    """
    alpha, cycle = _check_alpha(alpha), _check_cycle(cycle)
    logs, duplicates = _batches(batches, n)
    steps = len(logs)
    residue, multi = _residues(logs, n, cycle)
    _, flat = _steps_and_records(logs)
    counts = np.bincount(flat, minlength=n)
    t_r = _class_sizes(steps, cycle)
    single = (residue >= 0) & ~multi
    partial = int(np.count_nonzero(single & (counts != t_r[np.maximum(residue, 0)])))
    unseen = int(np.count_nonzero(residue < 0)) if steps >= cycle else 0
    details: dict[str, Any] = {"n": int(n), "steps": steps, "cycle": cycle, "alpha": alpha, "duplicates": duplicates,
                               "records_in_two_residues": int(multi.sum()), "records_missing_steps": partial,
                               "records_never_seen": unseen}
    broken = []
    if duplicates:
        broken.append(f"{duplicates} records appear twice in one batch")
    if multi.any():
        broken.append(f"{int(multi.sum())} records appear at steps of two or more residues mod {cycle}")
    if partial:
        broken.append(f"{partial} records miss some steps of their bin")
    if unseen:
        broken.append(f"{unseen} records never appear although every bin has a step")
    law = f"balls-in-bins sampling with {cycle} bins"
    if broken:
        return ParticipationResult(
            check="balls-in-bins", violation=True, read=True, fact=True,
            message=f"The batches break {law}: " + "; ".join(broken) + ".",
            fix="Give each record one uniformly random bin and put it in every step of that bin and no other "
                "(e.g. jax_privacy BallsInBinsSampling), or account for the sampling the loop really uses.",
            details=details)
    if steps == 0:
        return ParticipationResult(check="balls-in-bins", violation=False, read=False,
                                   message="No steps were recorded: the participation cannot be tested.",
                                   details=details)
    seen_bins = min(steps, cycle)
    observed = np.array([int(np.count_nonzero(residue == r)) for r in range(seen_bins)], dtype=np.int64)
    probs = np.full(seen_bins, 1.0 / cycle)
    if seen_bins < cycle:
        observed = np.append(observed, n - observed.sum())
        probs = np.append(probs, (cycle - seen_bins) / cycle)
    tail = alpha / 2
    draws = _draws(tail)
    sims = _rng(seed, 3).multinomial(n, probs, size=draws)
    expected = n * probs
    x2 = float((((observed - expected) ** 2) / expected).sum())
    low, high = _mc_tails(x2, (((sims - expected) ** 2) / expected).sum(axis=1))
    details.update(bin_sizes=observed.tolist(), chi_square=x2, p_low=low, p_high=high, draws=draws,
                   significance_per_tail=tail)
    if low < tail:
        return ParticipationResult(
            check="balls-in-bins", violation=True, read=True,
            message=f"The bins hold nearly equal numbers of records ({observed.tolist()}; p = {_fmt(low)}): the bins "
                    f"are fixed, not drawn at random per record as {law} requires; its accounting does not apply.",
            fix="Draw each record's bin uniformly and independently (e.g. jax_privacy BallsInBinsSampling), or "
                "account for shuffled / fixed cyclic batches.", details=details)
    if high < tail:
        return ParticipationResult(
            check="balls-in-bins", violation=True, read=True,
            message=f"The bin sizes {observed.tolist()} vary more than uniform random bins allow (p = {_fmt(high)}): "
                    f"this is not {law}.",
            fix="Draw each record's bin uniformly and independently (e.g. jax_privacy BallsInBinsSampling).",
            details=details)
    return ParticipationResult(check="balls-in-bins", violation=False, read=True,
                               message=f"The batches are consistent with {law}.", details=details)


# ---------------------------------------------------------------------------------------------- b-min-sep

def _chain_count_pmfs(rate: float, min_sep: int, length: int) -> np.ndarray:
    """Row s: the law of a record's participations over ``length`` steps starting ``s`` steps ineligible."""
    out = np.zeros((min_sep, length + 1))
    for s0 in range(min_sep):
        dist = np.zeros((min_sep, length + 1))
        dist[s0, 0] = 1.0
        for _ in range(length):
            new = np.zeros_like(dist)
            new[0] += dist[0] * (1.0 - rate)
            new[min_sep - 1, 1:] += dist[0, :-1] * rate
            new[:-1] += dist[1:]
            dist = new
        out[s0] = dist.sum(axis=0)
    return out


def min_separation_check(batches: Sequence[ArrayLike], n: int, rate: float, min_sep: int, alpha: float,
                         seed: int) -> ParticipationResult:
    """Whether the batches follow b-min-sep sampling: Poisson at ``rate`` among the records not in the
    previous ``min_sep - 1`` steps.

    Fact (no alpha): no record twice in a batch or twice within ``min_sep`` steps. Test: the total
    participations of steps ``min_sep - 1 .. T - 1`` against its exact law given each record's state at
    step ``min_sep - 1`` (module docstring), two-sided at ``alpha`` (twice the smaller tail). The earlier
    steps are left out: the warm start's history before step 0 is not in the log. ``seed`` is unused
    (the law is exact); kept for one signature across the checks.
    Sources: docs/references.md, "Configuration checks".
    """
    alpha, rate, min_sep = _check_alpha(alpha), _check_rate(rate), _check_cycle(min_sep, "minimum separation")
    logs, duplicates = _batches(batches, n)
    steps, flat = _steps_and_records(logs)
    order = np.lexsort((steps, flat))
    rec, st = flat[order], steps[order]
    same = rec[1:] == rec[:-1]
    gaps = (st[1:] - st[:-1])[same]
    close = int(np.count_nonzero(gaps < min_sep))
    details: dict[str, Any] = {"n": int(n), "steps": len(logs), "rate": rate, "min_sep": min_sep, "alpha": alpha,
                               "duplicates": duplicates, "repeats_within_min_sep": close,
                               "smallest_gap": int(gaps.min()) if gaps.size else None}
    law = f"b-min-sep sampling (rate {_fmt(rate)}, min separation {min_sep})"
    if duplicates or close:
        what = ([f"{duplicates} records appear twice in one batch"] if duplicates else []) + (
            [f"{close} times a record takes part again within {min_sep} steps (smallest gap "
             f"{int(gaps.min())})"] if close else [])
        return ParticipationResult(
            check="min-separation", violation=True, read=True, fact=True,
            message=f"The batches break {law}: " + "; ".join(what) + ".",
            fix="Exclude from each step the records of the previous min_sep - 1 steps (e.g. jax_privacy "
                "BMinSepSampling), or account for the sampling the loop really uses.", details=details)
    start = min_sep - 1
    length = len(logs) - start
    if length <= 0:
        return ParticipationResult(check="min-separation", violation=False, read=False,
                                   message=f"Only {len(logs)} steps: the rate under {law} is testable from step "
                                           f"{start} on.", details=details)
    state = np.zeros(n, dtype=np.int64)
    for t in range(start):
        state[logs[t]] = t + 1  # ineligible for t + 1 more steps at step min_sep - 1
    pmfs = _chain_count_pmfs(rate, min_sep, length)
    law_pmf = np.ones(1)
    for s0, k in enumerate(np.bincount(state, minlength=min_sep)):
        if k:
            law_pmf = _convolve(law_pmf, _power(pmfs[s0][: np.flatnonzero(pmfs[s0] > 0).max() + 1], int(k)))
    observed = int(sum(b.size for b in logs[start:]))
    cdf = np.cumsum(law_pmf)
    low = float(cdf[observed]) if observed < cdf.size else 1.0
    high = float(law_pmf[observed:].sum()) if observed < law_pmf.size else 0.0
    p = min(1.0, 2.0 * min(low, high))
    expected = float(np.dot(np.arange(law_pmf.size), law_pmf))
    details.update(tested_steps=length, records=observed, expected_records=expected, p_value=p)
    if p < alpha:
        return ParticipationResult(
            check="min-separation", violation=True, read=True,
            message=f"{observed} records took part in steps {start}..{len(logs) - 1} where {law} expects about "
                    f"{_fmt(expected)} (p = {_fmt(p)}).",
            fix="Sample each eligible record by its own coin at the declared rate, or account for the rate the "
                "loop really uses.", details=details)
    return ParticipationResult(check="min-separation", violation=False, read=True,
                               message=f"The batches are consistent with {law}.", details=details)


# ---------------------------------------------------------------------------------------------- periodic

def _one_residue_prob(steps: int, cycle: int, count: np.ndarray) -> np.ndarray:
    """P[a uniform ``count``-subset of ``steps`` steps lies in one residue class mod ``cycle``]."""
    t_r = _class_sizes(steps, cycle)
    return np.array([sum(special.comb(int(t), int(k), exact=True) for t in t_r)
                     / special.comb(steps, int(k), exact=True) for k in count], dtype=np.float64)


def periodic_participation_check(batches: Sequence[ArrayLike], n: int, alpha: float, seed: int,
                                 cycles: Iterable[int] = range(2, 9)) -> ParticipationResult:
    """Under a declared plain Poisson law, whether records take part only every c-th step (cyclic Poisson or
    balls in bins accounted as Poisson).

    For each candidate c in ``cycles`` with fewer than T steps, ``A_c`` (records with two or more
    participations, all at one residue mod c) is tested against its exact law given the record counts
    (module docstring) at ``alpha / #candidates`` (Bonferroni). Fact: no record twice in a batch. Fewer
    steps than any candidate plus one: not read. ``seed`` is unused (the law is exact).
    Sources: docs/references.md, "Configuration checks".
    """
    alpha = _check_alpha(alpha)
    logs, duplicates = _batches(batches, n)
    steps = len(logs)
    candidates = sorted({_check_cycle(c, "candidate cycle") for c in cycles if c >= 2})
    testable = [c for c in candidates if c < steps]
    details: dict[str, Any] = {"n": int(n), "steps": steps, "alpha": alpha, "candidates": testable,
                               "duplicates": duplicates}
    if duplicates:
        return ParticipationResult(
            check="periodic-participation", violation=True, read=True, fact=True,
            message=f"{duplicates} records appear twice in one batch, which Poisson sampling never does.",
            fix="Sample each record by its own coin at every step (e.g. Opacus poisson_sampling=True).",
            details=details)
    if not testable:
        return ParticipationResult(check="periodic-participation", violation=False, read=False,
                                   message=f"Only {steps} steps: periodic participation is testable once a cycle "
                                           "has two steps of one residue.", details=details)
    step_idx, flat = _steps_and_records(logs)
    counts = np.bincount(flat, minlength=n)
    share = alpha / len(testable)
    per_cycle = {}
    flagged = []
    values, how_many = np.unique(counts[counts >= 2], return_counts=True)
    details["informative_records"] = int(how_many.sum())
    for c in testable:
        residue, multi = _residues(logs, n, c)
        observed = int(np.count_nonzero((counts >= 2) & ~multi))
        pmf = np.ones(1)
        for p_k, m in zip(_one_residue_prob(steps, c, values), how_many, strict=True):
            pmf = _convolve(pmf, stats.binom.pmf(np.arange(m + 1), m, min(1.0, p_k)))
        p = float(min(1.0, pmf[observed:].sum())) if observed < pmf.size else 0.0
        expected = float(np.dot(np.arange(pmf.size), pmf))
        per_cycle[str(c)] = {"one_residue_records": observed, "expected": expected, "p_value": p}
        if p < share:
            flagged.append(c)
    details.update(per_cycle=per_cycle, significance_per_cycle=share, flagged_cycles=flagged)
    if flagged:  # the cycle all informative records keep to (cycle 4 also keeps them on one residue mod 2)
        c = max(flagged, key=lambda k: (per_cycle[str(k)]["one_residue_records"], k))
        seen = per_cycle[str(c)]
        return ParticipationResult(
            check="periodic-participation", violation=True, read=True,
            message=f"{seen['one_residue_records']} of {details['informative_records']} records that took part "
                    f"twice or more did so only at steps of one residue mod {c} (Poisson sampling expects about "
                    f"{_fmt(seen['expected'])}, p = {_fmt(seen['p_value'])}): the loop samples cyclically, not "
                    "by Poisson coins at every step.",
            fix="Account for the participation the loop really uses (cyclic Poisson or balls in bins, e.g. with "
                "jax_privacy's accountant for that scheme), or let every record join every step by its own coin.",
            details=details)
    return ParticipationResult(check="periodic-participation", violation=False, read=True,
                               message="No periodic participation: records take part at steps spread as "
                                       "Poisson sampling spreads them.", details=details)


def cap_under_poisson_check(batches: Sequence[ArrayLike], n: int, alpha: float, seed: int) -> ParticipationResult:
    """Under a declared plain Poisson law, whether the batches are capped (truncated Poisson accounted as plain
    Poisson: the cap leaves out of the accounting what it does to a record's chance of joining).

    Given the total ``S`` of the T batch sizes, plain Poisson sampling makes the sizes multivariate
    hypergeometric (T urns of n cells, S drawn; :mod:`audit.stats.sampling_check`), whatever the rate. The
    statistic ``K``, the number of steps whose size equals the largest, is tested in its upper tail against
    ``B = MC_PER_LEVEL / alpha`` seeded draws of that law, p-value ``(1 + #{K_b >= K}) / (B + 1)`` (valid for any
    B): a loop that cuts every larger batch to a cap ``m`` puts many steps exactly at ``m``. Batches that all
    have one size are the sampling test's fixed-size finding, not a cap: read, not a violation here.
    Sources: docs/references.md, "Configuration checks".
    """
    alpha = _check_alpha(alpha)
    logs, _ = _batches(batches, n)
    sizes = np.array([b.size for b in logs], dtype=np.int64)
    steps, total = sizes.size, int(sizes.sum())
    details: dict[str, Any] = {"n": int(n), "steps": steps, "alpha": alpha}
    if steps < 3 or np.all(sizes == sizes[0]):
        why = (f"only {steps} steps" if steps < 3 else
               f"every batch holds {int(sizes[0])} records (the sampling test reads fixed-size batches)")
        return ParticipationResult(check="truncation", violation=False, read=True,
                                   message=f"No cap to test: {why}.", details=details)
    largest = int(sizes.max())
    observed = int(np.count_nonzero(sizes == largest))
    draws = _rng(seed, 61).multivariate_hypergeometric(np.full(steps, int(n)), total, size=_draws(alpha))
    at_max = (draws == draws.max(axis=1, keepdims=True)).sum(axis=1)
    p = float((1 + np.count_nonzero(at_max >= observed)) / (at_max.size + 1))
    details.update(largest=largest, steps_at_largest=observed, expected_at_largest=float(at_max.mean()), p_value=p,
                   draws=int(at_max.size))
    if p < alpha:
        return ParticipationResult(
            check="truncation", violation=True, read=True,
            message=f"{observed} of {steps} batches hold exactly {largest} records, the largest, where Poisson "
                    f"sampling with these totals puts about {_fmt(details['expected_at_largest'])} at its largest "
                    f"(p = {_fmt(p)}): the loop caps its batches at {largest} (truncated Poisson sampling), and the "
                    "accountant of plain Poisson sampling does not cover the cap.",
            fix=f"declare the cap (a truncated Poisson participation with cap {largest}, e.g. jax_privacy's "
                f"CyclicPoissonSampling(truncated_batch_size={largest}) as the plugin's 'mechanism') and claim its "
                "epsilon, or let every record join every step by its own coin with no cap",
            details=details)
    return ParticipationResult(check="truncation", violation=False, read=True,
                               message=f"No cap: {observed} of {steps} batches at the largest size {largest}, as "
                                       "Poisson sampling puts them.", details=details)
