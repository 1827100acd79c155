"""``run extraction`` on a DP-ERM target (the thief gets the noisy released model), refused targets and
determinism (the attack itself, Tramèr et al. 2016: tests/attacks/test_extraction_attack.py)."""

import json
import subprocess
import sys

import pytest

from audit.run_context import SCHEMA_VERSION

pytestmark = pytest.mark.usefixtures("one_thread")

#: Single-threaded BLAS: these problems are small, and on a loaded 2-core machine extra BLAS threads
#: slow them down tenfold.
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _cli(*args):
    import os

    return subprocess.run([sys.executable, "-m", "audit", "run", "extraction", *args], capture_output=True, text=True,
                          timeout=600, env=os.environ | ONE_THREAD)


def test_run_extraction_dperm_steals_the_noisy_release(tmp_path):
    proc = _cli("--target", "dperm_digits", "--quick", "--quiet", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    run = next(p for p in tmp_path.iterdir() if p.is_dir() and p.name != "cache")
    for name in ("config.json", "results.json", "report.html"):
        assert (run / name).is_file()
    results = json.loads((run / "results.json").read_text())
    assert results["kind"] == "extraction" and results["schema_version"] == SCHEMA_VERSION
    e = results["extraction"]
    assert e["queries"] == 65 and e["param_rel_error"] < 1e-6
    assert e["agreement_test"] == 1.0 and e["agreement_uniform"] == 1.0 and e["tv_distance"] < 1e-9
    rounded, label_only = e["methods"][1], e["methods"][2]
    assert rounded["round_decimals"] == 3 and rounded["agreement_test"] > 0.99 and rounded["agreement_uniform"] > 0.99
    assert label_only["queries"] == 20 * 65 and label_only["agreement_test"] < 1.0
    pp = e["post_processing"]
    assert pp["equals_released"] and pp["stolen_vs_released_rel_error"] < 1e-6
    assert pp["stolen_vs_nonprivate_rel_error"] > 0.1  # the noise is not undone
    assert results["epsilon_theory"] == pytest.approx(1.0, rel=0.01)


def test_run_extraction_is_deterministic(tmp_path):
    from audit.extraction.runner import ExtractionOptions, run_extraction

    outs = []
    for sub in ("a", "b"):
        _, outcome = run_extraction(ExtractionOptions(target="dperm_breast_cancer", out=str(tmp_path / sub), quick=True,
                                                      quiet=True, round=3, seed=3))
        stable = json.loads(json.dumps(outcome.to_dict(), default=str))
        outs.append({k: v for k, v in stable.items() if k not in outcome.stamp.volatile})
    assert outs[0] == outs[1]
    e = outs[0]["extraction"]
    details = e["methods"][0]["details"]
    assert e["round_decimals"] == 3 and e["queries"] == details["equation_queries"] + details["probe_queries"]
    assert e["rounded"][0]["round_decimals"] == 3 and e["rounded"][0]["queries"] == e["queries"]
    assert e["agreement_test"] > 0.99
