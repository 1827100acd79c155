"""The GPU check (``benchmarks/gpu/run.sh``): each measurement on CUDA, then the same on the same machine's
CPU, in fresh processes, within one time budget; writes ``benchmarks/results_gpu.json``.

Measurements (:data:`MEASUREMENTS`), each a command line of the workbench timed whole (start-up included):

* ``flagship`` — ``run membership --target dpsgd_mnist`` (the README's first audit);
* ``opacus_one_run`` — ``run dp --one-run`` of the Opacus tutorial CNN plugin (``examples/opacus_tutorial_cnn.py``,
  which trains on CUDA when a GPU is there, as Opacus's tutorial does);
* ``lm_one_run`` — ``run dp --target dpsgd_tinygpt --one-run --quick`` (the built-in language-model target as an
  ``lm_trainer`` plugin: its fine-tuning, probe and audited run on ``--device``);
* ``lm_membership`` — ``run membership --target dpsgd_tinygpt --quick`` (the target and its reference model
  fine-tuned on ``--device``);
* ``many_models`` — reference models trained many at once (``benchmarks/gpu/many_models.py``: 64 models of the
  flagship's CNN in one vectorised call, the training alone).

The CUDA runs come first (they are what a lent GPU is for); the CPU runs of the same commands follow
(``CUDA_VISIBLE_DEVICES`` empty, ``--device cpu``). Every command gets at most :data:`PER_COMMAND_S` and the
whole at most ``--budget`` seconds (default :data:`BUDGET_S`, 8 minutes): a command that would start with
less than :data:`MIN_START_S` left is recorded as skipped, one that runs out of time as timed out (its
wall time a lower bound). The language-model base is pretrained on first use into a fresh cache per device.

``--dry-run`` runs every measurement once on the CPU, at tiny sizes (:data:`MEASUREMENTS`' dry commands), so
the script is exercised in CI (``tests/e2e/test_bench_gpu.py``) and cannot rot; its figures mean nothing (its
time limits are :data:`DRY_PER_COMMAND_S` and :data:`DRY_BUDGET_S`).
Without ``--dry-run`` and without CUDA the script refuses (exit 2). Usage::

    benchmarks/gpu/run.sh [--dry-run] [--json OUT] [--budget SECONDS]
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
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The whole check's wall-clock budget (seconds): a lent GPU gives 15 minutes, start-up and transfers included.
BUDGET_S = 480.0
#: Longest any one command may run (seconds); a dry run's figures mean nothing, so it waits longer (a loaded
#: CI machine) and its whole default budget is :data:`DRY_BUDGET_S`.
PER_COMMAND_S, DRY_PER_COMMAND_S, DRY_BUDGET_S = 150.0, 600.0, 1800.0
#: A command starts only with at least this many seconds of the budget left.
MIN_START_S = 20.0


@dataclass(frozen=True)
class Measurement:
    """One timed command: its arguments at full size and in a dry run (after ``python``); ``device_flag``:
    whether it takes ``--device``."""

    name: str
    full: tuple[str, ...]
    dry: tuple[str, ...]
    device_flag: bool = True


_AUDIT = ("-m", "audit")
MEASUREMENTS = (
    Measurement("flagship", (*_AUDIT, "run", "membership", "--target", "dpsgd_mnist"),
                (*_AUDIT, "run", "membership", "--target", "dpsgd_logreg_digits", "--quick", "--attack", "loss",
                 "--canaries", "50")),
    Measurement("opacus_one_run", (*_AUDIT, "run", "dp", "--target", "examples.opacus_tutorial_cnn:trainer",
                                   "--one-run"),
                (*_AUDIT, "run", "dp", "--target", "examples.zoo.opacus_loops:original_loader_twin", "--one-run",
                 "--quick")),
    Measurement("lm_one_run", (*_AUDIT, "run", "dp", "--target", "dpsgd_tinygpt", "--one-run", "--quick"),
                (*_AUDIT, "run", "dp", "--target", "examples.zoo.lm_loops:correct", "--check-config")),
    Measurement("lm_membership", (*_AUDIT, "run", "membership", "--target", "dpsgd_tinygpt", "--quick"),
                (*_AUDIT, "run", "membership", "--target", "tests.fixtures.outside_lm:model", "--references", "1")),
    Measurement("many_models", ("benchmarks/gpu/many_models.py", "--models", "64", "--steps", "20"),
                ("benchmarks/gpu/many_models.py", "--target", "dpsgd_logreg_digits", "--models", "2", "--steps",
                 "2")),
)
#: Environment of the dry run's language-model fixture (tests/fixtures/outside_lm.py) at its smallest.
DRY_ENV = {"OUTSIDE_N": "24", "OUTSIDE_EPOCHS": "1", "OUTSIDE_WIDTH": "8"}


def _command(m: Measurement, device: str, dry: bool, out: Path) -> list[str]:
    args = [sys.executable, *(m.dry if dry else m.full)]
    if m.device_flag:
        args += ["--device", device]
    if args[1] == "-m":
        args += ["--quiet", "--out", str(out)]
    return args


def _environment(device: str, cache: Path, dry: bool) -> dict[str, str]:
    env = os.environ | {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
                        "PRIVACY_AUDIT_CACHE": str(cache)}
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env | (DRY_ENV if dry else {})


def timed(command: list[str], env: dict[str, str], limit: float) -> dict:
    """Run ``command``; its wall seconds, exit code and the last lines of its error output when it failed."""
    start = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return {"wall_s": time.perf_counter() - start, "exit": None, "timed_out": True}
    out = {"wall_s": time.perf_counter() - start, "exit": done.returncode, "timed_out": False}
    if done.returncode not in (0, 1):
        out["stderr_tail"] = done.stderr.strip().splitlines()[-3:]
    return out


def _machine() -> dict:
    import torch

    cuda = torch.cuda.is_available()
    return {"gpu": torch.cuda.get_device_name(0) if cuda else None, "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(), "cpu_count": os.cpu_count(),
            "python": platform.python_version(), "torch": torch.__version__,
            "cuda": torch.version.cuda if cuda else None, "load_at_start": list(os.getloadavg())}


def measure(devices: tuple[str, ...], dry: bool, budget: float, work: Path) -> dict[str, dict]:
    """Every measurement on every device in turn (all of the first device first) within ``budget`` seconds."""
    deadline = time.perf_counter() + budget
    results: dict[str, dict] = {m.name: {"command": " ".join(m.dry if dry else m.full)} for m in MEASUREMENTS}
    for device in devices:
        cache = work / f"cache-{device}"
        for m in MEASUREMENTS:
            left = deadline - time.perf_counter()
            if left < MIN_START_S:
                results[m.name][device] = {"skipped": f"budget spent ({left:.0f} s left)"}
                continue
            out = work / f"{m.name}-{device}"
            limit = DRY_PER_COMMAND_S if dry else PER_COMMAND_S
            results[m.name][device] = timed(_command(m, device, dry, out), _environment(device, cache, dry),
                                            min(limit, left))
            print(f"{m.name:15s} {device:5s} {json.dumps(results[m.name][device])}", file=sys.stderr, flush=True)
    for entry in results.values():
        cuda, cpu = entry.get("cuda", {}), entry.get("cpu", {})
        if cuda.get("exit") == 0 and cpu.get("exit") == 0:
            entry["speedup"] = cpu["wall_s"] / cuda["wall_s"]
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the GPU check: each measurement on CUDA and on the CPU")
    parser.add_argument("--dry-run", action="store_true", help="every measurement once on the CPU at tiny sizes")
    parser.add_argument("--json", default=None, help="where to write the results (default "
                        "benchmarks/results_gpu.json; a dry run: a temporary folder)")
    parser.add_argument("--budget", type=float, default=None,
                        help=f"seconds in all (default {BUDGET_S:g}; a dry run {DRY_BUDGET_S:g})")
    args = parser.parse_args(argv)
    args.budget = args.budget or (DRY_BUDGET_S if args.dry_run else BUDGET_S)
    machine = _machine()
    if not args.dry_run and machine["gpu"] is None:
        print("error: no CUDA device: benchmarks/gpu/run.sh measures on a GPU; use --dry-run to exercise it on "
              "the CPU", file=sys.stderr)
        return 2
    devices = ("cpu",) if args.dry_run else ("cuda", "cpu")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as work:
        results = measure(devices, args.dry_run, args.budget, Path(work))
        path = Path(args.json) if args.json else (Path(work).parent / "results_gpu_dry.json" if args.dry_run
                                                  else ROOT / "benchmarks" / "results_gpu.json")
    report = {"device": machine["gpu"] or "none (dry run on the CPU)", "machine": machine,
              "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
              "dry_run": args.dry_run, "budget_s": args.budget, "total_s": time.perf_counter() - start,
              "measurements": results}
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {path}", file=sys.stderr)
    failed = [name for name, entry in results.items() for device in devices
              if entry.get(device, {}).get("exit") not in (0, None) and "skipped" not in entry.get(device, {})]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
