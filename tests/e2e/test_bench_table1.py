"""Mahloujifar et al.'s Table 1 at CI size (benchmarks/bench_table1.py): the idealized Gaussian game at
sigma 1 with 4,000 canaries. Each estimator's figure must lie where the maths puts it: with the chosen
guesses, the number right is close to its expectation under the Gaussian pair, so the figure lies
between the estimator's bound at that expectation minus and plus 5 standard deviations."""

from __future__ import annotations

import math
import sys

from helpers import ROOT
from scipy import optimize, stats

sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_table1 import METHODS, main  # noqa: E402

from audit.stats.one_run.design import guess_bound  # noqa: E402


def expected_right(m: int, k_pos: int, k_neg: int, mu: float) -> tuple[float, float]:
    """Mean and a standard deviation bound of the right guesses among the top ``k_pos`` ("in") and bottom
    ``k_neg`` ("out") of m fair-coin canaries observed as N(mu b, 1) (b the coin). The top k lie above the
    threshold t with P[score > t] = k/m, of which a fraction ``p = P[b = 1 | score > t]`` are in; the
    Gaussian pair is a mirror image, so the bottom k are out with the same p. Right guesses are a sum of
    K = k_pos + k_neg indicators with probability p: sd at most sqrt(K)/2 each side, doubled for the
    randomness of the threshold itself."""
    def precision(k: int) -> float:
        if k == 0:
            return 0.0
        t = optimize.brentq(lambda x: 0.5 * (stats.norm.sf(x - mu) + stats.norm.sf(x)) - k / m, -20, 20)
        return 0.5 * stats.norm.sf(t - mu) / (k / m)

    mean = k_pos * precision(k_pos) + k_neg * precision(k_neg)
    return mean, math.sqrt(k_pos + k_neg)


def test_table1_at_ci_size(tmp_path):
    out = main(["--json", str(tmp_path / "t1.json"), "--canaries", "4000", "--sigmas", "1", "--games", "2",
                "--design-games", "2", "--grid-points", "12"])
    rows = {r["method"]: r for r in out["rows"]}
    assert set(rows) == set(METHODS) and (tmp_path / "t1.json").exists()
    for method, r in rows.items():
        assert r["k_neg"] in (0, r["k_pos"]) and r["paper"] is not None
        mean, sd = expected_right(4000, r["k_pos"], r["k_neg"], 1.0)
        guesses = r["k_pos"] + r["k_neg"]
        lo = guess_bound(method, guesses, max(0, math.floor(mean - 5 * sd)), 4000, 1e-5, 0.95)
        hi = guess_bound(method, guesses, min(guesses, math.ceil(mean + 5 * sd)), 4000, 1e-5, 0.95)
        assert lo <= r["mean"] <= hi, (method, lo, r["mean"], hi)
        assert r["mean"] <= r["hindsight_mean"] + 1e-12 and r["mean"] <= r["ceiling"]
    # the valid bounds stay below the mechanism's true epsilon (4.38); each is a 95% bound
    assert rows["steinke"]["mean"] <= rows["steinke"]["true_epsilon"]
    assert rows["fdp"]["mean"] <= rows["fdp"]["true_epsilon"]
