"""The JAX hooks' cost benchmark (benchmarks/bench_jax_hooks.py) at CI size: it runs, times the plain and the
hooked step on both sizes and the step during an audit, and writes the load beside the figures."""

import json
import math
import subprocess
import sys

import pytest
from helpers import ROOT


def test_jax_hooks_benchmark_writes_its_figures_and_the_load(tmp_path):
    pytest.importorskip("jax")
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_jax_hooks.py"), "--json", str(out),
                           "--steps", "3", "--repeats", "1"], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = json.loads(out.read_text())
    assert len(results["load_average_before"]) == 3 and len(results["cases"]) == 2
    for case in results["cases"]:
        assert all(math.isfinite(v) and v > 0 for v in case["step_us"].values())
        assert case["ratio_hooked_over_plain"] > 0
