"""End-to-end: the flagship membership audit on the --quick preset, through the CLI (``audit.cli.main`` in this
process, its output read with ``capsys``: a subprocess would only import torch again, tests/README.md)."""

import json
import sys

import pytest

from audit.cli import main
from audit.run_context import SCHEMA_VERSION


@pytest.mark.parametrize("target", ["dpsgd_mnist"])
def test_flagship_quick_writes_report_and_bound_below_theory(tmp_path, target, capsys):
    code = main(["run", "membership", "--target", target, "--quick", "--quiet", "--out", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = out.strip().splitlines()
    assert lines[0].startswith("report:") and lines[1].startswith("theory:")
    run_dirs = [p for p in tmp_path.iterdir() if p.is_dir() and p.name != "cache"]
    assert len(run_dirs) == 1
    run = run_dirs[0]
    for name in ("config.json", "results.json", "report.html", "roc.png", "tradeoff.png"):
        assert (run / name).is_file(), name
    assert run.name in (tmp_path / "index.html").read_text()  # the command refreshed the index of the runs
    results = json.loads((run / "results.json").read_text())
    assert results["schema_version"] == SCHEMA_VERSION
    for key in ("noise_multiplier", "clip_norm", "sample_rate", "steps"):
        assert key in results["params"]
    assert results["epsilon_theory"] == pytest.approx(8.0, rel=1e-3)
    for bound in results["lower_bounds"]:
        assert {"method", "epsilon", "confidence", "n", "valid"} <= set(bound)
        if bound["valid"]:
            assert float(bound["epsilon"]) <= results["epsilon_theory"]
    from attacks.names import ATTACKS
    from audit.stats.metrics import dp_advantage_bound

    # the default --attack is all: every attack in one report, LiRA online and offline included
    assert set(results["attacks"]) == set(ATTACKS)
    assert {b["attack"] for b in results["lower_bounds"]} == set(ATTACKS)
    bound = dp_advantage_bound(results["epsilon_theory"], results["delta"])
    for attack in results["attacks"].values():
        assert set(attack["tpr_at_fpr"]) == {"0.01", "0.001"}
        assert attack["advantage_dp_bound"] == pytest.approx(bound)
        assert attack["advantage_ci"][0] <= bound
    assert results["game"]["reference_models"] == 4
    assert results["verdict"]["status"] == "consistent"
    # beside the bound: the last-iterate reference of the training it ran and the final-model expectation
    reference, guesses = results["last_iterate"], results["best_lower_bound"]["details"]
    assert reference["steps"] == results["params"]["steps"] and 0 < reference["epsilon"] < results["epsilon_theory"]
    expected = reference["expected_bound"]
    assert (expected["k_pos"], expected["k_neg"]) == (guesses["k_pos"], guesses["k_neg"])
    assert 0 <= expected["mean"] <= results["ceiling"]["epsilon"]
    assert any(line.startswith("reference: last-iterate heuristic epsilon ~ ") for line in lines)


def test_unknown_target_is_one_line_error(tmp_path, capsys):
    code = main(["run", "membership", "--target", "nope", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip().count("\n") == 0 and "unknown target" in err


@pytest.mark.parametrize("flag", [["--epsilon", "0"], ["--delta", "1.5"]])
def test_bad_privacy_parameters_rejected(tmp_path, flag, capsys):
    code = main(["run", "membership", "--target", "dpsgd_mnist", "--out", str(tmp_path), *flag])
    assert code == 2 and "Traceback" not in capsys.readouterr().err


def test_list_shows_flagship_targets(capsys):
    code = main(["list"])
    out = capsys.readouterr().out
    assert code == 0 and "dpsgd_mnist" in out and "nonprivate_mnist" in out


def test_output_into_a_closed_pipe_ends_quietly(monkeypatch):
    """`python -m audit list | head`: the reader stops early; the command ends with 0, no traceback."""
    import os

    read_end, write_end = os.pipe()
    os.close(read_end)
    stream = open(write_end, "w", buffering=1)  # line-buffered: the first line already hits the closed pipe
    monkeypatch.setattr(sys, "stdout", stream)
    try:
        assert main(["list"]) == 0
    finally:
        stream.close()
