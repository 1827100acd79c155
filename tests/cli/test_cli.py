"""The command line meets its users where they are: fast help, list and bad-input errors (nothing heavy
imported), defaults that fit the target (its runs, logging with -v/--quiet and rerun: tests/e2e/test_cli_runs.py)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap
import time

import pytest
from helpers import ROOT

from audit.arguments import number, numbers
from audit.cli import main
from audit.target_defaults import build_catalogue, stored_catalogue, target_use

HEAVY = ("torch", "sklearn", "matplotlib", "scipy", "numpy")

#: Commands that must answer without importing anything heavy (argv, exit status).
LIGHT_COMMANDS = [
    (["--help"], 0), (["--version"], 0), (["list"], 0), (["run", "--help"], 0), (["run", "dp", "--help"], 0),
    (["run", "membership", "--help"], 0), (["sweep", "dp", "--help"], 0), (["bound", "--help"], 0),
    (["report", "--help"], 0), (["rerun", "--help"], 0),
    (["run", "dp", "--target", "nope"], 2), (["run", "mechanism", "--target", "dpsgd_mnist"], 2),
    (["run", "dp", "--target", "laplace_count"], 2), (["bound", "--target", "nonprivate_mnist"], 2),
    (["run", "dp", "--target", "dpsgd_digits", "--epsilon", "0"], 2),
    (["run", "dp", "--target", "dpsgd_digits", "--canary", "purple"], 2),
    (["run", "membership", "--target", "dpsgd_digits", "--delta", "1.5"], 2),
    (["report", "/no/such/run"], 2), (["rerun", "/no/such/run"], 2), (["frobnicate"], 2),
]


def test_help_list_version_and_bad_input_import_nothing_heavy():
    """Every light command in one fresh interpreter: the exit statuses, and none of torch, scikit-learn,
    matplotlib, scipy or numpy in sys.modules afterwards (what makes them answer in well under 0.5 s)."""
    script = textwrap.dedent(f"""
        import contextlib, io, json, sys
        from audit.cli import main
        codes = []
        for argv, _ in {LIGHT_COMMANDS!r}:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                codes.append(main(argv))
        print(json.dumps({{"codes": codes, "heavy": [m for m in {HEAVY!r} if m in sys.modules]}}))
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["heavy"] == []
    assert out["codes"] == [code for _, code in LIGHT_COMMANDS]


def test_help_answers_quickly():
    """A generous wall-time check of a fresh ``python -m audit --help`` (best of three; about 0.1 s on an
    idle laptop, 3 s before the imports were made lazy)."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "audit", "--help"], cwd=ROOT, capture_output=True, check=True, timeout=60)
        best = min(best, time.perf_counter() - started)
    assert best < 1.5


@pytest.mark.parametrize("parse, text, value_or_error", [
    (number(int, minimum=1), "3", 3),
    (number(int, minimum=1), "0", "expected an integer >= 1, got '0'"),
    (number(int, minimum=1), "2.5", "expected an integer >= 1, got '2.5'"),
    (number(int, minimum=0, maximum=15), "15", 15),
    (number(int, minimum=0, maximum=15), "16", "expected an integer in [0, 15], got '16'"),
    (number(float, minimum=0, maximum=1, open_min=True), "1", 1.0),
    (number(float, minimum=0, maximum=1, open_min=True), "0", "expected a number in (0, 1], got '0'"),
    (number(float, minimum=0, open_min=True), "inf", "expected a positive finite number, got 'inf'"),
    (number(float, minimum=0), "nan", "expected a finite number >= 0, got 'nan'"),
    (number(float, minimum=0, maximum=1, open_min=True, open_max=True, name="delta", example="1e-5"), "1",
     "delta must lie in (0, 1) (got '1'); e.g. 1e-5"),
    (numbers(float, minimum=0, open_min=True), " 1, 2,", (1.0, 2.0)),
    (numbers(float, minimum=0, open_min=True, name="epsilons"), "1,-2",
     "epsilons must be comma-separated, each a positive finite number (got '1,-2')"),
    (numbers(int), ",", "expected comma-separated, each an integer, got ','"),
])
def test_number_types_accept_their_interval_and_name_it_in_one_line(parse, text, value_or_error):
    if not isinstance(value_or_error, str):
        assert parse(text) == value_or_error
        return
    with pytest.raises(argparse.ArgumentTypeError) as err:
        parse(text)
    assert str(err.value) == value_or_error


def test_stored_catalogue_is_current():
    """``audit/catalogue.json`` (read by list and --help) matches the registries; regenerate it with
    ``python -m audit.target_defaults`` after adding a target."""
    assert stored_catalogue() == json.loads(json.dumps(build_catalogue()))


@pytest.mark.parametrize("name, threat, canary", [
    ("dpsgd_digits", "updates", "dirac"),                            # MLP: a first-layer weight on a dead pixel
    ("dpsgd_mnist", "updates", "gradient"),                          # CNN: no such weight
    ("dpsgd_control_shuffle_as_poisson", "updates", "dirac-replace"),  # the pair that catches shuffling
    ("dperm_digits", "white-box", "crafted"),
    ("dpsgd_control_correct", "black-box", "crafted"),               # a built-in trainer plugin
])
def test_run_dp_defaults_fit_the_target(name, threat, canary):
    use = target_use(name)
    assert (use.default_threat, use.default_canary) == (threat, canary)
    assert threat in use.threats and canary in use.canaries and "dp" in use.run_kinds


def test_list_and_help_name_each_targets_kinds_and_defaults(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.strip().startswith("dpsgd_digits"))
    detail = out.splitlines()[out.splitlines().index(line) + 1]
    assert "run membership" in detail and "run dp threats" in detail and "(default dirac)" in detail
    assert main(["run", "dp", "--help"]) == 0
    out = capsys.readouterr().out
    assert "dpsgd_mnist: threats black-box|white-box|updates (default updates)" in out
    assert "(default gradient)" in out and "dperm_digits: threats white-box (default white-box)" in out
