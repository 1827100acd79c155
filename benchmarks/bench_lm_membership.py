"""Benchmark: ``python -m audit run membership --target nonprivate_tinygpt`` (issue 35's first acceptance
line) and the two DP targets, as a user runs them: the command line in a subprocess, seed 0.

For each target: the wall time of the command, its CPU time (children's user + system), the machine's
load average before and after (``os.getloadavg``; the 2-core machine is shared with other work, so wall
time depends on it), whether the base model came from the cache (``--out``'s ``cache/``: pass a folder
that holds one for a warm run), and from results.json: the text blind split check, each attack's AUC and
TPR at 1% and 0.1% FPR, the best one-run epsilon lower bound and the stage timings. Checks the acceptance
line on ``nonprivate_tinygpt``: blind check passed; loss AUC >= 0.9; the best calibrated attack (``reference``,
``reference_base``, ``llr_reference``, ``llr_base``) AUC >= 0.98 with TPR >= 0.85 at 1% FPR (Clopper-Pearson
interval beside it); at most 15 minutes.

Usage: ``python benchmarks/bench_lm_membership.py --json OUT [--out RUNS] [--targets NAME,...]`` (default
``nonprivate_tinygpt``; ``all``: the three).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from bench_training import machine_info  # noqa: E402

from audit.io import write_json  # noqa: E402
from audit.run_context import utc_now  # noqa: E402
from targets.lm.recipes import LM_TARGETS  # noqa: E402

CALIBRATED = ("reference", "reference_base", "llr_reference", "llr_base")
LIMIT_S = 15 * 60


def audit(target: str, out: Path, seed: int) -> dict:
    """Run the command once; its figures (module docstring)."""
    cached = any((out / "cache").glob("lm-base-*.safetensors"))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()
    start = time.perf_counter()
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-m", "audit", "run", "membership", "--target", target, "--out", str(out),
                           "--seed", str(seed), "-q"], env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{target}: exit {done.returncode}: {done.stderr.strip()[-400:]}")
    results = json.loads(max(out.glob(f"*-membership-{target}/results.json"), key=os.path.getmtime).read_text())
    attacks = {name: {"auc": a["auc"], "tpr_at_1pct": a["tpr_at_fpr"]["0.01"],
                      "tpr_at_1pct_ci": a["tpr_at_fpr_ci"]["0.01"],
                      "tpr_at_0.1pct": a["tpr_at_fpr"]["0.001"]} for name, a in results["attacks"].items()}
    split = results["split_check"]
    best = results["best_lower_bound"]
    return {"target": target, "seed": seed, "wall_s": wall,
            "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            "load_before": load, "load_after": os.getloadavg(), "base_cached_before": cached,
            "members": results["game"]["members"], "nonmembers": results["game"]["nonmembers"],
            "reference_models": results["game"]["reference_models"],
            "split_check": {"blind_auc": split["blind_auc"], "blind_auc_ci": split["blind_auc_ci"],
                            "passed": split["passed"]},
            "attacks": attacks, "epsilon_lower_bound": None if best is None else float(best["epsilon"]),
            "bound_attack": None if best is None else best["attack"], "epsilon_theory": results["epsilon_theory"],
            "timing": results["timing"]}


def acceptance(row: dict) -> dict:
    """The first acceptance line of issue 35 on one nonprivate_tinygpt run."""
    best = max(CALIBRATED, key=lambda n: row["attacks"].get(n, {}).get("auc", 0.0))
    a = row["attacks"][best]
    return {"blind_check_passed": row["split_check"]["passed"], "loss_auc_at_least_0.9": row["attacks"]["loss"]["auc"]
            >= 0.9, "best_calibrated": best, "calibrated_auc_at_least_0.98": a["auc"] >= 0.98,
            "calibrated_tpr_1pct_at_least_0.85": a["tpr_at_1pct"] >= 0.85,
            "within_15_minutes": row["wall_s"] <= LIMIT_S}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", required=True)
    parser.add_argument("--out", default="/tmp/bench-lm-membership")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--targets", default="nonprivate_tinygpt",
                        help="comma-separated LM targets, or all (the three of targets.lm.recipes.LM_TARGETS)")
    args = parser.parse_args()
    out = Path(args.out)
    result = {"machine": machine_info(torch.device("cpu")), "date": utc_now(), "runs": []}
    targets = LM_TARGETS if args.targets == "all" else tuple(args.targets.split(","))
    for target in targets:
        row = audit(target, out, args.seed)
        if target == "nonprivate_tinygpt":
            row["acceptance"] = acceptance(row)
        result["runs"].append(row)
        write_json(Path(args.json), result)
        print(json.dumps({k: row[k] for k in ("target", "wall_s", "cpu_s", "load_before", "split_check",
                                               "epsilon_lower_bound")}), flush=True)


if __name__ == "__main__":
    main()
