"""Exit statuses of the command line: 0 consistent, 1 violation (--fail-above-claim), 2 bad input,
3 the audit could not complete (the target's own code raised, or an internal error), and --version."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

import audit
from audit.cli import main

TRAINER = textwrap.dedent('''
    def train_raises():
        def train(X, y, seed):
            raise ValueError("my training loop broke")
        return {"kind": "trainer", "dataset": "digits", "train": train, "claim": {"epsilon": 1.0, "delta": 1e-5}}

    def factory_raises():
        raise RuntimeError("boom in the factory")
''')


@pytest.fixture()
def user_module(tmp_path, monkeypatch) -> str:
    (tmp_path / "user_loop.py").write_text(TRAINER)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "user_loop"


def test_version_prints_the_installed_version() -> None:
    done = subprocess.run([sys.executable, "-m", "audit", "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    assert done.stdout.strip() == f"privacy-audit {audit.__version__}" and audit.__version__[0].isdigit()


def test_a_plugin_whose_train_raises_exits_3_with_the_traceback_in_the_log(user_module, tmp_path, capsys) -> None:
    out = tmp_path / "runs"
    code = main(["run", "dp", "--target", f"{user_module}:train_raises", "--threat", "black-box", "--canary",
                 "mislabelled", "--runs", "8", "--out", str(out), "--quiet"])
    assert code == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "could not complete" in err and "my training loop broke" in err
    log = Path(err.rsplit("traceback in ", 1)[1].rstrip(")\n"))
    assert log.name == "log.txt" and log.parent.parent == out
    text = log.read_text()
    assert "Traceback" in text and "ValueError: my training loop broke" in text


def test_a_factory_that_raises_exits_3_before_any_run(user_module, tmp_path, capsys) -> None:
    code = main(["run", "dp", "--target", f"{user_module}:factory_raises", "--out", str(tmp_path / "runs"), "--quiet"])
    assert code == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "boom in the factory" in err and "run again with -v for its traceback" in err
    temp = set(Path(tempfile.gettempdir()).glob("privacy-audit-error-*"))
    assert main(["run", "dp", "--target", f"{user_module}:factory_raises", "--out", str(tmp_path / "runs"), "-v"]) == 3
    err = capsys.readouterr().err  # -v: the traceback on stderr, no file left in the temporary folder
    assert "Traceback" in err and "RuntimeError: boom in the factory" in err
    assert set(Path(tempfile.gettempdir()).glob("privacy-audit-error-*")) == temp


def test_an_internal_error_inside_a_run_exits_3(monkeypatch, tmp_path, capsys) -> None:
    import audit.mechanism.runner

    def broken(*args, **kwargs):
        raise ZeroDivisionError("a bug in the workbench")

    monkeypatch.setattr(audit.mechanism.runner, "mechanism_bounds", broken)
    code = main(["run", "mechanism", "--target", "laplace_count", "--draws", "100", "--out", str(tmp_path),
                 "--quiet", "--fail-above-claim"])
    assert code == 3  # never 1: an incomplete audit is not a violation
    err = capsys.readouterr().err
    assert "internal error: ZeroDivisionError: a bug in the workbench" in err and err.count("\n") == 1


def test_bad_input_exits_2_and_a_violation_exits_1(tmp_path, capsys) -> None:
    assert main(["run", "mechanism", "--target", "no_such_target", "--out", str(tmp_path)]) == 2
    assert main(["run", "mechanism", "--target", "broken_laplace_half_scale", "--draws", "20000", "--quiet",
                 "--out", str(tmp_path), "--fail-above-claim"]) == 1
    assert main(["run", "mechanism", "--target", "laplace_count", "--draws", "2000", "--quiet",
                 "--out", str(tmp_path), "--fail-above-claim"]) == 0
    capsys.readouterr()
