"""What ``--check-config`` and ``--one-run`` cost in trainings of the code they audit (issue 32, part 5).

The code: the tutorial-style Opacus CNN of ``examples/opacus_tutorial_cnn.py`` (the Opacus MNIST example's
convolutional network with GroupNorm, ``make_private_with_epsilon``, SGD; 5,000 MNIST rows, 3 epochs;
``--quick``: its CI size, 500 rows and 1 epoch). Each measurement is a fresh process, as a user runs it:

* ``plain``: ``python -c`` that loads the plugin and calls its ``train`` once, no audit (the wall time of
  the process, and the time of the ``train`` call alone, printed by the process), twice: with torch's
  default threads (as a user runs it) and with one thread (as the audit runs a plugin,
  :func:`targets.threads.thread_limit`); the faster of the two is the plain training;
* ``check_config``: ``python -m audit run dp --target T --check-config -q``;
* ``one_run``: ``python -m audit run dp --target T --one-run -q``.

Each is timed by its wall clock and by the CPU time of the process (``RUSAGE_CHILDREN``; on a shared
machine the CPU time moves less with the load), repeated ``--repeats`` times (median; interleaved).
The ratios divide by the plain process (start-up included on both sides) and by the ``train`` call alone
(the stricter figure); the targets are <= 3 (check) and <= 4 (one run) plain trainings. The load average
is recorded at the start and end: the figures hold for an idle machine only when it was idle.

``--target MODULE:FACTORY`` measures another trainer plugin instead (tests/e2e/test_bench_gate_cost.py exercises the
benchmark's measurements and figures on the bug zoo's correct Opacus loop, whose trainings take milliseconds: what
it checks there is the benchmark, not the ratios).

Usage: ``python benchmarks/bench_gate_cost.py [--json benchmarks/results_gate_cost.json] [--quick]
[--repeats 1] [--target MODULE:FACTORY]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from audit.io import write_json  # noqa: E402
from audit.run_context import host_info, utc_now  # noqa: E402

TARGETS = {False: "examples.opacus_tutorial_cnn:trainer", True: "examples.opacus_tutorial_cnn:small_trainer"}
#: The issue's targets, in plain trainings.
TARGET_RATIOS = {"check_config": 3.0, "one_run": 4.0}
PLAIN = ("import sys, time, importlib, torch; module, name = sys.argv[1].split(':'); "
         "torch.set_num_threads(int(sys.argv[2])) if int(sys.argv[2]) else None; "
         "plugin = getattr(importlib.import_module(module), name)(); X, y = plugin['dataset']; "
         "t0 = time.perf_counter(); plugin['train'](X, y, 0); print('train_s', time.perf_counter() - t0)")
#: Threads of the plain trainings: torch's default (0) and one, as the audit runs plugins.
PLAIN_THREADS = (0, 1)


def _timed(argv: list[str]) -> dict:
    """Run ``argv`` in a fresh process: its wall and CPU seconds and its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, env=os.environ | {"PYTHONPATH": str(ROOT)},
                          check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": wall, "cpu_s": cpu, "stdout": proc.stdout, "exit": proc.returncode}


def _audit(target: str, flag: str, out: Path) -> dict:
    """One audit command; its wall and CPU time, and the run's own ``timing``."""
    row = _timed([sys.executable, "-m", "audit", "run", "dp", "--target", target, flag, "-q", "--out", str(out)])
    newest = max(out.glob("*/results.json"), key=lambda p: p.stat().st_mtime)
    results = json.loads(newest.read_text())
    return {"wall_s": row["wall_s"], "cpu_s": row["cpu_s"], "timing": results["timing"],
            "trainings": results.get("game", {}).get("trainings"), "verdict": results["verdict"]["status"]}


def _median(rows: list[dict], key: str) -> float:
    return float(statistics.median(r[key] for r in rows))


def measure(target: str, repeats: int) -> dict:
    """Interleaved repeats of the three measurements (module docstring) of the trainer plugin ``target`` and their
    ratios."""
    rows: dict[str, list[dict]] = {"check_config": [], "one_run": []} | {f"plain_{n}": [] for n in PLAIN_THREADS}
    with tempfile.TemporaryDirectory(prefix="bench-gate-cost-") as tmp:
        for _ in range(repeats):
            for n in PLAIN_THREADS:
                plain = _timed([sys.executable, "-c", PLAIN, target, str(n)])
                plain["train_s"] = float(plain["stdout"].split()[-1])
                rows[f"plain_{n}"].append(plain)
            rows["check_config"].append(_audit(target, "--check-config", Path(tmp)))
            rows["one_run"].append(_audit(target, "--one-run", Path(tmp)))
    plains = {("default_threads" if n == 0 else f"{n}_thread"): {
        "process_wall_s": _median(rows[f"plain_{n}"], "wall_s"), "process_cpu_s": _median(rows[f"plain_{n}"], "cpu_s"),
        "train_call_s": _median(rows[f"plain_{n}"], "train_s")} for n in PLAIN_THREADS}
    fastest = min(plains, key=lambda k: plains[k]["process_wall_s"])
    plain_wall, plain_cpu = plains[fastest]["process_wall_s"], plains[fastest]["process_cpu_s"]
    train_s = plains[fastest]["train_call_s"]
    out = {"target": target, "repeats": repeats, "plain_runs": plains,
           "plain": plains[fastest] | {"threads": fastest}}
    for name in ("check_config", "one_run"):
        wall, cpu = _median(rows[name], "wall_s"), _median(rows[name], "cpu_s")
        out[name] = {"wall_s": wall, "cpu_s": cpu, "timing": rows[name][-1]["timing"],
                     "trainings": rows[name][-1]["trainings"], "verdict": rows[name][-1]["verdict"],
                     "wall_over_plain_process": wall / plain_wall, "cpu_over_plain_process": cpu / plain_cpu,
                     "wall_over_train_call": wall / train_s, "target_ratio": TARGET_RATIOS[name]}
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default=str(ROOT / "benchmarks" / "results_gate_cost.json"))
    parser.add_argument("--quick", action="store_true", help="the example's CI size (500 rows, 1 epoch)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--target", default=None, help="another trainer plugin (MODULE:FACTORY) to measure "
                        "(default: the tutorial CNN, at its CI size with --quick)")
    args = parser.parse_args(argv)
    load_start, started = os.getloadavg(), utc_now()
    figures = measure(args.target or TARGETS[args.quick], args.repeats)
    load_end = os.getloadavg()
    idle = load_start[0] < 0.5  # its own processes raise the load at the end
    result = {"benchmark": "gate_cost", "created": started, "host": host_info(), "quick": args.quick,
              "load_at_start": list(load_start), "load_at_end": list(load_end), "idle": idle,
              "note": "measured on an idle machine" if idle else
                      "measured on a loaded machine: the ratios must be re-measured on an idle one"} | figures
    write_json(args.json, result)
    for name in ("check_config", "one_run"):
        f = figures[name]
        print(f"{name}: {f['wall_s']:.1f} s wall = {f['wall_over_plain_process']:.2f} plain trainings "
              f"({f['wall_over_train_call']:.2f} train calls; CPU {f['cpu_over_plain_process']:.2f}); "
              f"target <= {f['target_ratio']:g}")
    print(f"plain: {figures['plain']['process_wall_s']:.1f} s process, {figures['plain']['train_call_s']:.1f} s "
          f"train call; load {load_start[0]:.2f} -> {load_end[0]:.2f}")
    return result


if __name__ == "__main__":
    main()
