"""The GPU check (benchmarks/gpu/run.sh, issue 41): its dry run — every measurement once on the CPU at tiny
sizes — runs here so the script cannot rot; without a GPU the real run refuses in one line. Where a GPU is,
the real run is what a session lent one runs first (docs/performance.md, "GPU")."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from helpers import ROOT

pytest.importorskip("opacus")
pytest.importorskip("transformers")

RUN = ROOT / "benchmarks" / "gpu" / "run.sh"


def _run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(RUN), *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          env=os.environ | {"PYTHON": sys.executable})


def test_dry_run_measures_every_command_on_the_cpu(tmp_path):
    out = tmp_path / "results_gpu.json"
    done = _run("--dry-run", "--json", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["dry_run"] and report["device"] == "none (dry run on the CPU)" and report["date"]
    assert report["machine"]["cpu_count"] and "torch" in report["machine"]
    assert set(report["measurements"]) == {"flagship", "opacus_one_run", "lm_one_run", "lm_membership", "many_models"}
    for name, entry in report["measurements"].items():
        assert entry["cpu"]["exit"] == 0 and entry["cpu"]["wall_s"] > 0, (name, entry)
        assert "cuda" not in entry and "speedup" not in entry


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here: the real run would start")
def test_the_real_run_refuses_without_a_gpu(tmp_path):
    done = _run("--json", str(tmp_path / "x.json"), timeout=120)
    assert done.returncode == 2 and "no CUDA device" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "x.json").exists()
