"""The participation checks (audit.stats.participation_check) against jax_privacy's declared laws: correct
draws (own numpy simulators, and jax_privacy's samplers where installed) are flagged at most at the check's
alpha (Monte Carlo at T 2, 40, 200 and rates 0.01 and 0.95, fixed seeds, bound by the 0.999 quantile of
Binomial(R, alpha)); the facts and the mistakes (shuffled or fixed-size groups, no truncation, a fixed size
of the cap, equal bins, cyclic loops accounted as Poisson) are caught; cycle 1 is today's Poisson test."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from helpers import max_exceedances
from scipy import special, stats

from audit.errors import UserError
from audit.stats import participation_check as pc
from audit.stats.participation_check import (
    balls_in_bins_check,
    cap_under_poisson_check,
    cyclic_poisson_check,
    min_separation_check,
    periodic_participation_check,
)
from audit.stats.sampling_check import rate_test, sampling_from_batches

#: The checks' whole alpha in the Monte-Carlo of false violations (large, so that the bound is informative).
ALPHA = 0.1


# ------------------------------------------------------------------------------ simulators (independent of the code)

def _groups(rng: np.random.Generator, n: int, cycle: int, partition: str) -> list[np.ndarray]:
    if partition == "independent":
        bins = rng.integers(cycle, size=n)
        return [np.flatnonzero(bins == r) for r in range(cycle)]
    perm, m = rng.permutation(n), n // cycle
    return [np.sort(perm[r * m:(r + 1) * m]) for r in range(cycle)]


def _cyclic(rng: np.random.Generator, n: int, q: float, steps: int, cycle: int = 1, partition: str = "independent",
            cap: int | None = None, groups: list[np.ndarray] | None = None) -> list[np.ndarray]:
    groups = _groups(rng, n, cycle, partition) if groups is None else groups
    out = []
    for t in range(steps):
        group = groups[t % cycle]
        chosen = group[rng.random(group.size) < q]
        if cap is not None and chosen.size > cap:
            chosen = rng.choice(chosen, cap, replace=False)
        out.append(chosen)
    return out


def _balls_in_bins(rng: np.random.Generator, n: int, steps: int, cycle: int) -> list[np.ndarray]:
    bins = rng.integers(cycle, size=n)
    return [np.flatnonzero(bins == t % cycle) for t in range(steps)]


def _min_sep(rng: np.random.Generator, n: int, q: float, steps: int, sep: int, burn: int) -> list[np.ndarray]:
    wait = np.zeros(n, dtype=np.int64)
    out = []
    for _ in range(burn + steps):
        chosen = (wait == 0) & (rng.random(n) < q)
        wait = np.maximum(wait - 1, 0)
        wait[chosen] = sep - 1
        out.append(np.flatnonzero(chosen))
    return out[burn:]


def _shuffled_groups(rng: np.random.Generator, n: int, q: float, steps: int, cycle: int,
                     partition: str = "independent") -> list[np.ndarray]:
    """The shuffling mistake: each group walked in shuffled batches of its expected size (once per pass)."""
    groups = _groups(rng, n, cycle, partition)
    queues = [[] for _ in groups]
    out = []
    for t in range(steps):
        g = t % cycle
        size = max(1, round(q * groups[g].size))
        if len(queues[g]) < size:
            queues[g] = list(rng.permutation(groups[g]))
        out.append(np.array(queues[g][:size]))
        queues[g] = queues[g][size:]
    return out


def _fixed_size(rng: np.random.Generator, n: int, size: int, steps: int, cycle: int = 1,
                partition: str = "independent") -> list[np.ndarray]:
    """The fixed-size mistake: a uniform subset of one size at every step of each group."""
    groups = _groups(rng, n, cycle, partition)
    return [rng.choice(groups[t % cycle], min(size, groups[t % cycle].size), replace=False) for t in range(steps)]


# ------------------------------------------------------------------------------ cyclic Poisson

@pytest.mark.parametrize(("steps", "q", "reps"), [(2, 0.01, 40), (2, 0.95, 40), (40, 0.01, 40), (40, 0.95, 40),
                                                  (200, 0.01, 20), (200, 0.95, 20)])
def test_cyclic_poisson_is_flagged_at_most_at_alpha(steps, q, reps):
    """Both partition types, cycles 1 and 3 (n = 40: a remainder for the equal split), with and without a cap
    near the mean: every check a correct log, the false violations bounded by Binomial(R, alpha)'s 0.999 quantile."""
    rng = np.random.default_rng(1000 + steps + int(100 * q))
    flagged = tried = 0
    for rep in range(reps):
        cycle = (1, 3)[rep % 2]
        partition = pc.PARTITIONS[(rep // 2) % 2]
        n = 40
        cap = None if rep % 4 < 2 else max(1, round(q * n / cycle))
        log = _cyclic(rng, n, q, steps, cycle, partition, cap)
        result = cyclic_poisson_check(log, n, q, cycle, ALPHA, seed=rep, cap=cap)
        flagged += result.violation
        tried += 1
    assert flagged <= max_exceedances(tried, ALPHA), flagged


def test_cycle_one_gives_todays_poisson_verdicts():
    """Cycle 1 without a cap: violation exactly when sampling_from_batches (alpha/8 per tail) reads anything but
    Poisson or rate_test (alpha/2) rejects, on correct, shuffled, fixed-size and wrong-rate logs."""
    rng = np.random.default_rng(7)
    alpha, seen = 0.05, set()
    for rep in range(24):
        n, steps = 60, (2, 12, 30)[rep % 3]
        kind = rep % 4
        log = (_cyclic(rng, n, 0.2, steps) if kind == 0 else _shuffled_groups(rng, n, 0.2, steps, 1) if kind == 1
               else _fixed_size(rng, n, 12, steps) if kind == 2 else _cyclic(rng, n, 0.3, steps))
        result = cyclic_poisson_check(log, n, 0.2, 1, alpha, seed=rep)
        evidence = sampling_from_batches(log, n, significance=alpha / 8, seed=rep)
        today = evidence.verdict not in ("poisson", "full-batch", "inconclusive") or rate_test(log, n, 0.2,
                                                                                              alpha / 2)["rejected"]
        assert result.violation == today, (rep, result.details)
        seen.add(today)
    assert seen == {True, False}


def test_cyclic_facts_are_violations():
    rng = np.random.default_rng(3)
    log = _cyclic(rng, 200, 0.3, 20, 4)
    moved = [b.copy() for b in log]
    moved[1] = np.append(moved[1], log[0][0])  # a record of group 0 at a step of group 1
    result = cyclic_poisson_check(moved, 200, 0.3, 4, 0.05, seed=0)
    assert result.violation and "outside their cycle group" in result.message and result.fix
    twice = [b.copy() for b in log]
    twice[0] = np.append(twice[0], twice[0][:1])
    assert cyclic_poisson_check(twice, 200, 0.3, 4, 0.05, seed=0).details["duplicates"] == 1
    over = cyclic_poisson_check(_cyclic(rng, 200, 0.3, 20, 4), 200, 0.3, 4, 0.05, seed=0, cap=5)
    assert over.violation and over.details["batches_over_cap"] > 0
    groups = _groups(rng, 200, 4, "independent")
    log = _cyclic(rng, 200, 0.3, 20, 4, groups=groups)
    assert not cyclic_poisson_check(log, 200, 0.3, 4, 0.05, seed=0, partition=groups).violation
    swapped = [groups[1], groups[0], groups[2], groups[3]]
    assert cyclic_poisson_check(log, 200, 0.3, 4, 0.05, seed=0, partition=swapped).violation
    # an equal split cannot hold more than n // cycle records in a group
    crowded = [np.arange(60), np.arange(60, 80)]
    assert cyclic_poisson_check(crowded, 100, 0.5, 2, 0.05, seed=0, partition="equal_split").violation
    assert cyclic_poisson_check(crowded, 100, 0.5, 2, 0.05, seed=0).details["partitions"] == ["independent"]


@pytest.mark.parametrize("partition", ["independent", "equal_split", None])
def test_cyclic_mistakes_are_caught(partition):
    """n 400, q 0.2, cycle 4, T 40: shuffled groups, fixed sizes and rate 0.27 against 0.2, three seeds each."""
    drawn = partition or "equal_split"
    for seed in range(3):
        rng = np.random.default_rng(seed)
        for log, what in ((_shuffled_groups(rng, 400, 0.2, 40, 4, drawn), "shuffled"),
                          (_fixed_size(rng, 400, 20, 40, 4, drawn), "fixed-size"),
                          (_cyclic(rng, 400, 0.27, 40, 4, drawn), "rate")):
            result = cyclic_poisson_check(log, 400, 0.2, 4, 0.05, seed=seed, partition=partition)
            assert result.violation and result.fix, (what, result.details)
            if what != "rate":
                assert result.details["dispersion"]["verdict"] in ("shuffled", "fixed-size"), what
            else:
                assert result.details["rate_test"]["rejected"]


def test_the_rate_law_with_a_partial_cycle_is_exact():
    """INDEPENDENT groups, T = 6, cycle 4: the records drawn are Bin(n k, q) + Bin(n, q r / c) (k = 1, r = 2);
    the law's mean and variance match a simulation (20,000 draws), and the p-value of the mode is large."""
    rng = np.random.default_rng(5)
    n, q, steps, cycle = 30, 0.4, 6, 4
    totals = np.array([sum(b.size for b in _cyclic(rng, n, q, steps, cycle)) for _ in range(20000)])
    mean, var = n * q + n * q * 2 / 4, n * q * (1 - q) + n * q / 2 * (1 - q / 2)
    assert totals.mean() == pytest.approx(mean, abs=4 * np.sqrt(var / 20000))
    assert totals.var() == pytest.approx(var, rel=0.05)
    law = pc._Law(n=n, rate=q, cycle=cycle, possible=("independent",), groups=None)
    mode = [np.arange(int(round(mean)))] + [np.zeros(0, np.int64)] * (steps - 1)
    assert pc._cyclic_rate(mode, law, 0.05)["p_value"] > 0.5


def test_truncation_mistakes_are_caught():
    """n 1000, q 0.05, T 100, cap 62 (expected size 50 + 1.75 sd): a loop that never truncates is caught exactly
    when a Poisson draw exceeded the cap (no test can do better: otherwise its log is a correct one), which has
    probability 1 - (1 - P[Bin(1000, 0.05) > 62])^100 >= 95%; a fixed size of the cap is caught always."""
    n, q, steps, cap = 1000, 0.05, 100, 62
    assert 1 - stats.binom.cdf(cap, n, q) ** steps >= 0.95
    caught = 0
    for seed in range(8):
        rng = np.random.default_rng(100 + seed)
        log = _cyclic(rng, n, q, steps)
        result = cyclic_poisson_check(log, n, q, 1, 0.05, seed=seed, cap=cap)
        assert result.violation == any(b.size > cap for b in log), result.details
        caught += result.violation
        fixed = _fixed_size(rng, n, cap, steps)
        result = cyclic_poisson_check(fixed, n, q, 1, 0.05, seed=seed, cap=cap)
        assert result.violation and result.details["truncation"]["total_p_high"] < 0.05 / 16, result.details
        fixed_mean = _fixed_size(rng, n, 50, steps, 4)  # fixed size at the mean, cycle 4, unknown partition
        assert cyclic_poisson_check(fixed_mean, n, q * 4, 4, 0.05, seed=seed, cap=cap).violation
    assert caught >= 5


def test_truncated_count_law_given_sizes_matches_enumeration():
    """The record counts given the sizes (uniform subsets per step): sum c_i^2's law by enumeration at m 4,
    sizes (2, 1, 3) against 40,000 draws of the histogram sampler."""
    m, sizes = 4, np.array([2, 1, 3])
    exact: dict[int, float] = {}
    subsets = [list(itertools.combinations(range(m), s)) for s in sizes]
    for pick in itertools.product(*subsets):
        counts = np.bincount(np.concatenate([np.array(p, dtype=np.int64) for p in pick]), minlength=m)
        key = int(counts @ counts)
        exact[key] = exact.get(key, 0.0) + 1.0 / np.prod([len(s) for s in subsets])
    draws = pc._sq_counts_given_sizes(m, sizes, 40000, np.random.default_rng(0))
    for key, p in exact.items():
        assert np.mean(draws == key) == pytest.approx(p, abs=4 * np.sqrt(p * (1 - p) / 40000) + 1e-3)
    assert set(np.unique(draws)) <= set(exact)


# ------------------------------------------------------------------------------ balls in bins

@pytest.mark.parametrize(("steps", "reps"), [(2, 60), (40, 60), (200, 30)])
def test_balls_in_bins_is_flagged_at_most_at_alpha(steps, reps):
    rng = np.random.default_rng(2000 + steps)
    flagged = 0
    for rep in range(reps):
        n, cycle = (10, 37, 300)[rep % 3], (4, 3, 7)[rep % 3]
        flagged += balls_in_bins_check(_balls_in_bins(rng, n, steps, cycle), n, cycle, ALPHA, seed=rep).violation
    assert flagged <= max_exceedances(reps, ALPHA), flagged


def test_balls_in_bins_facts_and_equal_bins():
    rng = np.random.default_rng(4)
    log = _balls_in_bins(rng, 400, 20, 4)
    missing = [b.copy() for b in log]
    missing[5] = missing[5][1:]
    assert "miss some steps" in balls_in_bins_check(missing, 400, 4, 0.05, 0).message
    moved = [b.copy() for b in log]
    moved[2] = np.append(moved[2], log[1][0])
    assert "two or more residues" in balls_in_bins_check(moved, 400, 4, 0.05, 0).message
    lost = [b[b != 0] for b in log]
    assert balls_in_bins_check(lost, 400, 4, 0.05, 0).details["records_never_seen"] == 1
    # equal bins: a shuffle cut into equal parts (n divisible and not), and a fixed cyclic order
    for n in (400, 403):
        perm = rng.permutation(n)
        equal = [np.sort(perm[t % 4::4]) for t in range(20)]
        result = balls_in_bins_check(equal, n, 4, 0.05, 0)
        assert result.violation and "nearly equal" in result.message, result.details
    cyclic_order = [np.arange(t % 4, 400, 4) for t in range(20)]
    assert balls_in_bins_check(cyclic_order, 400, 4, 0.05, 0).violation
    # T < cycle: the unseen records are the bins without a step
    assert not balls_in_bins_check(_balls_in_bins(rng, 400, 2, 4), 400, 4, 0.05, 0).violation


# ------------------------------------------------------------------------------ b-min-sep

@pytest.mark.parametrize(("steps", "q", "reps"), [(2, 0.01, 40), (2, 0.95, 40), (40, 0.01, 40), (40, 0.95, 40),
                                                  (200, 0.01, 30), (200, 0.95, 30)])
def test_min_separation_is_flagged_at_most_at_alpha(steps, q, reps):
    rng = np.random.default_rng(3000 + steps + int(100 * q))
    flagged = 0
    for rep in range(reps):
        sep = (1, 2, 4)[rep % 3]
        log = _min_sep(rng, 50, q, steps, sep, burn=(0, 10)[rep % 2])
        flagged += min_separation_check(log, 50, q, sep, ALPHA, seed=rep).violation
    assert flagged <= max_exceedances(reps, ALPHA), flagged


def test_min_separation_chain_law_matches_enumeration():
    """One record, T 6 after the state, sep 3: the count's law by enumerating the 2^6 coin sequences."""
    q, sep, length = 0.3, 3, 6
    for state in range(sep):
        law = np.zeros(length + 1)
        for coins in itertools.product((0, 1), repeat=length):
            wait, count, prob = state, 0, 1.0
            for c in coins:
                if wait == 0:
                    prob *= q if c else 1 - q
                    if c:
                        count, wait = count + 1, sep - 1
                else:
                    prob *= 1.0 if c == 0 else 0.0
                    wait -= 1
            law[count] += prob
        assert pc._chain_count_pmfs(q, sep, length)[state] == pytest.approx(law, abs=1e-12)


def test_min_separation_mistakes_are_caught():
    rng = np.random.default_rng(6)
    poisson = _cyclic(rng, 500, 0.2, 40)
    result = min_separation_check(poisson, 500, 0.2, 4, 0.05, 0)
    assert result.violation and result.details["repeats_within_min_sep"] > 0
    assert min_separation_check(_min_sep(rng, 500, 0.3, 100, 4, 20), 500, 0.2, 4, 0.05, 0).violation
    # cyclic Poisson with cycle = sep meets the separation but not the rate of b-min-sep
    assert min_separation_check(_cyclic(rng, 500, 0.2, 100, 4), 500, 0.2, 4, 0.05, 0).violation
    sep1 = min_separation_check(poisson, 500, 0.2, 1, 0.05, 0)  # sep 1 is plain Poisson: Bin(n T, q)
    assert sep1.details["p_value"] == pytest.approx(
        min(1.0, 2 * min(stats.binom.cdf(sep1.details["records"], 500 * 40, 0.2),
                         stats.binom.sf(sep1.details["records"] - 1, 500 * 40, 0.2))), rel=1e-6)


# ------------------------------------------------------------------------------ periodic participation

@pytest.mark.parametrize(("steps", "q", "reps"), [(2, 0.5, 5), (40, 0.01, 40), (40, 0.95, 40), (200, 0.01, 20),
                                                  (200, 0.95, 20), (40, 0.3, 40)])
def test_periodic_check_keeps_its_level_under_poisson(steps, q, reps):
    rng = np.random.default_rng(4000 + steps + int(100 * q))
    flagged = 0
    for rep in range(reps):
        result = periodic_participation_check(_cyclic(rng, 60, q, steps), 60, ALPHA, seed=rep)
        assert result.read == (steps > 2)
        flagged += result.violation
    assert flagged <= max_exceedances(reps, ALPHA), flagged


@pytest.mark.parametrize("steps", [40, 200])
def test_periodic_check_catches_cyclic_and_balls_in_bins(steps):
    """Cycle 4 at rate 0.5 per eligible step (marginal 0.125), n 500: 20 seeds each, power >= 95% asked; and
    balls in bins (cycle 4 and cycle 10 = 2 x 5) accounted as Poisson."""
    caught = 0
    for seed in range(20):
        rng = np.random.default_rng(seed)
        caught += periodic_participation_check(_cyclic(rng, 500, 0.5, steps, 4), 500, 0.05, seed).violation
    assert caught >= 19
    rng = np.random.default_rng(1)
    for cycle in (4, 10):
        result = periodic_participation_check(_balls_in_bins(rng, 500, steps, cycle), 500, 0.05, 0)
        assert result.violation and "one residue" in result.message


def test_periodic_check_names_the_cycle_the_records_keep_to():
    """Cycle 4 also keeps every record on one residue mod 2 (and half of them mod 8): the finding names 4."""
    result = periodic_participation_check(_cyclic(np.random.default_rng(3), 300, 0.4, 40, 4), 300, 0.05, 0)
    assert result.violation and "one residue mod 4" in result.message


# ------------------------------------------------------------------------------ a cap under declared Poisson

@pytest.mark.parametrize(("steps", "q", "reps"), [(3, 0.5, 40), (40, 0.01, 40), (40, 0.95, 40), (200, 0.1, 20)])
def test_cap_check_keeps_its_level_under_poisson(steps, q, reps):
    rng = np.random.default_rng(5000 + steps + int(100 * q))
    flagged = sum(cap_under_poisson_check(_cyclic(rng, 60, q, steps), 60, ALPHA, seed=rep).violation
                  for rep in range(reps))
    assert flagged <= max_exceedances(reps, ALPHA), flagged


def test_cap_check_catches_truncation_and_leaves_fixed_size_batches_to_the_sampling_test():
    """Poisson at 0.1 over 300 records cut to 30 (half the batches): caught at 40 and 200 steps over 10 seeds each;
    batches of one size are not called a cap (the sampling test's fixed-size finding names them)."""
    for steps in (40, 200):
        caught = 0
        for seed in range(10):
            rng = np.random.default_rng(seed)
            capped = [b if b.size <= 30 else rng.choice(b, 30, replace=False) for b in _cyclic(rng, 300, 0.1, steps)]
            found = cap_under_poisson_check(capped, 300, 0.025, seed)
            caught += found.violation
        assert caught == 10 and "caps its batches at 30" in found.message and "truncated_batch_size=30" in found.fix
    fixed = cap_under_poisson_check(_fixed_size(np.random.default_rng(0), 300, 30, 40), 300, 0.025, 0)
    assert fixed.read and not fixed.violation and "fixed-size" in fixed.message


def test_one_residue_probability_matches_enumeration():
    for steps, cycle, k in ((7, 3, 2), (9, 4, 3), (10, 2, 4)):
        hits = sum(len({t % cycle for t in s}) == 1 for s in itertools.combinations(range(steps), k))
        assert pc._one_residue_prob(steps, cycle, np.array([k]))[0] == pytest.approx(hits / special.comb(steps, k))


# ------------------------------------------------------------------------------ jax_privacy's samplers, output, errors

def test_jax_privacy_samplers_pass():
    batch_selection = pytest.importorskip("jax_privacy.batch_selection")
    for seed in range(3):
        rng = np.random.default_rng(seed)
        for partition in (batch_selection.PartitionType.INDEPENDENT, batch_selection.PartitionType.EQUAL_SPLIT):
            sampler = batch_selection.CyclicPoissonSampling(0.2, 40, cycle_length=4, partition_type=partition)
            assert not cyclic_poisson_check(list(sampler.batch_iterator(301, rng=rng)), 301, 0.2, 4, 0.01,
                                            seed).violation
            sampler = batch_selection.CyclicPoissonSampling(0.2, 40, truncated_batch_size=16, cycle_length=4,
                                                            partition_type=partition)
            assert not cyclic_poisson_check(list(sampler.batch_iterator(301, rng=rng)), 301, 0.2, 4, 0.01, seed,
                                            cap=16).violation
        log = list(batch_selection.BallsInBinsSampling(30, 4).batch_iterator(301, rng=rng))
        assert not balls_in_bins_check(log, 301, 4, 0.01, seed).violation
        assert periodic_participation_check(log, 301, 0.01, seed).violation
        log = list(batch_selection.BMinSepSampling(0.3, 60, 3).batch_iterator(301, rng=rng))
        assert not min_separation_check(log, 301, 0.3, 3, 0.01, seed).violation


def test_results_are_json_and_inputs_are_checked():
    rng = np.random.default_rng(0)
    log = _cyclic(rng, 50, 0.3, 8, 2)
    for result in (cyclic_poisson_check(log, 50, 0.3, 2, 0.05, 0), cyclic_poisson_check(log, 50, 0.3, 2, 0.05, 0,
                                                                                          cap=20),
                   balls_in_bins_check(_balls_in_bins(rng, 50, 8, 2), 50, 2, 0.05, 0),
                   min_separation_check(log, 50, 0.3, 2, 0.05, 0), periodic_participation_check(log, 50, 0.05, 0)):
        d = json.loads(json.dumps(result.to_dict(), allow_nan=False))
        assert d["violation"] == result.violation and isinstance(result.message, str)
        assert (result.fix == "") == (not result.violation)
    assert cyclic_poisson_check(log, 50, 0.3, 2, 0.05, 0) == cyclic_poisson_check(log, 50, 0.3, 2, 0.05, 0)
    assert not cyclic_poisson_check([], 50, 0.3, 2, 0.05, 0).read
    assert not min_separation_check(log[:1], 50, 0.3, 3, 0.05, 0).read
    for call in (lambda: cyclic_poisson_check(log, 50, 0.0, 2, 0.05, 0),
                 lambda: cyclic_poisson_check(log, 50, 0.3, 0, 0.05, 0),
                 lambda: cyclic_poisson_check(log, 50, 0.3, 2, 1.5, 0),
                 lambda: cyclic_poisson_check(log, 10, 0.3, 2, 0.05, 0),
                 lambda: cyclic_poisson_check(log, 50, 0.3, 2, 0.05, 0, partition="random"),
                 lambda: cyclic_poisson_check(log, 50, 0.3, 2, 0.05, 0, partition=[np.arange(10)])):
        with pytest.raises(UserError):
            call()
