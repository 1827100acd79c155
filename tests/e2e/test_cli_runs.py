"""The command line's runs, end to end: a trainer plugin audited by ``run dp`` with no threat or canary named, the
log of a run following -v/--quiet while its log.txt keeps everything, and ``rerun`` reproducing a run from its
config.json (the command line's fast checks: tests/cli/test_cli.py)."""

from __future__ import annotations

import json
import textwrap

import pytest
from helpers import read_results, without_volatile

from audit.cli import main

TRAINER = textwrap.dedent('''
    import numpy as np

    def trainer():
        def train(X, y, seed):
            rng = np.random.default_rng(seed)
            prior = np.bincount(y, minlength=10) / len(y)
            noisy = np.clip(prior + rng.normal(0, 0.01, 10), 1e-3, None)
            return lambda Z: np.tile(noisy / noisy.sum(), (len(Z), 1))
        return {"kind": "trainer", "dataset": "digits", "train": train, "claim": {"epsilon": 1.0, "delta": 1e-5}}
''')


@pytest.fixture
def trainer_module(tmp_path, monkeypatch):
    (tmp_path / "cli_trainer_mod.py").write_text(TRAINER)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "cli_trainer_mod"


def test_run_dp_on_a_trainer_plugin_needs_no_threat_or_canary(trainer_module, tmp_path, capsys):
    assert main(["run", "dp", "--target", f"{trainer_module}:trainer", "--runs", "20", "--quiet",
                 "--out", str(tmp_path / "runs")]) == 0
    run_dir = next((tmp_path / "runs").glob("*-dp-*"))
    config = json.loads((run_dir / "config.json").read_text())
    assert (config["options"]["threat"], config["options"]["canary"]) == ("black-box", "crafted")
    # an explicit choice the plugin cannot take stays a one-line error
    capsys.readouterr()
    assert main(["run", "dp", "--target", f"{trainer_module}:trainer", "--threat", "updates", "--runs", "20",
                 "--quiet", "--out", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "black-box" in err


def test_run_log_follows_verbosity_and_log_txt_keeps_everything(tmp_path, capsys):
    argv = ["run", "mechanism", "--target", "laplace_count", "--draws", "2000"]
    assert main([*argv, "--quiet", "--out", str(tmp_path / "q")]) == 0
    assert capsys.readouterr().err == ""
    assert main([*argv, "--out", str(tmp_path / "n")]) == 0
    err = capsys.readouterr().err
    assert "auditing" in err and "wrote config.json" not in err
    assert main([*argv, "-v", "--out", str(tmp_path / "v")]) == 0
    assert "wrote config.json and results.json" in capsys.readouterr().err
    for name in "qnv":
        log = next((tmp_path / name).glob("*-mechanism-*")).joinpath("log.txt").read_text()
        assert "auditing" in log and "wrote config.json" in log and "report written" in log
        assert log.splitlines()[0][:4].isdigit() and log.splitlines()[0][19] == "Z"


@pytest.mark.parametrize("argv", [
    ["run", "mechanism", "--target", "laplace_count", "--draws", "3000", "--seed", "4"],
    ["run", "dp", "--target", "dpgd_logreg_digits", "--runs", "40", "--device", "cpu", "--epsilon", "2"],
])
def test_rerun_reproduces_a_run_from_its_config(argv, tmp_path, capsys):
    out = tmp_path / "runs"
    assert main([*argv, "--quiet", "--out", str(out)]) == 0
    (first,) = out.glob("2*")
    assert main(["rerun", str(first), "--quiet"]) == 0
    assert "report:" in capsys.readouterr().out
    second = next(p for p in out.glob("2*") if p != first)
    assert without_volatile(read_results(first)) == without_volatile(read_results(second))
    assert json.loads((first / "config.json").read_text())["options"] == \
        json.loads((second / "config.json").read_text())["options"]
