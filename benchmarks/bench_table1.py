"""Mahloujifar, Melis, Chaudhuri 2025, Table 1, reproduced with the workbench's one-run estimators.

The idealized setting of their Table 1: a Gaussian mechanism, ``--canaries`` canaries (10^5), each
in by a fair coin, the observation of canary i is its score ``b_i + N(0, sigma^2)`` (``b_i`` its coin;
mu = 1 / sigma), 95% confidence, delta 1e-5, sigma 0.5 / 1 / 2 (true epsilon 9.99 / 4.38 / 1.99).
Three estimators, each with its own guess shape, chosen as the workbench's design chooses it
(:func:`audit.stats.one_run.design.choose_one_run_design`: one-sided ``(k, 0)`` or two-sided ``(k, k)``
on a geometric grid of k, the largest mean bound over ``--design-games`` games simulated under the
mechanism, never the audited game): ``steinke`` (Steinke, Nasr, Jagielski 2023, valid), ``fdp`` (the
f-DP recursion with the f_{eps,delta} null, valid) and ``fdp-gdp`` (the largest mu-GDP null the
recursion rejects, read as epsilon at delta: the Gaussian family, an estimate). Each is evaluated on
``--games`` separate games (mean, sd): the expected figure of one audit. ``hindsight`` is the mean over
the same evaluation games of the best shape of the grid picked per game with the game's own coins —
not a valid procedure, shown only to tell whether a published figure rests on it. ``one_sided`` is the
best one-sided shape on the design games, evaluated on the same games as the design's choice. Steinke et al.'s
p-value is slow at 10^5 canaries (a binomial tail per candidate epsilon over thousands of guesses),
so its cells use at most :data:`STEINKE_GAMES` games of each kind; its figures vary little. The mechanism here
(q = 1, T = 1) is :func:`audit.stats.one_run.design.simulate_dpsgd_canary_scores`, whose likelihood
ratio ``(2 o - 1) / (2 sigma^2)`` orders the canaries exactly as the observation does.

Usage: ``python benchmarks/bench_table1.py [--json benchmarks/results_table1.json] [--canaries 100000]
[--games 24] [--design-games 16]``. Sources: docs/references.md, "One-run auditing".
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from audit.io import write_json  # noqa: E402
from audit.run_context import host_info, utc_now  # noqa: E402
from audit.stats.one_run.design import (  # noqa: E402
    CanaryMechanism,
    DesignObjective,
    choose_one_run_design,
    grid_bounds,
    simulate_dpsgd_canary_scores,
)
from audit.theory.gaussian import gaussian_epsilon  # noqa: E402

#: The paper's Table 1 (their Steinke et al. / "pointwise" f-DP / f-DP columns; None: no figure).
PAPER = {0.5: {"steinke": 4.99, "fdp": 5.01, "fdp-gdp": 8.16},
         1.0: {"steinke": 2.61, "fdp": 2.71, "fdp-gdp": 3.61},
         2.0: {"steinke": 1.33, "fdp": None, "fdp-gdp": 1.59}}
METHODS = ("steinke", "fdp", "fdp-gdp")
#: At most this many (design, evaluation) games for Steinke et al.'s cells.
STEINKE_GAMES = (4, 8)


def measure(sigma: float, method: str, args: argparse.Namespace) -> dict:
    """One cell: the design's shape for ``method`` at ``sigma`` and its bound on separate games."""
    t0 = time.perf_counter()
    mech = CanaryMechanism(1.0, sigma, 1)
    design_games, eval_games = ((min(args.design_games, STEINKE_GAMES[0]), min(args.games, STEINKE_GAMES[1]))
                                if method == "steinke" else (args.design_games, args.games))
    grid = np.unique(np.round(np.geomspace(1, args.canaries // 2, args.grid_points)).astype(int))
    objective = DesignObjective(delta=args.delta, confidence=args.confidence, method=method)
    d = choose_one_run_design(mech, args.canaries, objective, [args.seed, int(100 * sigma)],
                              simulations=design_games, evaluations=eval_games, guess_counts=grid)
    audited = np.random.default_rng([args.seed, int(100 * sigma), 1])  # the "audited" games: a fresh stream
    games = [simulate_dpsgd_canary_scores(args.canaries, 1.0, sigma, 1, audited) for _ in range(eval_games)]
    one = max((g for g in range(len(d.grid)) if d.grid[g][1] == 0), key=lambda g: d.grid_value[g])
    shapes = [(d.k_pos, d.k_neg), d.grid[one]]  # the design's choice; the best one-sided shape on the design games
    both = np.array([grid_bounds(s, m, shapes, method, args.delta, args.confidence) for s, m in games])
    chosen, one_sided = both[:, 0], both[:, 1]
    hindsight = np.array([grid_bounds(s, m, list(d.grid), method, args.delta, args.confidence).max()
                          for s, m in games])
    paper = PAPER.get(sigma, {}).get(method)
    return {"sigma": sigma, "mu": 1.0 / sigma, "true_epsilon": gaussian_epsilon(1.0 / sigma, args.delta),
            "method": method, "design_games": design_games, "games": eval_games, "k_pos": d.k_pos, "k_neg": d.k_neg,
            "mean": float(chosen.mean()),
            "sd": float(chosen.std(ddof=1)) if chosen.size > 1 else 0.0, "design_expected": d.expected_epsilon,
            "hindsight_mean": float(hindsight.mean()), "ceiling": d.ceiling, "paper": paper,
            "one_sided": {"k_pos": d.grid[one][0], "mean": float(one_sided.mean()),
                          "sd": float(one_sided.std(ddof=1)) if one_sided.size > 1 else 0.0},
            "difference": None if paper is None else float(chosen.mean()) - paper,
            "wall_s": time.perf_counter() - t0}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--json", default=str(ROOT / "benchmarks" / "results_table1.json"))
    p.add_argument("--canaries", type=int, default=100_000)
    p.add_argument("--sigmas", default="0.5,1,2")
    p.add_argument("--games", type=int, default=24)
    p.add_argument("--design-games", type=int, default=16)
    p.add_argument("--grid-points", type=int, default=32)
    p.add_argument("--delta", type=float, default=1e-5)
    p.add_argument("--confidence", type=float, default=0.95)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    rows = []
    for sigma in (float(x) for x in args.sigmas.split(",")):
        for method in METHODS:
            rows.append(measure(sigma, method, args))
            r = rows[-1]
            print(f"sigma {sigma:g} {method:8s} k+ {r['k_pos']:6d} k- {r['k_neg']:6d}  "
                  f"{r['mean']:.2f} +- {r['sd']:.2f} (one-sided {r['one_sided']['mean']:.2f})"
                  f"  (hindsight {r['hindsight_mean']:.2f}; paper {r['paper']})  {r['wall_s']:.0f} s", flush=True)
    out = {"benchmark": "bench_table1", "when": utc_now(), "host": host_info(), "canaries": args.canaries,
           "games": args.games, "design_games": args.design_games, "grid_points": args.grid_points,
           "delta": args.delta, "confidence": args.confidence, "seed": args.seed, "rows": rows,
           "wall_s": time.perf_counter() - t0,
           "rule": ("guess shape (one- or two-sided, k on a geometric grid) chosen per estimator on games simulated "
                    "under the mechanism; the figure is the mean bound on separate games")}
    write_json(Path(args.json), out)
    return out


if __name__ == "__main__":
    main()
