"""One-run audits of the language-model targets through the lm_trainer contract (issue 35's acceptance
figures): each audit is the command a user runs, in this process, and its results.json is read back.

    python benchmarks/bench_lm_one_run.py --json OUT [--audits updates,lora,nonprivate,blackbox] [--seed 0]
                                          [--out DIR]

* ``updates``: ``run dp --target dpsgd_tinygpt --one-run`` (updates threat; gradient canaries in every
  parameter); ``lora``: the same on ``dpsgd_tinygpt_lora`` (canaries in the LoRA adapters). Acceptance: the
  valid bound <= the claim and >= 0.8 x the perfect-attack expectation it prints, <= 15 minutes each.
* ``nonprivate``: ``run dp --target nonprivate_tinygpt --one-run --threat black-box --canaries 1000
  --epsilon 4 --delta 1e-5`` (1,000 new-token canaries, about 500 in; guess counts designed under the claim);
  ``nonprivate_k200``: the same with ``--guesses 200`` fixed in advance. Acceptance: AUC >= 0.99, epsilon >=
  3.0 at a guess count fixed in advance, the claim of epsilon 4 flagged.
* ``blackbox``: the black-box new-token audit of ``dpsgd_tinygpt`` and ``dpsgd_tinygpt_lora`` (1,000
  canaries): what it reaches against the claim.

Every record carries the wall time, the per-stage times (results.json ``timing``), the load average before
and after, the machine and the date. The base model is cached in ``$PRIVACY_AUDIT_CACHE``
(:func:`targets.lm.plugins.lm_cache_dir`); the first audit pretrains it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from audit.cli import main  # noqa: E402
from audit.io import write_json  # noqa: E402
from audit.run_context import host_info, utc_now  # noqa: E402

AUDITS = {
    "updates": ["--target", "dpsgd_tinygpt", "--one-run"],
    "lora": ["--target", "dpsgd_tinygpt_lora", "--one-run"],
    "nonprivate": ["--target", "nonprivate_tinygpt", "--one-run", "--threat", "black-box", "--canaries", "1000",
                   "--epsilon", "4", "--delta", "1e-5"],
    "nonprivate_k200": ["--target", "nonprivate_tinygpt", "--one-run", "--threat", "black-box", "--canaries", "1000",
                        "--guesses", "200", "--epsilon", "4", "--delta", "1e-5"],
    "blackbox": ["--target", "dpsgd_tinygpt", "--one-run", "--threat", "black-box", "--canaries", "1000"],
    "blackbox_lora": ["--target", "dpsgd_tinygpt_lora", "--one-run", "--threat", "black-box", "--canaries", "1000"],
}


def _figures(res: dict) -> dict:
    one, best = res["one_run"], res["best_lower_bound"] or {}
    attack = next(iter(res["attacks"].values()))
    expected = one["expected_perfect"]["mean"]
    epsilon = best.get("epsilon")
    return {"epsilon": epsilon, "method": best.get("method"), "claim": res["epsilon_theory"],
            "expected_perfect": expected, "ratio_to_expected": None if not expected or epsilon is None
            else epsilon / expected, "ceiling": one["ceiling"], "canaries": one["canaries"],
            "guesses": [one["k_pos"], one["k_neg"]], "correct": one["correct"], "auc": attack["auc"],
            "tpr_at_1pct": attack["tpr_at_fpr"]["0.01"], "verdict": res["verdict"]["status"],
            "config_check": (res.get("config_check") or {}).get("status"), "parameters": res["model"].get("parameters"),
            "timing": res["timing"]}


def run_audit(name: str, args: argparse.Namespace) -> dict:
    out = Path(args.out) / name
    load_before = os.getloadavg()
    start = time.perf_counter()
    code = main(["run", "dp", *AUDITS[name], "--seed", str(args.seed), "--fail-above-claim", "-q", "--out", str(out)])
    wall = time.perf_counter() - start
    (path,) = sorted(out.glob("*/results.json"))[-1:]
    record = {"command": "python -m audit run dp " + " ".join(AUDITS[name]) + f" --seed {args.seed}",
              "exit_code": code, "wall_s": wall, "load_before": list(load_before),
              "load_after": list(os.getloadavg())} | _figures(json.loads(path.read_text()))
    print(name, json.dumps({k: v for k, v in record.items() if k != "timing"}), flush=True)
    return record


def _cpu() -> str:
    """The processor's model name (Linux), else the platform's."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        return next(line.split(":", 1)[1].strip() for line in lines if line.startswith("model name"))
    except (OSError, StopIteration):
        import platform

        return platform.processor()


def main_bench() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", required=True)
    parser.add_argument("--audits", default="updates,lora,nonprivate,nonprivate_k200,blackbox,blackbox_lora")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="/tmp/bench-lm-one-run")
    args = parser.parse_args()
    result = {"date": utc_now(), "host": host_info() | {"cpu": _cpu()}, "seed": args.seed, "audits": {}}
    path = Path(args.json)
    if path.is_file():  # add to the audits already measured
        result["audits"] = json.loads(path.read_text()).get("audits", {})
    for name in args.audits.split(","):
        result["audits"][name] = run_audit(name, args) | {"date": utc_now()}
        write_json(path, result)


if __name__ == "__main__":
    main_bench()
