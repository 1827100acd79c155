"""More canaries than parameters: does the one-run bound's growth with M survive the cross-talk of random
directions? A simulation of the claimed DP-SGD, before any code.

``dpsgd_mnist`` at epsilon 8 (Poisson rate q = 0.1707, T = 88 steps, noise multiplier calibrated by the
PLD accountant at delta 1e-5, P = 26,010 parameters). Up to P canaries are Dirac (one coordinate each:
the observation is exactly ``b_t + N(0, sigma^2)``). Beyond P they must be random unit directions, and
each canary's projection then also carries ``sum_{j != i} b_j <d_i, d_j>``: about q M / 2 included
canaries a step, each overlapping by a variance of 1/P, i.e. an extra variance ``q (M - 1) / (2 P)``
(:func:`targets.gradient_canaries.crosstalk_variance`), modelled as Gaussian noise added to sigma^2.
"ideal" rows drop the cross-talk (what M canaries would give if they were orthogonal). Per row:
``--games`` games simulated exactly (:func:`audit.stats.one_run.design.simulate_dpsgd_canary_scores`,
the likelihood-ratio score), the valid f-DP (eps, delta) bound at every one- and two-sided guess shape
of the design's grid, and the best shape's mean (chosen on the same games: optimistic by the same
small amount for every M, so the rows compare). Usage: ``python benchmarks/bench_one_run_canary_count.py
[--json benchmarks/results_one_run_canary_count.json] [--games 24]``. Sources: docs/references.md,
"One-run auditing".
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from audit.io import write_json  # noqa: E402
from audit.run_context import host_info, utc_now  # noqa: E402
from audit.stats.one_run.design import grid_bounds, guess_shapes, simulate_dpsgd_canary_scores  # noqa: E402
from audit.theory.dpsgd import calibrate_noise_multiplier  # noqa: E402
from targets.gradient_canaries import crosstalk_variance  # noqa: E402

SAMPLE_RATE, STEPS, PARAMS, EPSILON, DELTA = 0.1707, 88, 26_010, 8.0, 1e-5
ROWS = ((20_000, "dirac"), (26_010, "dirac"), (50_000, "ideal"), (50_000, "random"), (100_000, "ideal"),
        (100_000, "random"))


def measure(m: int, kind: str, sigma: float, games: int, seed: int) -> dict:
    """Best one- and two-sided mean bound over ``games`` simulated games with M = m canaries of ``kind``."""
    t0 = time.perf_counter()
    crosstalk = crosstalk_variance(m, PARAMS, SAMPLE_RATE) if kind == "random" else 0.0
    s_eff = math.sqrt(sigma ** 2 + crosstalk)
    shapes = guess_shapes(m, "fdp", None)
    rng = np.random.default_rng([seed, m])
    table = np.array([grid_bounds(*simulate_dpsgd_canary_scores(m, SAMPLE_RATE, s_eff, STEPS, rng), shapes, "fdp",
                                  DELTA, 0.95) for _ in range(games)])
    mean = table.mean(axis=0)
    row = {"canaries": m, "directions": kind, "crosstalk_variance": crosstalk, "sigma_eff": s_eff, "games": games}
    sides = (("one_sided", [k_neg == 0 for _, k_neg in shapes]), ("two_sided", [k_neg > 0 for _, k_neg in shapes]))
    for side, keep in sides:
        j = int(np.argmax(np.where(keep, mean, -np.inf)))
        row[side] = {"k_pos": shapes[j][0], "k_neg": shapes[j][1], "mean": float(mean[j]),
                     "sd": float(table[:, j].std(ddof=1)), "se": float(table[:, j].std(ddof=1) / math.sqrt(games))}
    row["wall_s"] = time.perf_counter() - t0
    return row


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--json", default=str(ROOT / "benchmarks" / "results_one_run_canary_count.json"))
    p.add_argument("--games", type=int, default=24)
    p.add_argument("--seed", type=int, default=11)
    args = p.parse_args(argv)
    sigma = float(calibrate_noise_multiplier(EPSILON, DELTA, SAMPLE_RATE, STEPS))
    rows = []
    for m, kind in ROWS:
        rows.append(measure(m, kind, sigma, args.games, args.seed))
        r = rows[-1]
        print(f"M {m:7d} {kind:6s} sigma_eff {r['sigma_eff']:.3f}: one-sided {r['one_sided']['mean']:.2f} "
              f"(k {r['one_sided']['k_pos']}), two-sided {r['two_sided']['mean']:.2f}  {r['wall_s']:.0f} s", flush=True)
    out = {"benchmark": "bench_one_run_canary_count", "when": utc_now(), "host": host_info(), "epsilon": EPSILON,
           "delta": DELTA, "sample_rate": SAMPLE_RATE, "steps": STEPS, "params": PARAMS, "noise_multiplier": sigma,
           "seed": args.seed, "rows": rows}
    write_json(Path(args.json), out)
    return out


if __name__ == "__main__":
    main()
