"""The bug zoo's catch table, measured: every mistake of ``examples/zoo`` and its twin through
``run dp --check-config --fail-above-claim`` in one process (docs/reference/bug-zoo.md).

Per plugin: the exit status, the configuration's epsilon, every finding with a problem (its check,
whether it is a violation, its message and its fix) and the wall time; with the machine's load
average (``os.getloadavg``) before and after. Rerun after a change to the checks to refresh the
table's "caught" and "fix printed" columns.

Usage: ``python benchmarks/bench_bug_zoo.py --json OUT [--out RUNS_DIR] [--zoo hooked,opacus_loops,jax_loops]``
(default: every zoo module whose libraries import; ``jax_loops`` needs the ``jax`` extra).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from audit.cli import main  # noqa: E402
from audit.io import write_json  # noqa: E402

#: The zoo modules and the library each needs beyond the core ones.
ZOO = {"hooked": "torch", "opacus_loops": "opacus", "jax_loops": "jax"}


def audit_one(target: str, runs: Path) -> dict:
    """One ``--check-config --fail-above-claim`` audit of ``target`` in this process, summarised."""
    out = Path(tempfile.mkdtemp(dir=runs))
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        code = main(["run", "dp", "--target", target, "--check-config", "--fail-above-claim", "-q", "--out", str(out)])
    wall = time.perf_counter() - start
    (path,) = out.glob("*/results.json")
    block = json.loads(path.read_text())["config_check"]
    return {"target": target, "exit": code, "wall_s": round(wall, 2), "status": block["status"],
            "config_epsilon": block["config"].get("epsilon"),
            "problems": [{k: f[k] for k in ("check", "violation", "message", "fix")}
                         for f in block["findings"] if f["problem"]]}


def main_bench(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", required=True, help="where to write the results")
    parser.add_argument("--out", default=None, help="directory for the audits' run directories (default: a temp dir)")
    parser.add_argument("--zoo", default=",".join(name for name, library in ZOO.items()
                                                  if importlib.util.find_spec(library) is not None),
                        help="comma-separated zoo modules of examples/zoo (default: those whose library imports)")
    args = parser.parse_args(argv)
    modules = [importlib.import_module(f"examples.zoo.{name}") for name in args.zoo.split(",")]
    runs = Path(args.out or tempfile.mkdtemp(prefix="bug-zoo-"))
    runs.mkdir(parents=True, exist_ok=True)
    targets = [f"examples.zoo.{module.__name__.rsplit('.', 1)[1]}:{name}{suffix}"
               for module in modules for name in module.MISTAKES for suffix in ("", "_twin")]
    load_before, start = os.getloadavg(), time.perf_counter()
    rows = [audit_one(target, runs) for target in targets]
    result = {"zoo": args.zoo.split(","), "audits": rows, "total_wall_s": round(time.perf_counter() - start, 1),
              "load_average_before": load_before, "load_average_after": os.getloadavg(),
              "cpu_count": os.cpu_count(),
              "mistakes_caught": sum(r["exit"] == 1 for r in rows if not r["target"].endswith("_twin")),
              "twins_passing": sum(r["exit"] == 0 for r in rows if r["target"].endswith("_twin")),
              "pairs": len(rows) // 2}
    write_json(Path(args.json), result)
    pairs, after = result["pairs"], result["load_average_after"][0]
    print(f"{result['mistakes_caught']}/{pairs} mistakes exit 1, {result['twins_passing']}/{pairs} twins exit 0, "
          f"{result['total_wall_s']} s (load {load_before[0]:.1f} -> {after:.1f})")
    return result


if __name__ == "__main__":
    main_bench()
