"""LM plugins written from the user docs alone (tests/fixtures/outside_lm.py: a character GPT-2 under Opacus,
full fine-tuning and PEFT LoRA, and a trained LM for ``run membership``), run through the command line as
docs/reference/plugins.md says: exit codes, one-line errors, progress lines, results.json (issue 35).

The command line runs in this process (:func:`audit.cli.main`, its output captured): a subprocess would spend
its first ~10 s importing torch, transformers and Opacus again. What is tested here is the plugin contract through
the command line's code (exit status, lines printed, results.json); ``python -m audit`` as a process of its own is
tested by tests/cli/ and test_exit_codes.py.
The plugin module reads its sizes from the environment on import; here they are set on the module."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from audit.cli import main

pytest.importorskip("opacus")
pytest.importorskip("peft")
pytest.importorskip("transformers")

#: The sizes of the plugins here (OUTSIDE_N texts, OUTSIDE_EPOCHS, OUTSIDE_WIDTH of tests/fixtures/outside_lm.py).
TINY = {"N": 24, "EPOCHS": 1, "WIDTH": 8}


@pytest.fixture()
def outside(monkeypatch):
    """tests/fixtures/outside_lm.py at the tiny size (restored after the test)."""
    module = pytest.importorskip("tests.fixtures.outside_lm")
    for name, value in TINY.items():
        monkeypatch.setattr(module, name, value)
    return module


def _audit(tmp_path: Path, capsys, *args: str) -> tuple[int, str, str]:
    """``python -m audit ARGS --out tmp_path/runs`` in this process: (exit status, stdout, stderr)."""
    code = main([*args, "--out", str(tmp_path / "runs")])
    out, err = capsys.readouterr()
    return code, out, err


def _results(tmp_path: Path) -> dict:
    (found,) = (tmp_path / "runs").glob("*/results.json")
    return json.loads(found.read_text())


def test_opacus_lora_gpt2_one_run_is_consistent_with_its_claim(outside, tmp_path, capsys):
    code, out, err = _audit(tmp_path, capsys, "run", "dp", "--target", "tests.fixtures.outside_lm:lora", "--one-run",
                            "--quick", "--fail-above-claim")
    assert code == 0, err[-2000:]
    assert "verdict:   consistent" in out and "as claimed" in out
    assert "[5/5] audited run: the training on all 24 texts" in err and "Traceback" not in err
    # the probe, its repeat and the first steps from another seed, the language-model checks' replay, one text more
    # and one less, the audited run
    assert "on all 24 texts; 7 calls of the code's training in all (probe, the first steps of its repeat and of a " \
           "run from another seed, the language-model checks' replay, " in out
    assert _results(tmp_path)["verdict"]["status"] == "consistent"


@pytest.mark.parametrize(("factory", "says"), [
    ("default_positions", "position_ids of shape (B, L)"),
    ("optimizer_before_peft", "build the optimizer after get_peft_model"),
])
def test_user_mistakes_are_one_line_exit_2(outside, tmp_path, capsys, factory, says):
    code, _, err = _audit(tmp_path, capsys, "run", "dp", "--target", f"tests.fixtures.outside_lm:{factory}",
                          "--check-config", "-q")
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 2 and len(errors) == 1 and says in errors[0], err[-2000:]
    assert "Traceback" not in err


def test_black_box_refuses_claim_opacus_and_runs_with_a_stated_claim(outside, tmp_path, capsys):
    code, _, err = _audit(tmp_path, capsys, "run", "dp", "--target", "tests.fixtures.outside_lm:full", "--one-run",
                          "--threat", "black-box", "-q")
    assert code == 2 and "needs a stated claim" in err
    code, out, err = _audit(tmp_path, capsys, "run", "dp", "--target", "tests.fixtures.outside_lm:full_stated",
                            "--one-run", "--threat", "black-box", "--canaries", "16", "--quick", "--fail-above-claim",
                            "-q")
    assert code == 0, err[-2000:]
    assert "16 new-token canaries" in out


def test_membership_of_a_trained_lm_counts_only_the_stages_that_run(outside, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(outside, "N", 40)
    code, _, err = _audit(tmp_path, capsys, "run", "membership", "--target", "tests.fixtures.outside_lm:model",
                          "--references", "1")
    assert code == 0, err[-2000:]
    # a plugin that is already trained has no fine-tuning stage: three stages, numbered without a gap
    assert "[1/3] text blind split check" in err and "[2/3] queries" in err
    assert "[3/3] references" in err and "/4]" not in err
    results = _results(tmp_path)
    assert {"loss", "zlib", "min_k", "reference"} <= set(results["attacks"])

