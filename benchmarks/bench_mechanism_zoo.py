"""The mechanism zoo's catch table, measured: every loop of ``examples/zoo/jax_mechanisms.py`` (jax_privacy's
Band-MF with cyclic Poisson, truncated Poisson, cyclic Poisson, balls-in-bins, and four mistakes) at 40 and 200
steps through ``run dp --check-config --fail-above-claim`` in one process (issue 49; docs/reference/bug-zoo.md).

Per loop: what :func:`bench_bug_zoo.audit_one` records (exit status, the configuration's epsilon, every finding
with a problem, wall time), whether it met its target (a correct loop exits 0 — balls-in-bins 2, for want of a
DpEvent —, a mistake exits 1), and the load average before and after. The suite runs the same loops at 40 steps
and two of them at 200 (``tests/e2e/test_mechanism_zoo.py``); this runs them all.

Usage: ``python benchmarks/bench_mechanism_zoo.py --json benchmarks/results_mechanism_zoo.json [--out RUNS_DIR]``
(needs the ``jax`` extra).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from bench_bug_zoo import audit_one  # noqa: E402

from audit.io import write_json  # noqa: E402
from examples.zoo import jax_mechanisms as zoo  # noqa: E402

#: The exit status each correct loop must give (the others 0): jax_privacy has no DpEvent for balls-in-bins.
EXPECTED_CORRECT = {"balls_in_bins": 2}


def main_bench(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", required=True, help="where to write the results")
    parser.add_argument("--out", default=None, help="directory for the audits' run directories (default: a temp dir)")
    args = parser.parse_args(argv)
    runs = Path(args.out or tempfile.mkdtemp(prefix="mechanism-zoo-"))
    runs.mkdir(parents=True, exist_ok=True)
    plan = [(name, steps, EXPECTED_CORRECT.get(name, 0)) for name in zoo.CORRECT for steps in zoo.LENGTHS]
    plan += [(name, steps, 1) for name in zoo.MISTAKES for steps in zoo.LENGTHS]
    load_before, start = os.getloadavg(), time.perf_counter()
    rows = []
    for name, steps, expected in plan:
        row = audit_one(f"examples.zoo.jax_mechanisms:{name}_{steps}", runs)
        rows.append(row | {"loop": name, "steps": steps, "expected_exit": expected, "met": row["exit"] == expected})
    result = {"audits": rows, "met": sum(r["met"] for r in rows), "loops": len(rows),
              "total_wall_s": round(time.perf_counter() - start, 1), "load_average_before": load_before,
              "load_average_after": os.getloadavg(), "cpu_count": os.cpu_count(),
              "date": time.strftime("%Y-%m-%d", time.gmtime())}
    write_json(Path(args.json), result)
    print(f"{result['met']}/{result['loops']} loops meet their target, {result['total_wall_s']} s "
          f"(load {load_before[0]:.1f} -> {result['load_average_after'][0]:.1f})")
    return result


if __name__ == "__main__":
    main_bench()
