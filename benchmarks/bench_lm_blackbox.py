"""The black-box one-run audits of the language-model targets over seeds, under the default guess design and
the designs it replaced, on the same training (issue 42, item 2):

    python benchmarks/bench_lm_blackbox.py --json OUT [--audits full,lora,nonprivate] [--seeds 0,1,2]
                                           [--canary new-token] [--out DIR]

Each audit is the command a user runs (``run dp --target T --one-run --threat black-box``, in this process);
the canaries' scores it computed are recorded on their way (:func:`audit.dp.plugins.lm_blackbox.secret_scores`
wrapped, nothing else changed) and saved beside the run (``DIR/<audit>_s<seed>/scores.npy``; a later call with
the same ``--out`` reads a finished run back instead of training again). On those scores, with the audit's own
coins, the f-DP bound is also computed at the shapes the earlier designs chose from the same claim: the
one-sided leak design (:func:`audit.stats.one_run.leak.choose_leak_design`, the default before) and the design
that simulates the claimed mechanism's updates (:func:`audit.stats.one_run.design.choose_one_run_design`).
Each record: the default design's shape and bound (the verdict's), the others' bounds, AUC, the members'
shift in standard deviations of the non-members' scores, the right guesses, the wall time, the load average
before and after, the machine and the date.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import audit.dp.plugins.lm_blackbox as lm_blackbox  # noqa: E402
from audit.cli import main  # noqa: E402
from audit.io import write_json  # noqa: E402
from audit.run_context import host_info, utc_now  # noqa: E402
from audit.stats.metrics import auc  # noqa: E402
from audit.stats.one_run.design import (  # noqa: E402
    CanaryMechanism,
    DesignObjective,
    choose_one_run_design,
    grid_bounds,
)
from audit.stats.one_run.leak import Leak, choose_leak_design  # noqa: E402

AUDITS = {"full": ["--target", "dpsgd_tinygpt"], "lora": ["--target", "dpsgd_tinygpt_lora"],
          "nonprivate": ["--target", "nonprivate_tinygpt", "--epsilon", "4", "--delta", "1e-5",
                         "--fail-above-claim"]}


def _run(label: str, args: list[str], folder: Path) -> tuple[dict, np.ndarray, int, float, list[float]]:
    """(results, scores, exit status, wall seconds, load before and after) of one audit, run or read back."""
    scores_path = folder / "scores.npy"
    if scores_path.exists() and list(folder.glob("*/results.json")):
        record = json.loads((folder / "record.json").read_text())
        results = json.loads(next(folder.glob("*/results.json")).read_text())
        return results, np.load(scores_path), record["exit"], record["wall_s"], record["load"]
    seen: list[np.ndarray] = []
    original = lm_blackbox.secret_scores

    def recording(*a, **k):
        seen.append(original(*a, **k))
        return seen[-1]

    lm_blackbox.secret_scores = recording
    load, start = list(os.getloadavg()), time.perf_counter()
    try:
        code = main(["run", "dp", *args, "--one-run", "--threat", "black-box", "-q", "--out", str(folder)])
    finally:
        lm_blackbox.secret_scores = original
    wall, load = time.perf_counter() - start, load + list(os.getloadavg())
    np.save(scores_path, seen[-1])
    (folder / "record.json").write_text(json.dumps({"exit": code, "wall_s": wall, "load": load}))
    return json.loads(next(folder.glob("*/results.json")).read_text()), seen[-1], code, wall, load


def _earlier_designs(results: dict, seed: int) -> dict[str, tuple[int, int]]:
    """The shapes the earlier designs choose for this claim and M (never the scores)."""
    one = results["one_run"]
    m, design = one["canaries"], one["design"]
    mech = CanaryMechanism(**design["mechanism"])
    objective = DesignObjective(delta=results["delta"], confidence=results["confidence"])
    leak = choose_leak_design(mech, m, Leak(results["epsilon_theory"]), objective,
                              np.random.default_rng([seed, 61]), simulations=design["simulations"])
    updates = choose_one_run_design(mech, m, objective, np.random.default_rng([seed, 61]),
                                    simulations=design["simulations"])
    return {"leak (one-sided, the default before)": (leak.k_pos, leak.k_neg),
            "claim's updates simulated": (updates.k_pos, updates.k_neg)}


def measure(label: str, seed: int, args: argparse.Namespace) -> dict:
    folder = args.out / f"{label}_s{seed}"
    extra = ["--canary", args.canary] if args.canary else []
    results, scores, code, wall, load = _run(label, [*AUDITS[label], *extra, "--seed", str(seed)], folder)
    one = results["one_run"]
    inside = np.random.default_rng([seed, 11]).random(scores.size) < 0.5  # the audit's coins
    if int(inside.sum()) != one["included"]:
        raise SystemExit(f"{label} seed {seed}: the coins read back do not match the run's")
    shapes = _earlier_designs(results, seed)
    bounds = grid_bounds(scores, inside, list(shapes.values()), "fdp", results["delta"], results["confidence"])
    best = results["best_lower_bound"] or {}
    return {"audit": label, "seed": seed, "command": " ".join(["run dp", *AUDITS[label], *extra, "--one-run",
                                                               "--threat", "black-box", "--seed", str(seed)]),
            "exit": code, "epsilon": best.get("epsilon"), "verdict": results["verdict"]["status"],
            "guesses": [one["k_pos"], one["k_neg"]], "correct": one["correct"], "ceiling": one["ceiling"],
            "expected_perfect": one["expected_perfect"]["mean"], "design": one["design"]["criterion"],
            "earlier_designs": {name: {"guesses": list(shape), "epsilon": float(b)}
                                for (name, shape), b in zip(shapes.items(), bounds, strict=True)},
            "auc": auc(scores, inside), "canary": results["game"]["canary_kind"],
            "shift_sd": float((scores[inside].mean() - scores[~inside].mean()) / scores[~inside].std()),
            "wall_s": wall, "load_before_after": load}


def main_bench(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--audits", default="full,lora,nonprivate")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--canary", default=None, help="--canary of every audit (default: the runner's)")
    parser.add_argument("--out", type=Path, default=Path("runs/bench_lm_blackbox"))
    args = parser.parse_args(argv)
    records = []
    for seed in (int(s) for s in args.seeds.split(",")):
        for label in args.audits.split(","):
            records.append(measure(label, seed, args))
            print(json.dumps(records[-1]), file=sys.stderr)
            write_json(args.json, {"date": utc_now(), "machine": host_info(), "records": records})
    return 0


if __name__ == "__main__":
    raise SystemExit(main_bench())
