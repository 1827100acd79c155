"""The cost benchmark of --check-config and --one-run runs and writes its figures, the load and whether the machine
was idle. It measures the bug zoo's correct Opacus loop (``--target``: a linear model on 295 digits, trainings of
milliseconds) rather than the tutorial CNN at its CI size (``--quick`` alone, 61 s here for eleven CNN trainings in
four processes): what is tested is the benchmark's processes and figures; the CNN's own one-run audit at that size is
tests/e2e/dp/test_plugin_one_run.py's and the Opacus tutorial's (tests/e2e/test_docs_runs.py)."""

import json
import math
import subprocess
import sys

import pytest
from helpers import ROOT

#: The trainer plugin measured (its trainings take milliseconds; the benchmark's own default is the tutorial CNN).
TARGET = "examples.zoo.opacus_loops:original_loader_twin"


def test_quick_benchmark_writes_its_figures_and_the_load(tmp_path):
    pytest.importorskip("opacus")
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_gate_cost.py"), "--quick", "--target",
                           TARGET, "--json", str(out)], capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = json.loads(out.read_text())
    assert results["quick"] and results["target"] == TARGET
    assert len(results["load_at_start"]) == 3 and isinstance(results["idle"], bool)
    assert results["plain"]["train_call_s"] > 0
    for name in ("check_config", "one_run"):
        figures = results[name]
        assert math.isfinite(figures["wall_over_plain_process"]) and figures["wall_over_plain_process"] > 0
        timing = figures["timing"]
        assert timing["total_s"] >= sum(v for k, v in timing.items() if k != "total_s")
        assert figures["verdict"] == "consistent"
    assert results["one_run"]["trainings"] == 6
