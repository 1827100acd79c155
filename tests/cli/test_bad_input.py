"""Bad input to the command line, in one table: every mistake is one line on stderr, exit 2, and an earlier
run in the same --out folder stays untouched (nothing is trained: each is refused before a run starts)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from audit.cli import main


def _unwritable(tmp_path: Path) -> str:
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    return str(blocker / "runs")


def _plugin_dir(tmp_path: Path) -> str:
    (tmp_path / "bad_plugin_mod.py").write_text(
        "def factory():\n    return [1, 2, 3]\n\n"
        "def imagenet():\n    return {'kind': 'trainer', 'dataset': 'imagenet', 'train': len,\n"
        "            'claim': {'epsilon': 1.0, 'delta': 1e-5}}\n")
    return str(tmp_path)


#: (argv after `python -m audit`, text the one-line error must contain). OUT is replaced by a
#: folder holding an earlier run, which must stay untouched.
BAD_INPUT = [
    (["run", "membership", "--target", "nope"], "unknown target 'nope'"),
    (["run", "mechanism", "--target", "nope"], "unknown mechanism target"),
    (["bound", "--target", "nope"], "unknown target"),
    (["run", "membership", "--target", "dpsgd_digits", "--attack", "telepathy"], "unknown attack"),
    (["run", "membership", "--target", "dpsgd_digits", "--canary", "purple"], "invalid choice: 'purple'"),
    (["run", "dp", "--target", "dpsgd_digits", "--canary", "purple"], "invalid choice: 'purple'"),
    (["run", "dp", "--target", "dpsgd_digits", "--threat", "psychic"], "invalid choice: 'psychic'"),
    (["run", "membership", "--target", "dpsgd_digits", "--epsilon", "0"], "epsilon must be a positive"),
    (["run", "membership", "--target", "dpsgd_digits", "--epsilon", "-2"], "epsilon must be a positive"),
    (["run", "mechanism", "--target", "laplace_count", "--epsilon", "0"], "epsilon must be a positive"),
    (["run", "membership", "--target", "dpsgd_digits", "--delta", "0"], "delta must lie in (0, 1)"),
    (["run", "membership", "--target", "dpsgd_digits", "--delta", "1.5"], "delta must lie in (0, 1)"),
    (["bound", "--target", "dpsgd_mnist", "--delta", "1"], "delta must lie in (0, 1)"),
    (["run", "dp", "--target", "dpsgd_digits", "--runs", "1"], "at least"),
    (["run", "membership", "--target", "dpsgd_mnist", "--data-dir", "/no/such/folder"], "/no/such/folder"),
    (["run", "membership", "--target", "dpsgd_mnist", "--data-dir", "EMPTY"], "train-images-idx3-ubyte"),
    (["run", "dp", "--target", "bad_plugin_mod:factory", "--threat", "black-box", "--canary", "mislabelled"],
     "must return a dict"),
    (["run", "dp", "--target", "no_such_plugin_module:factory"], "cannot import plugin module"),
    (["run", "dp", "--target", "bad_plugin_mod:imagenet", "--threat", "black-box", "--canary", "natural"],
     "unknown dataset 'imagenet'"),
    (["run", "membership", "--target", "nonprivate_digits", "--quick", "--out", "UNWRITABLE"], "pass a writable --out"),
    (["run", "mechanism", "--target", "laplace_count", "--out", "UNWRITABLE"], "pass a writable --out"),
    (["run", "membership", "--target", "nonprivate_digits", "--epsilon", "1"], "not private"),
    (["run", "mechanism", "--target", "laplace_count", "--data-dir", "/tmp"], "does not apply"),
    (["run", "dp", "--target", "dpsgd_digits", "--canary", "dirac", "--threat", "black-box"], "gradient canary"),
    (["run", "mechanism", "--target", "dpsgd_digits"], "not a mechanism"),
    (["run", "membership", "--target", "dpsgd_digits", "--canaries", "0"], "expected an integer >= 1"),
    (["report", "/no/such/run"], "does not exist"),
    (["run", "membership", "--target", "dpsgd_digits", "--max-memory", "12XB"], "cannot read memory size"),
    (["run", "dp", "--target", "dpsgd_digits", "--one-run", "--guesses", "35:3"], "K, K:0 (one-sided) or K:K"),
    (["run", "dp", "--target", "dpsgd_digits", "--input-canaries", "10"], "--input-canaries M applies to --one-run"),
]
if not torch.cuda.is_available():
    BAD_INPUT.append((["run", "membership", "--target", "dpsgd_digits", "--device", "cuda"], "no CUDA GPU"))


@pytest.mark.parametrize("argv, message", BAD_INPUT, ids=[" ".join(a[:4]) + " " + m[:20] for a, m in BAD_INPUT])
def test_bad_input_is_one_line_exit_2_and_earlier_runs_untouched(argv, message, tmp_path, monkeypatch, capsys):
    out = tmp_path / "runs"
    earlier = out / "20260101T000000Z-membership-dpsgd_digits"
    earlier.mkdir(parents=True)
    (earlier / "results.json").write_text('{"kept": true}')
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.syspath_prepend(_plugin_dir(tmp_path))
    argv = [{"EMPTY": str(empty), "UNWRITABLE": _unwritable(tmp_path)}.get(a, a) for a in argv]
    if argv[0] == "run" and "--out" not in argv:
        argv += ["--out", str(out)]
    with pytest.raises(SystemExit) as exited:
        sys.exit(main(argv))
    assert exited.value.code == 2
    captured = capsys.readouterr()
    assert message in captured.err, captured.err
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err
    assert (earlier / "results.json").read_text() == '{"kept": true}'
    assert sorted(p.name for p in out.iterdir()) in (["20260101T000000Z-membership-dpsgd_digits"],
                                                     ["20260101T000000Z-membership-dpsgd_digits", "cache"])
