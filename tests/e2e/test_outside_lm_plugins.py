"""LM plugins written from the user docs alone (tests/fixtures/outside_lm.py: a character GPT-2 under Opacus,
full fine-tuning and PEFT LoRA, and a trained LM for ``run membership``), run through the command line as
docs/reference/plugins.md says: exit codes, one-line errors, progress lines, results.json (issue 35)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("opacus")
pytest.importorskip("peft")
pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[2]
TINY = {"OUTSIDE_N": "24", "OUTSIDE_EPOCHS": "1", "OUTSIDE_WIDTH": "8"}


def _audit(tmp_path: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "audit", *args, "--out", str(tmp_path / "runs")],
                          capture_output=True, text=True, cwd=ROOT,
                          env=os.environ | {"PYTHONPATH": str(ROOT)} | TINY | (env or {}))


def _results(tmp_path: Path) -> dict:
    (found,) = (tmp_path / "runs").glob("*/results.json")
    return json.loads(found.read_text())


def test_opacus_lora_gpt2_one_run_is_consistent_with_its_claim(tmp_path):
    done = _audit(tmp_path, "run", "dp", "--target", "tests.fixtures.outside_lm:lora", "--one-run", "--quick",
                  "--fail-above-claim")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "verdict:   consistent" in done.stdout and "as claimed" in done.stdout
    assert "[5/5] audited run: the training on all 24 texts" in done.stderr and "Traceback" not in done.stderr
    # the probe, its repeat, the language-model checks' replay, one text more and one less, the audited run
    assert "on all 24 texts; 6 calls of the code's training in all (probe, the first steps of its repeat, the " \
           "language-model checks' replay, " in done.stdout
    assert _results(tmp_path)["verdict"]["status"] == "consistent"


@pytest.mark.parametrize(("factory", "says"), [
    ("default_positions", "position_ids of shape (B, L)"),
    ("optimizer_before_peft", "build the optimizer after get_peft_model"),
])
def test_user_mistakes_are_one_line_exit_2(tmp_path, factory, says):
    done = _audit(tmp_path, "run", "dp", "--target", f"tests.fixtures.outside_lm:{factory}", "--check-config", "-q")
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode == 2 and len(errors) == 1 and says in errors[0], done.stderr[-2000:]
    assert "Traceback" not in done.stderr


def test_black_box_refuses_claim_opacus_and_runs_with_a_stated_claim(tmp_path):
    done = _audit(tmp_path, "run", "dp", "--target", "tests.fixtures.outside_lm:full", "--one-run",
                  "--threat", "black-box", "-q")
    assert done.returncode == 2 and "needs a stated claim" in done.stderr
    done = _audit(tmp_path, "run", "dp", "--target", "tests.fixtures.outside_lm:full_stated", "--one-run",
                  "--threat", "black-box", "--canaries", "16", "--quick", "--fail-above-claim", "-q")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "16 new-token canaries" in done.stdout


def test_membership_of_a_trained_lm_counts_only_the_stages_that_run(tmp_path):
    done = _audit(tmp_path, "run", "membership", "--target", "tests.fixtures.outside_lm:model", "--references", "1",
                  env={"OUTSIDE_N": "40"})
    assert done.returncode == 0, done.stderr[-2000:]
    # a plugin that is already trained has no fine-tuning stage: three stages, numbered without a gap
    assert "[1/3] text blind split check" in done.stderr and "[2/3] queries" in done.stderr
    assert "[3/3] references" in done.stderr and "/4]" not in done.stderr
    results = _results(tmp_path)
    assert {"loss", "zlib", "min_k", "reference"} <= set(results["attacks"])

