"""The released-model audit by canary kind: ``run membership --target T --canary K --seed S`` end to end, for
each kind and seed, with the bound, its guesses, the ceiling (every guess right), the last-iterate reference
of Steinke et al. 2025, the wall time and the process's CPU seconds, beside the machine's load (the 1-minute load
average before and after each run: timings on a loaded machine are not comparable with an idle one's; CPU seconds
less so).

Full configuration (an idle 2-core machine; the flagship's CNN about 1.5 minutes a run there): ``python
benchmarks/bench_membership_canaries.py --kinds sparse quiet blank --seeds 0 1 2`` (pool kinds, mislabelled
and natural, need ``--data-dir`` with the full MNIST at the preset's 6,000 canaries). The file checked in is
the small configuration that a loaded machine allows: ``--target dpsgd_logreg_mnist --kinds sparse quiet
--seeds 0 1 2`` (a model that trains in seconds); the flagship's CNN with the gradient-max canaries of issue 42 is
``benchmarks/results_flagship_canaries.json`` (``--kinds sparse gradmax --seeds 0 1 2 --json
benchmarks/results_flagship_canaries.json``). ``--quick`` (200 canaries, 3 shadow and 4 reference models)
shows the format, not the power. Usage: ``python benchmarks/bench_membership_canaries.py [--target
dpsgd_mnist] [--kinds K ...] [--seeds S ...] [--quick] [--json benchmarks/results_membership_canaries.json]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from audit.choices import MEMBERSHIP_CANARIES  # noqa: E402
from audit.io import write_json  # noqa: E402
from audit.membership.options import MembershipOptions  # noqa: E402
from audit.membership.runner import run_membership  # noqa: E402
from audit.run_context import host_info, utc_now  # noqa: E402


def measure(target: str, kind: str, seed: int, quick: bool, out: Path) -> dict:
    """One audit: its bound, guesses, ceiling, last-iterate reference, wall time and the load around it."""
    load_before = os.getloadavg()[0]
    t0, cpu0 = time.perf_counter(), time.process_time()
    _, outcome = run_membership(MembershipOptions(target=target, canary=kind, seed=seed, quick=quick, quiet=True,
                                                  out=str(out)))
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    best, ceiling, reference = outcome.best_lower_bound, outcome.judged.ceiling, outcome.judged.last_iterate
    details = (best.details or {}) if best else {}
    return {"kind": kind, "seed": seed, "epsilon_lb": best.epsilon if best else None,
            "method": best.method if best else None, "attack": best.attack if best else None,
            "right": details.get("v"), "guesses": details.get("r", details.get("k")),
            "canaries": best.n if best else None, "ceiling": ceiling.epsilon if ceiling else None,
            "last_iterate": reference.epsilon if reference else None, "epsilon_theory": outcome.epsilon_theory,
            "expected_perfect_attack": (reference.expected_bound or {}).get("mean") if reference else None,
            "auc": {name: a.auc for name, a in (outcome.attacks or {}).items()},
            "verdict": outcome.verdict.status, "wall_s": wall, "cpu_s": cpu, "load_1min_before": load_before,
            "load_1min_after": os.getloadavg()[0]}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--target", default="dpsgd_mnist")
    p.add_argument("--kinds", nargs="+", default=["sparse", "quiet"], choices=MEMBERSHIP_CANARIES)
    p.add_argument("--seeds", nargs="+", type=int, default=[0])
    p.add_argument("--quick", action="store_true", help="the --quick game: the format, not the power")
    p.add_argument("--json", default=str(ROOT / "benchmarks" / "results_membership_canaries.json"))
    args = p.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as out:
        for kind in args.kinds:
            for seed in args.seeds:
                rows.append(measure(args.target, kind, seed, args.quick, Path(out)))
                r = rows[-1]
                print(f"{kind:12s} seed {seed}: epsilon >= {r['epsilon_lb']} ({r['right']}/{r['guesses']} right, "
                      f"{r['attack']}), ceiling {r['ceiling']}, last-iterate {r['last_iterate']}, "
                      f"{r['wall_s']:.0f} s ({r['cpu_s']:.0f} CPU s) at load {r['load_1min_before']:.1f}", flush=True)
    result = {"benchmark": "bench_membership_canaries", "when": utc_now(), "host": host_info(),
              "target": args.target, "quick": args.quick, "rows": rows}
    write_json(Path(args.json), result)
    return result


if __name__ == "__main__":
    main()
