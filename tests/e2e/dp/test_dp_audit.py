"""``run dp`` end to end (the game's statistics and the canary trainer without a run:
tests/kinds/dp/test_dp_game.py).

Validity tests use fixed seeds and a stated failure probability: each bound holds with its
confidence, so with confidence c per bound and B bounds checked the test fails with probability
at most B (1 - c) for a correct implementation (union bound); we use c = 0.999.
"""

import json

import pytest

from audit.cli import main
from audit.dp.options import DPOptions
from audit.dp.runner import run_dp
from audit.errors import UserError


def test_run_dp_dpgd_updates_end_to_end(tmp_path):
    run_dir, results = run_dp(DPOptions(target="dpgd_logreg_digits", out=str(tmp_path), runs=200, canary="dirac",
                                        threat="updates", device="cpu", quiet=True, confidence=0.999))
    assert (run_dir / "report.html").is_file() and (run_dir / "results.json").is_file()
    saved = json.loads((run_dir / "results.json").read_text())
    assert saved["kind"] == "dp" and saved["game"]["runs"] == 200
    methods = {b["method"] for b in saved["lower_bounds"]}
    assert methods == {"clopper-pearson", "gdp", "gaussian-fit", "per-step-composed"}
    for b in saved["lower_bounds"]:  # 4 bounds at 0.999: false alarm <= 0.4%
        assert float(b["epsilon"]) <= saved["epsilon_theory"] + 1e-9
    assert saved["best_lower_bound"]["valid"] is True


def test_user_errors(tmp_path):
    with pytest.raises(UserError):
        run_dp(DPOptions(target="dpgd_logreg_digits", out=str(tmp_path), runs=8, canary="dirac", threat="black-box",
                         device="cpu", quiet=True))
    with pytest.raises(UserError):
        run_dp(DPOptions(target="nonprivate_digits", out=str(tmp_path), runs=8, canary="crafted",
                         threat="black-box", device="cpu", quiet=True))
    with pytest.raises(UserError):
        run_dp(DPOptions(target="dperm_digits", out=str(tmp_path), runs=8, canary="crafted", threat="updates",
                         quiet=True))
    assert main(["run", "dp", "--target", "dpgd_logreg_digits", "--threat", "black-box", "--canary", "dirac",
                 "--runs", "8", "--out", str(tmp_path), "--quiet"]) == 2


def test_cli_black_box_input_canary(tmp_path, capsys):
    code = main(["run", "dp", "--target", "dpgd_logreg_digits", "--threat", "black-box", "--canary", "crafted",
                 "--runs", "60", "--out", str(tmp_path), "--quiet", "--device", "cpu", "--epsilon", "2"])
    assert code == 0
    out = capsys.readouterr().out
    assert "clopper-pearson" in out and "verdict" in out


def test_run_dp_dperm_white_box(tmp_path):
    run_dir, results = run_dp(DPOptions(target="dperm_digits", out=str(tmp_path), runs=40000, canary="mislabelled",
                                        threat="white-box", quiet=True, confidence=0.999))
    methods = [b["method"] for b in results["lower_bounds"]]
    assert methods == ["clopper-pearson", "gdp", "gaussian-fit"]
    mu_pair = results["params"]["minimiser_shift"] / results["params"]["sigma"]
    for b in results["lower_bounds"]:  # 3 bounds at 0.999: false alarm <= 0.3%
        assert float(b["epsilon"]) <= results["epsilon_theory"] + 1e-9
    fit = results["lower_bounds"][2]["details"]
    # the fit estimates the pair's mu (not the claim's): within 5 standard errors
    assert abs(fit["mu_hat"] - mu_pair) < 5 * fit["mu_se"]
