"""Acceptance figures of ``run dp --one-run`` (issue 25), seed 0, 95%, one training run each:

* the valid one-run bound of the updates threat on ``dpsgd_mnist`` at epsilon 8 and 4 (targets 3.3 and
  1.8) and on ``dpsgd_logreg_mnist`` at epsilon 2/4/8 (targets 0.7/1.5/2.8), beside what a perfect
  attack could reach with the same M (the design's expectation under the claim) and the ceiling;
* the cost: wall time and peak memory (max RSS) of the audited training against one plain training of
  the same target (same rows, seed and configuration, no canaries), each in a fresh process.

``python benchmarks/bench_one_run.py --json OUT [--cases mnist8,mnist4,logreg2,logreg4,logreg8]``.
The machine's load (``os.getloadavg``) is recorded before and after: timings are only meaningful on an
idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: name -> (target, claimed epsilon, acceptance target of the valid bound)
CASES = {"mnist8": ("dpsgd_mnist", 8.0, 3.3), "mnist4": ("dpsgd_mnist", 4.0, 1.8),
         "logreg2": ("dpsgd_logreg_mnist", 2.0, 0.7), "logreg4": ("dpsgd_logreg_mnist", 4.0, 1.5),
         "logreg8": ("dpsgd_logreg_mnist", 8.0, 2.8)}


def audit_case(name: str, out: str) -> dict:
    """One ``run dp --one-run`` (updates, seed 0): its bounds, expectation and timing."""
    from audit.dp.options import DPOptions
    from audit.dp.runner import run_dp

    target, eps, goal = CASES[name]
    _, r = run_dp(DPOptions(target=target, epsilon=eps, one_run=True, out=out, quiet=True, seed=0))
    one = r.detail.one_run
    return {"case": name, "target": target, "epsilon_claimed": eps, "acceptance_target": goal,
            "epsilon_lb": r.best_lower_bound.epsilon, "meets_target": r.best_lower_bound.epsilon >= goal,
            "steinke": next(b.epsilon for b in r.lower_bounds if b.method == "one-run"),
            "gdp_estimate": next(b.epsilon for b in r.lower_bounds if b.method == "one-run-fdp-gdp"),
            "canaries": one.canaries, "k_pos": one.k_pos, "correct": one.correct,
            "expected_perfect": one.expected_perfect.mean, "expected_perfect_sd": one.expected_perfect.sd,
            "ceiling": one.ceiling, "verdict": r.verdict.status, "timing": dict(r.stamp.timing)}


def measure(mode: str, target_name: str, eps: float) -> dict:
    """In this process: one plain training or one audited training (default M, Dirac) of the target."""
    import numpy as np

    from audit.dp.one_run.game import DEFAULT_MAX_CANARIES
    from audit.theory.dpsgd import calibrate_noise_multiplier
    from targets.catalogue import trained_target
    from targets.datasets import load_dataset
    from targets.dpsgd_audit import param_shapes
    from targets.gradient_canaries import OneRunCanaries, quiet_coordinates, train_one_run
    from targets.training import train_models

    target = trained_target(target_name).with_privacy(eps, None)
    config = target.train_config(float(calibrate_noise_multiplier(eps, target.delta, target.sample_rate,
                                                                  target.steps)))
    data = load_dataset(target.dataset, None)
    rows = np.sort(np.random.default_rng([0, 5]).permutation(len(data))[:target.n_train])
    n_params = int(sum(np.prod(s) for s in param_shapes(target.arch, data).values()))
    m = min(n_params, DEFAULT_MAX_CANARIES)
    # the audit's set-up (ranking the coordinates) runs in both modes: it also warms up the per-example gradients
    coords = quiet_coordinates(target.arch, data, rows, 1, m)
    canaries = OneRunCanaries("dirac", np.random.default_rng(1).random(m) < 0.5, 2, coordinates=coords)
    base = _rss("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # resets the peak (VmHWM) to the current RSS
    t0 = time.perf_counter()
    if mode == "plain":
        train_models(data.subset(rows), np.ones((1, rows.size), dtype=bool), config, [1], progress=False)
    else:
        train_one_run(data, rows, config, 1, canaries, updates=True)
    seconds = time.perf_counter() - t0
    peak = _rss("VmHWM")
    return {"mode": mode, "seconds": seconds, "peak_rss_mib": peak, "rss_before_training_mib": base,
            "training_growth_mib": peak - base}


def _rss(field: str) -> float:
    """A memory figure of this process from /proc/self/status, MiB."""
    line = next(x for x in Path("/proc/self/status").read_text().splitlines() if x.startswith(field + ":"))
    return int(line.split()[1]) / 1024


def warm_time_ratio(target: str, eps: float, repeats: int) -> dict:
    """Steady-state wall times in this process: both paths run once first (first-call costs of torch and
    of the per-example gradients), then the fastest of ``repeats`` trainings of each mode."""
    for mode in ("plain", "audited"):
        measure(mode, target, eps)
    best = {mode: min(measure(mode, target, eps)["seconds"] for _ in range(repeats)) for mode in ("plain", "audited")}
    return best | {"time_ratio": best["audited"] / best["plain"]}


def cost(target: str, eps: float, repeats: int) -> dict:
    """Plain vs audited training, ``repeats`` fresh processes each (the fastest kept; first-call costs
    included), and the steady state in one process (:func:`warm_time_ratio`)."""
    out = {"warm": warm_time_ratio(target, eps, repeats)}
    for mode in ("plain", "audited"):
        runs = [json.loads(subprocess.run([sys.executable, __file__, "--measure", mode, target, str(eps)],
                                          cwd=ROOT, capture_output=True, text=True, check=True).stdout)
                for _ in range(repeats)]
        out[mode] = min(runs, key=lambda r: r["seconds"]) | {"all_seconds": [r["seconds"] for r in runs]}
    out["time_ratio"] = out["audited"]["seconds"] / out["plain"]["seconds"]
    out["memory_ratio"] = out["audited"]["peak_rss_mib"] / out["plain"]["peak_rss_mib"]
    out["growth_ratio"] = out["audited"]["training_growth_mib"] / max(out["plain"]["training_growth_mib"], 1e-9)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--repeats", type=int, default=3, help="fresh processes per cost measurement")
    parser.add_argument("--cost", default=None, help="cost only, of these targets (comma-separated)")
    parser.add_argument("--measure", nargs=3, metavar=("MODE", "TARGET", "EPS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure[0], args.measure[1], float(args.measure[2]))))
        return
    report = {"load_before": os.getloadavg(), "cpus": os.cpu_count(), "cases": [], "cost": {}}
    names = [] if args.cost else args.cases.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            report["cases"].append(audit_case(name, tmp))
            print(json.dumps(report["cases"][-1]), flush=True)
    for target in args.cost.split(",") if args.cost else sorted({CASES[n][0] for n in names}):
        report["cost"][target] = cost(target, 8.0, args.repeats)
        print(target, json.dumps(report["cost"][target]), flush=True)
    report["load_after"] = os.getloadavg()
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
