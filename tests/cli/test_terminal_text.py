"""Strings read from a results file reach the terminal with their control characters escaped (issue 53): a
tampered results.json cannot send escape sequences (ESC ], colours), a BEL or other C0/C1 controls through
``compare``'s table or an error line; and ``report`` and ``compare`` refuse an output folder they cannot write
as ``run`` does (exit 2, one line, the fix)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import FIXTURES

from audit.cli import main
from audit.io import read_json, write_json
from audit.terminal import printable

#: A window-title sequence, a colour, a BEL, a C1 CSI and a right-to-left override.
HOSTILE = "evil\x1b]0;owned\x07\x1b[31mred\x9b\u202e"


@pytest.mark.parametrize("text, shown", [
    (HOSTILE, "evil\\x1b]0;owned\\x07\\x1b[31mred\\x9b\\u202e"),
    ("dpsgd_mnist (ε = 8)\ttab\nline", "dpsgd_mnist (ε = 8)\\ttab\\nline"),
    ("plain text, spaces kept", "plain text, spaces kept"),
])
def test_printable_escapes_every_control_character(text, shown) -> None:
    assert printable(text) == shown


def _tampered(tmp_path: Path, name: str) -> Path:
    """A copy of the finished membership run whose target and attack names carry escape sequences."""
    run = tmp_path / name
    shutil.copytree(FIXTURES / "run_membership", run)
    results = read_json(run / "results.json")
    results["target"] = HOSTILE
    results["attacks"] = {f"{key}{HOSTILE}": value for key, value in results["attacks"].items()}
    write_json(run / "results.json", results)
    return run


def _no_figure(runs, path: Path, attacks) -> Path:
    """``compare_roc_plot`` without matplotlib (the figure is not what these tests read)."""
    path.write_bytes(b"a figure")
    return path


def test_compare_prints_the_results_strings_escaped(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setattr("reports.compare.compare_roc_plot", _no_figure)
    runs = [_tampered(tmp_path, "a"), _tampered(tmp_path, "b")]
    assert main(["compare", *map(str, runs), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out and "\u202e" not in out
    assert printable(HOSTILE) in out


def test_a_schema_error_shows_the_files_keys_escaped(tmp_path, capsys) -> None:
    run = _tampered(tmp_path, "a")
    results = read_json(run / "results.json")
    results["attacks"] = {HOSTILE: "not an attack"}
    write_json(run / "results.json", results)
    assert main(["report", str(run)]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err and printable(HOSTILE) in err and err.count("\n") == 1


def _read_only(*_args, **_kwargs) -> None:
    """What writing into a read-only folder raises (as root, ``chmod a-w`` stops nothing, so it is simulated)."""
    raise PermissionError(13, "Permission denied")


@pytest.mark.parametrize("command", ["report", "compare"])
def test_an_output_folder_that_cannot_be_written_is_exit_2_with_the_fix(command, tmp_path, capsys,
                                                                          monkeypatch) -> None:
    run = tmp_path / "runs" / "run"
    shutil.copytree(FIXTURES / "run_membership", run)
    if command == "report":
        monkeypatch.setattr("reports.html.make_plots", _read_only)
        argv, fix = ["report", str(run)], f"{run} (Permission denied); make it writable (chmod u+w), or copy"
    else:
        monkeypatch.setattr("reports.compare.compare_roc_plot", _read_only)
        argv, fix = ["compare", str(run), str(run), "--out", str(tmp_path / "out")], "; pass a writable --out DIR"
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot write to output directory") and fix in err
    assert err.count("\n") == 1 and "internal error" not in err


def test_report_into_a_folder_where_its_file_is_a_folder_is_exit_2(membership_run, capsys, monkeypatch) -> None:
    """The same without simulation: report.html cannot replace a folder of that name."""
    monkeypatch.setattr("reports.html.make_plots", lambda *_: [])
    (membership_run / "report.html").mkdir()
    assert main(["report", str(membership_run)]) == 2
    assert "(Is a directory); make it writable" in capsys.readouterr().err
