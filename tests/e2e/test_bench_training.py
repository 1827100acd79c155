"""The training benchmark runs (``--quick``) and writes consistent, finite figures."""

import json
import math
import subprocess
import sys

import pytest
from helpers import ROOT

KEYS = ("nonprivate_s", "dpsgd_s", "opacus_s", "dpsgd_over_nonprivate", "opacus_over_ours", "models_vectorised_s",
        "models_sequential_s", "vectorised_speedup", "contended_s", "contended_slowdown", "parallel_s",
        "parallel_slowdown", "executor_inprocess_s", "executor_pool_s", "chunk_s")


def test_quick_benchmark_writes_consistent_json(tmp_path):
    pytest.importorskip("opacus")
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_training.py"), "--quick", "--json",
                           str(out)], capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = json.loads(out.read_text())
    for key in KEYS:
        assert math.isfinite(results[key]) and results[key] > 0, key
    assert results["repeats"] >= 3
    for name, samples in results["samples_s"].items():
        assert len(samples) == results["repeats"] and min(samples) > 0, name
    assert results["nonprivate_s"] == min(results["nonprivate_ours_s"], results["nonprivate_torch_s"])
    assert results["dpsgd_over_nonprivate"] == pytest.approx(results["dpsgd_s"] / results["nonprivate_s"])
    assert results["opacus_over_ours"] == pytest.approx(results["opacus_s"] / results["dpsgd_s"])
    speedup = results["models_sequential_s"] / results["models_vectorised_s"]
    assert results["vectorised_speedup"] == pytest.approx(speedup)
    machine = results["machine"]
    assert machine["cpus"] >= 1 and machine["device"] in ("cpu", "cuda") and machine["torch"]
    assert results["contended_slowdown"] == pytest.approx(results["contended_s"] / results["dpsgd_s"])
    assert len(results["load_at_start"]) == 3 and results["threads_identical"] and results["executors_identical"]
    projected = results["lira256_projected_s"]
    assert projected["1"] == pytest.approx(results["lira256_chunks"] * results["chunk_s"])
    by_workers = [projected[n] for n in sorted(projected, key=int)]
    assert by_workers == sorted(by_workers, reverse=True)
    assert set(results["targets_met"]) == {"dpsgd_over_nonprivate", "opacus_over_ours", "vectorised_speedup",
                                           "contended_slowdown"}
    assert "| our DP-SGD, 1 epoch |" in results["table_markdown"] and "Machine:" in results["table_markdown"]
