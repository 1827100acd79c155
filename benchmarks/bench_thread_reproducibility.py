"""Do the results of an audit depend on the number of training threads? Runs each audit twice, with
``PRIVACY_AUDIT_THREADS`` pinned to 1 and to 2 (the thread policy of :mod:`targets.threads`), and
compares the two ``results.json`` apart from their ``volatile`` keys (time, host, timing).

The documentation's reproducibility statement quotes this script's output with its machine and date.
Identical results mean the training is thread-independent on that machine (the reductions over a
batch run on one thread); across CPU types the float results of training can still differ.

Usage: ``python benchmarks/bench_thread_reproducibility.py --json OUT [--only NAME ...]``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from audit.io import write_json  # noqa: E402

#: name -> the audit's arguments (each run with --quick -q and its own --out).
AUDITS = {
    "membership_dpsgd_logreg_digits": ["run", "membership", "--target", "dpsgd_logreg_digits"],
    "membership_dpsgd_mnist": ["run", "membership", "--target", "dpsgd_mnist"],
    "dp_dpsgd_logreg_digits_updates": ["run", "dp", "--target", "dpsgd_logreg_digits"],
    "dp_dpsgd_mnist_gradient": ["run", "dp", "--target", "dpsgd_mnist"],
    "dp_dpsgd_digits_blackbox": ["run", "dp", "--target", "dpsgd_digits", "--threat", "black-box"],
}
THREAD_SETTINGS = ("1", "2")


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _run(args: list[str], threads: str, out: Path) -> tuple[dict, float]:
    env = dict(os.environ, PRIVACY_AUDIT_THREADS=threads)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "audit", *args, "--quick", "-q", "--out", str(out)], cwd=ROOT, env=env,
                   check=True, stdout=subprocess.DEVNULL)
    (path,) = [p for p in out.glob("*/results.json")]
    results = json.loads(path.read_text())
    return {k: v for k, v in results.items() if k not in results.get("volatile", [])}, time.perf_counter() - t0


def _differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Paths where two JSON values differ, with the absolute difference of numbers."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b)) for d in _differences(a.get(k), b.get(k), f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in _differences(x, y, f"{path}[{i}]")]
    if a == b:
        return []
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return [f"{path}: {a} vs {b} (|diff| {abs(a - b):.3g})"]
    return [f"{path}: differs"]


def _best(results: dict) -> float | None:
    best = results.get("best_lower_bound") or {}
    return best.get("epsilon")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", required=True, help="where to write the results")
    parser.add_argument("--only", nargs="*", choices=sorted(AUDITS), help="audits to run (default all)")
    args = parser.parse_args(argv)
    report: dict[str, Any] = {"date": datetime.date.today().isoformat(), "cpu": _cpu(), "cpus": os.cpu_count(),
                              "load_at_start": os.getloadavg()[0], "threads": THREAD_SETTINGS, "audits": {}}
    with tempfile.TemporaryDirectory(prefix="bench-threads-") as tmp:
        for name in args.only or AUDITS:
            runs = {t: _run(AUDITS[name], t, Path(tmp) / name / t) for t in THREAD_SETTINGS}
            (a, wall_a), (b, wall_b) = runs.values()
            diffs = _differences(a, b)
            report["audits"][name] = {"command": "python -m audit " + " ".join(AUDITS[name]) + " --quick",
                                      "identical": not diffs, "differences": diffs[:20],
                                      "best_epsilon": [_best(a), _best(b)], "wall_s": [wall_a, wall_b]}
            print(f"{name}: identical={not diffs} best={_best(a)} / {_best(b)} ({wall_a:.0f} s, {wall_b:.0f} s)",
                  flush=True)
    report["load_at_end"] = os.getloadavg()[0]
    write_json(args.json, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
