"""RMIA against LiRA offline with few reference models (Zarifzadeh, Liu, Shokri 2024, Sec. 5).

    python benchmarks/bench_rmia.py --json OUT [--target nonprivate_mnist] [--references 1,2,4] [--canary KIND]
                                    [--canaries M] [--quick] [--out DIR]

Runs ``run membership`` once per reference-model count R (same seed, one model cache: the target and
the shadow models are trained once and reused, only the reference models differ) with RMIA online,
RMIA offline and, where it can run (R >= 4), LiRA offline, and writes ``{"rows": [...]}`` with one row
per (R, attack): ``auc``, ``tpr_at_1pct``, ``tpr_at_0.1pct`` (with ``tpr_ci`` intervals), ``rmia_a``
(the offline mixing parameter chosen on the calibration games) and the run's wall time.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from attacks.names import LIRA_MIN_REFERENCES  # noqa: E402
from audit.io import write_json  # noqa: E402
from audit.membership.runner import MembershipOptions, run_membership  # noqa: E402
from audit.run_context import host_info, utc_now  # noqa: E402


def rows_for(target: str, references: int, canary: str, canaries: int, out: Path, seed: int, quick: bool,
             device: str) -> list[dict]:
    """One row per attack of one run with ``references`` reference models."""
    attacks = ("rmia_online", "rmia_offline") + (("lira_offline",) if references >= LIRA_MIN_REFERENCES else ())
    started = time.perf_counter()
    _, results = run_membership(MembershipOptions(target=target, out=str(out), seed=seed, quick=quick, quiet=True,
                                                  device=device, canary=canary, canaries=canaries,
                                                  attacks=attacks, references=references))
    wall = time.perf_counter() - started
    rows = []
    for name in attacks:
        a = results.attacks[name]
        rows.append({"target": target, "canary": canary, "references": references, "attack": name, "auc": a.auc,
                     "tpr_at_1pct": a.tpr_at_fpr["0.01"], "tpr_at_0.1pct": a.tpr_at_fpr["0.001"],
                     "tpr_ci": a.tpr_at_fpr_ci, "rmia_a": a.a, "run_wall_s": wall,
                     "canaries": results.game.canaries})
        print(f"R={references} {name:<13} AUC {a.auc:.3f}  TPR@1%FPR {a.tpr_at_fpr['0.01']:.3f}  "
              f"TPR@0.1%FPR {a.tpr_at_fpr['0.001']:.3f}  ({wall:.0f} s)", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", required=True, help="output JSON file")
    parser.add_argument("--target", default="nonprivate_mnist")
    parser.add_argument("--references", default="1,2,4", help="comma-separated reference-model counts")
    parser.add_argument("--canary", default="mislabelled")
    parser.add_argument("--canaries", type=int, default=500, help="canaries m (default 500: held-out MNIST examples)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="the --quick preset of run membership")
    parser.add_argument("--device", default="cpu", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--out", default=None, help="run directories and model cache (default: a temporary folder)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-rmia-") as tmp:
        out = Path(args.out or tmp)
        rows = [row for r in (int(x) for x in args.references.split(","))
                for row in rows_for(args.target, r, args.canary, args.canaries, out, args.seed, args.quick,
                                    args.device)]
    write_json(args.json, {"rows": rows, "quick": args.quick, "seed": args.seed, "created": utc_now(),
                           "host": host_info(), "wall_s": time.perf_counter() - started})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
