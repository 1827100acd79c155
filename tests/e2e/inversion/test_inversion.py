"""``run inversion`` on a small model: evaluation accuracy above chance, the black-box variant skipped with
--black-box-steps 0, tabular targets refused (the attack itself: tests/attacks/test_inversion_attack.py)."""

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.usefixtures("one_thread")


def test_run_inversion_small_model_beats_chance(tmp_path):
    env = os.environ | {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "audit", "run", "inversion", "--target", "nonprivate_logreg_digits",
                           "--quick", "--quiet", "--out", str(tmp_path)], capture_output=True, text=True, timeout=600,
                          env=env)
    assert proc.returncode == 0, proc.stderr
    run = next(p for p in tmp_path.iterdir() if p.is_dir() and p.name != "cache")
    for name in ("config.json", "results.json", "report.html", "inversion_grid.png"):
        assert (run / name).is_file(), name
    results = json.loads((run / "results.json").read_text())
    assert results["kind"] == "inversion"
    inv = results["inversion"]
    for key in ("mse_member_mean", "ssim_member_mean", "mse_nonmember_mean", "eval_accuracy", "queries"):
        assert key in inv and key in inv["reference"]
    assert len(inv["per_class"]) == 10
    # 10 classes: chance is 0.1; 5 of 10 correct has probability < 2e-3 under chance (binomial tail).
    assert inv["eval_accuracy"] >= 0.5
    assert inv["start_baseline"]["eval_accuracy"] == pytest.approx(0.1)  # the start alone is one guess for 10 classes
    assert inv["black_box"]["queries"] > inv["queries"]
    assert {"mse_gap", "ssim_gap", "eval_accuracy_gap"} <= set(inv["member_gap"])
    assert any(t["title"].startswith("Per-class") for t in results["tables"])


def test_black_box_steps_0_skips_the_black_box_variant(tmp_path):
    """``--black-box-steps 0`` on a white-box target skips the black-box variant (it used to stop with an error
    about MI-FACE's alpha after training)."""
    from audit.cli import main

    assert main(["run", "inversion", "--target", "nonprivate_logreg_digits", "--quick", "--black-box-steps", "0",
                 "--quiet", "--out", str(tmp_path)]) == 0
    [results] = [json.loads(p.read_text()) for p in tmp_path.glob("*/results.json")]
    assert "black_box" not in results["inversion"] and results["inversion"]["config"]["black_box_steps"] == 0
