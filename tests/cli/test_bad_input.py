"""Bad input to the command line, in one table: every mistake is one line on stderr, exit 2, and an earlier
run in the same --out folder stays untouched (nothing is trained: each is refused before a run starts)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from audit.cli import main
from audit.errors import UserError
from audit.kinds import run_kinds
from audit.run_options import CommonRunOptions


def _unwritable(tmp_path: Path) -> str:
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    return str(blocker / "runs")


def _plugin_dir(tmp_path: Path) -> str:
    (tmp_path / "bad_plugin_mod.py").write_text(
        "import os\n\n"
        "def factory():\n    return [1, 2, 3]\n\n"
        "def imagenet():\n    return {'kind': 'trainer', 'dataset': 'imagenet', 'train': len,\n"
        "            'claim': {'epsilon': 1.0, 'delta': 1e-5}}\n\n"
        "def objects():\n    return {'kind': 'trainer', 'train': len, 'claim': {'epsilon': 1.0, 'delta': 1e-5},\n"
        "            'dataset': os.path.join(os.path.dirname(__file__), 'objects.npz')}\n")
    np.savez(tmp_path / "objects.npz", X=np.array([[1.0, "a"]] * 12, dtype=object), y=np.arange(12) % 2)
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
    # issue 53: claims beyond what the theory computes, seeds the generators refuse, an empty --out: at parsing
    (["run", "dp", "--target", "dpsgd_mnist", "--epsilon", "1e308"], "epsilon must be at most 32"),
    (["run", "mechanism", "--target", "laplace_count", "--epsilon", "1e308"], "epsilon must be at most 32"),
    (["run", "membership", "--target", "dpsgd_digits", "--epsilon", "33"], "epsilon must be at most 32"),
    (["sweep", "dp", "--target", "dpsgd_digits", "--epsilons", "1,1e308"], "each epsilon must be at most 32"),
    (["bound", "--target", "dpsgd_mnist", "--epsilon", "1e308"], "epsilon must be at most 32"),
    (["run", "dp", "--target", "dpsgd_mnist", "--delta", "1e-300"], "delta must be at least 1e-12"),
    (["bound", "--target", "laplace_count", "--delta", "1e-300"], "delta must be at least 1e-12"),
    (["run", "mechanism", "--target", "gaussian_classic", "--delta", "0.5"], "delta must be at most 0.001"),
    (["run", "mechanism", "--target", "laplace_count", "--seed", "-5"], "seed must be at least 0"),
    (["run", "dp", "--target", "dpsgd_digits", "--seed", "4294967296"], "seeds run from 0 to 2**32 - 1"),
    (["sweep", "dp", "--target", "dpsgd_digits", "--seed", "-1"], "seed must be at least 0"),
    (["run", "mechanism", "--target", "laplace_count", "--out", ""], "the output folder must be a path"),
    (["run", "dp", "--target", "bad_plugin_mod:objects", "--threat", "black-box", "--canary", "natural"],
     "objects.npz holds object arrays, which need pickling to load, and loading pickles is refused"),
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


#: Every command that writes under --out, with its other arguments (each audit kind's ``run``/``sweep``, and
#: ``compare``, ``bound``, ``rerun``); none of them gets as far as reading a target or a run folder.
COMMANDS_WITH_OUT = [[*kind.command.split(), "--target", "laplace_count"] for kind in run_kinds()] + [
    ["compare", "A", "B"], ["bound", "--target", "laplace_count"], ["rerun", "A"]]


@pytest.mark.parametrize("out", ["", "   "], ids=["empty", "blank"])
@pytest.mark.parametrize("argv", COMMANDS_WITH_OUT, ids=[" ".join(a[:2]) for a in COMMANDS_WITH_OUT])
def test_an_empty_out_is_refused_at_parsing_and_nothing_is_written(argv, out, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main([*argv, "--out", out]) == 2
    err = capsys.readouterr().err
    assert "the output folder must be a path" in err and err.count("\n") == 1
    assert not any(tmp_path.iterdir())


#: Every command that takes --seed, and --epsilon (the options every run kind shares).
RUN_COMMANDS = [[*kind.command.split(), "--target", "laplace_count"] for kind in run_kinds()]


@pytest.mark.parametrize("option, value, message", [
    ("--seed", "-5", "seed must be at least 0 (got '-5'): seeds run from 0 to 2**32 - 1 = 4294967295"),
    ("--seed", str(2 ** 32), "seed must be at most 4294967295"),
    ("--epsilon", "1e308", "epsilon must be at most 32 (got '1e308'): the DP-SGD noise calibration"),
    ("--delta", "1e-300", "delta must be at least 1e-12 (got '1e-300'): dp-accounting's PLD search"),
    ("--delta", "0.01", "delta must be at most 0.001 (got '0.01'): a larger delta lets a mechanism publish"),
])
@pytest.mark.parametrize("argv", RUN_COMMANDS, ids=[" ".join(a[:2]) for a in RUN_COMMANDS])
def test_every_run_command_checks_seed_and_claim_at_parsing(argv, option, value, message, tmp_path, capsys):
    assert main([*argv, option, value, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("seed", [-5, 2 ** 32, 1.5, True])
def test_run_options_refuse_a_seed_the_generators_refuse(seed) -> None:
    """What parsing does not see (``rerun`` of an edited config.json, a library caller) is refused where the
    options are made, before a run folder exists."""
    with pytest.raises(UserError, match=r"seed must be an integer from 0 to 4294967295 = 2\*\*32 - 1"):
        CommonRunOptions(target="laplace_count", seed=seed)
    assert CommonRunOptions(target="laplace_count", seed=2 ** 32 - 1).seed == 2 ** 32 - 1
