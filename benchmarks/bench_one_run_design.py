"""One-run f-DP bound of a perfect attack on DP-SGD with gradient canaries: the reference figures.

For the exact per-canary observation of DP-SGD (Poisson rate q = 0.1707, T = 88 steps, noise
multiplier calibrated by the PLD accountant for the claimed epsilon at delta = 1e-5), M canaries each
in by a fair coin and the optimal likelihood-ratio score, :func:`audit.stats.one_run.design.
choose_one_run_design` fixes the number of "in" guesses on ``--design-sims`` simulated games and
reports the valid f-DP (eps, delta) one-run bound (Mahloujifar, Melis, Chaudhuri 2025, 95%) at that
guess count on ``--seeds`` separate games (mean, sd, median): "what a perfect attack could reach
with this M". ``hindsight`` is the best fixed guess count's mean on the design games themselves
(chosen and measured on the same games: slightly optimistic). The issue's reference figures
(0.87/1.79/3.19 at eps 2/4/8 with M = 7,850; 1.13/2.30/3.66 with M = 20,000) are printed alongside;
measured figures: docs/references.md, "One-run auditing".

Usage: ``python benchmarks/bench_one_run_design.py --json OUT [--seeds 20] [--design-sims 20]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from audit.io import write_json  # noqa: E402
from audit.run_context import host_info, utc_now  # noqa: E402
from audit.stats.one_run.design import CanaryMechanism, DesignObjective, choose_one_run_design  # noqa: E402
from audit.theory.dpsgd import calibrate_noise_multiplier  # noqa: E402

SAMPLE_RATE, STEPS = 0.1707, 88
REFERENCE = {(2.0, 7850): 0.87, (4.0, 7850): 1.79, (8.0, 7850): 3.19,
             (2.0, 20000): 1.13, (4.0, 20000): 2.30, (8.0, 20000): 3.66}


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x]


def measure(epsilon: float, canaries: int, args: argparse.Namespace, sigma: float) -> dict:
    """One row: the design for (epsilon, M) and its evaluation."""
    t0 = time.perf_counter()
    d = choose_one_run_design(CanaryMechanism(SAMPLE_RATE, sigma, STEPS), canaries,
                              DesignObjective(delta=args.delta, confidence=args.confidence, criterion=args.criterion),
                              args.seed + int(100 * epsilon) + canaries, simulations=args.design_sims,
                              evaluations=args.seeds)
    return {"epsilon": epsilon, "noise_multiplier": sigma, "canaries": canaries, "k_pos": d.k_pos, "k_neg": d.k_neg,
            "bound_mean": d.expected_epsilon, "bound_sd": d.epsilon_sd, "bound_median": d.epsilon_median,
            "bound_5_95": list(d.epsilon_range), "hindsight_mean": max(d.grid_value), "ceiling": d.ceiling,
            "reference": REFERENCE.get((epsilon, canaries)), "seconds": time.perf_counter() - t0}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", required=True)
    parser.add_argument("--seeds", type=int, default=20, help="evaluation games per figure")
    parser.add_argument("--design-sims", type=int, default=20, help="games that choose the guess count")
    parser.add_argument("--epsilons", default="2,4,8")
    parser.add_argument("--canaries", default="7850,20000")
    parser.add_argument("--delta", type=float, default=1e-5)
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument("--criterion", default="mean", choices=("mean", "median"))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    rows = []
    for eps in _floats(args.epsilons):
        t0 = time.perf_counter()
        sigma = calibrate_noise_multiplier(eps, args.delta, SAMPLE_RATE, STEPS)
        calibration_s = time.perf_counter() - t0
        for m in (int(x) for x in _floats(args.canaries)):
            rows.append(measure(eps, m, args, sigma) | {"calibration_seconds": calibration_s})
            r = rows[-1]
            ref = "" if r["reference"] is None else f"  (reference {r['reference']:.2f})"
            print(f"eps {eps:g}, sigma {sigma:.4f}, M {m}: k+ {r['k_pos']}, bound {r['bound_mean']:.3f} "
                  f"± {r['bound_sd']:.3f} (median {r['bound_median']:.3f}, hindsight {r['hindsight_mean']:.3f}, "
                  f"ceiling {r['ceiling']:.2f}){ref}  [{r['seconds']:.1f} s]", flush=True)
    out = {"rows": rows, "seconds": time.perf_counter() - start, "created": utc_now(), "machine": host_info(),
           "settings": {"sample_rate": SAMPLE_RATE, "steps": STEPS, "delta": args.delta,
                        "confidence": args.confidence, "seeds": args.seeds, "design_sims": args.design_sims,
                        "criterion": args.criterion, "seed": args.seed,
                        "bound": "f-DP one-run (Mahloujifar et al. 2025), f_{eps,delta} null, one-sided guesses"}}
    write_json(Path(args.json), out)
    print(f"total {out['seconds']:.1f} s")
    return out


if __name__ == "__main__":
    main()
