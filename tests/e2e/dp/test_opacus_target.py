"""`opacus_mnist`: Opacus-trained DP-SGD audited black-box like a user's plugin."""

from __future__ import annotations

import json

import pytest

from audit.cli import main
from audit.target_theory import theory_for

pytest.importorskip("opacus")


def test_opacus_claim_compares_accountants():
    theory = theory_for("opacus_mnist")
    assert theory.epsilon == pytest.approx(2.0, abs=2e-3)
    p = theory.params
    # Opacus's RDP accountant is looser than PLD; its PRV accountant agrees with PLD closely.
    assert p["opacus_rdp_epsilon"] > theory.epsilon
    assert p["opacus_prv_epsilon"] == pytest.approx(theory.epsilon, abs=0.05)


def test_opacus_mnist_runs_through_the_dp_audit(tmp_path, capsys):
    assert main(["run", "dp", "--target", "opacus_mnist", "--threat", "black-box", "--canary", "crafted",
                 "--runs", "8", "--quiet", "--out", str(tmp_path)]) == 0
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir() and p.name != "cache"]
    results = json.loads((run / "results.json").read_text())
    assert results["game"]["runs"] == 8 and results["params"]["plugin"] == "opacus_mnist"
    assert results["epsilon_theory"] == pytest.approx(2.0, abs=2e-3)
    assert results["verdict"]["status"] == "consistent"
    capsys.readouterr()


def test_opacus_mnist_updates_go_through_the_canary_step_path(tmp_path, capsys):
    """The update-level audit of opacus_mnist: its 50 noisy steps observed on a dead MNIST pixel's
    weight, the claim's accounting (sigma, q = 0.1, T = 50) equal to what the code runs."""
    assert main(["run", "dp", "--target", "opacus_mnist", "--threat", "updates", "--canary", "dirac",
                 "--runs", "4", "--quiet", "--out", str(tmp_path)]) == 0
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir() and p.name != "cache"]
    results = json.loads((run / "results.json").read_text())
    code = results["params"]["code"]
    assert code["steps"] == 50 and code["sample_rate"] == pytest.approx(0.1) and results["game"]["canary"]["dead"]
    assert code["epsilon_pld"] == pytest.approx(results["epsilon_theory"], rel=1e-6)
    assert results["game"]["threshold_strategy"] == "bonferroni-grid"
    assert any(b["method"] == "per-step-composed" for b in results["lower_bounds"])
    capsys.readouterr()
