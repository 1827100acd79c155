"""RunContext.finish writes results.json only through the typed outcome (audit.results_file) and returns that
outcome: results that follow the schema (plain objects or typed blocks) are read back into the same types (a
kind without blocks of its own, as a new kind starts); a kind's own block is built typed by its runner and
written beside the envelope's keys, and one given as loose keys or as another type is a runner's bug;
results that do not, or that hold a key no block names, are a runner's bug, an audit that could not complete,
and no results.json is written."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from audit.errors import AuditIncomplete
from audit.io import read_json
from audit.results_file import load_outcome
from audit.run_context import RunContext
from audit.stats.blocks import Block
from audit.stats.outcome import Outcome, Table, Verdict

ENVELOPE = {"verdict": {"status": "no-claim", "text": "no claim tested"}, "lower_bounds": [],
            "best_lower_bound": None, "epsilon_theory": None, "delta": None, "confidence": 0.95}


def test_results_are_written_as_the_typed_outcome(tmp_path) -> None:
    ctx = RunContext(tmp_path, "example", "laplace_count", seed=3, quiet=True)
    with ctx:
        returned = ctx.finish(ENVELOPE, {"command": "test"}, report=False)
    outcome = load_outcome(ctx.run_dir)
    assert outcome.kind == "example" and outcome.seed == 3 and outcome.verdict.status == "no-claim"
    assert isinstance(returned, Outcome) and returned == outcome  # what the runner returns is what the file holds


def test_typed_blocks_are_written_as_their_objects(tmp_path) -> None:
    plain, typed = RunContext(tmp_path / "a", "example", "x", seed=3, quiet=True), \
        RunContext(tmp_path / "b", "example", "x", seed=3, quiet=True)
    table = {"title": "T", "columns": ["c"], "rows": [[1]], "caption": "a table"}
    with plain:
        a = plain.finish(ENVELOPE | {"tables": [table]}, {"command": "test"}, report=False)
    with typed:
        b = typed.finish(ENVELOPE | {"verdict": Verdict(status="no-claim", text="no claim tested"),
                                     "tables": [Table(title="T", columns=["c"], rows=[[1]], caption="a table")]},
                         {"command": "test"}, report=False)
    assert a.tables == b.tables and a.verdict == b.verdict
    assert read_json(plain.run_dir / "results.json")["tables"] == read_json(typed.run_dir / "results.json")["tables"]


def test_results_that_do_not_follow_the_schema_are_an_incomplete_audit(tmp_path) -> None:
    ctx = RunContext(tmp_path, "example", "laplace_count", seed=3, quiet=True)
    with pytest.raises(AuditIncomplete, match="does not follow the results schema"):
        with ctx:
            ctx.finish({k: v for k, v in ENVELOPE.items() if k != "confidence"}, {"command": "test"}, report=False)
    assert not (ctx.run_dir / "results.json").exists()


def test_a_key_no_block_names_is_an_incomplete_audit(tmp_path) -> None:
    ctx = RunContext(tmp_path, "example", "laplace_count", seed=3, quiet=True)
    with pytest.raises(AuditIncomplete, match="Outcome has no field 'warnings'"):
        with ctx:
            ctx.finish(ENVELOPE | {"warnings": ["a key no block names"]}, {"command": "test"}, report=False)
    assert not (ctx.run_dir / "results.json").exists()


@dataclass(frozen=True, kw_only=True)
class Letters(Block):
    """An example kind's own block.

    Attributes:
        letters: some letters.
    """

    letters: Sequence[str]


@pytest.fixture
def example_kind_block(monkeypatch) -> None:
    """The kind ``example`` names :class:`Letters` as its block (as a record's ``detail`` would)."""
    monkeypatch.setattr("audit.results_file.detail_block", lambda kind: Letters if kind == "example" else None)


def test_a_kinds_block_is_built_typed_and_written_beside_the_envelope(tmp_path, example_kind_block) -> None:
    ctx = RunContext(tmp_path, "example", "x", seed=3, quiet=True)
    with ctx:
        returned = ctx.finish(ENVELOPE | {"detail": Letters(letters=["a", "b"])}, {"command": "test"}, report=False)
    assert read_json(ctx.run_dir / "results.json")["letters"] == ["a", "b"]  # flat: the file format of schema 4
    assert "detail" not in read_json(ctx.run_dir / "results.json")
    assert returned.detail == Letters(letters=["a", "b"]) and load_outcome(ctx.run_dir) == returned


@pytest.mark.parametrize("results", [ENVELOPE | {"letters": ["a"]},  # the block's key given loose
                                     ENVELOPE | {"detail": Verdict(status="no-claim", text="")}],  # another block
                         ids=["loose key", "wrong block"])
def test_a_kinds_block_not_built_as_its_type_is_an_incomplete_audit(tmp_path, example_kind_block, results) -> None:
    ctx = RunContext(tmp_path, "example", "x", seed=3, quiet=True)
    with pytest.raises(AuditIncomplete, match="Letters"):
        with ctx:
            ctx.finish(results, {"command": "test"}, report=False)
@pytest.mark.parametrize("results", [
    {"verdict": Verdict(status="no-claim", text="no claim tested", extra={"note": "a key no block names"})},
    {"tables": [Table(title="T", columns=["c"], rows=[[1]], extra={"note": "nested"})]},
], ids=["block", "nested block"])
def test_a_runner_writing_to_extra_is_an_incomplete_audit(tmp_path, results) -> None:
    """``extra`` is for files of older versions only: a runner of any kind that sets it on a block it writes
    leaves no results.json (every runner's results go through ``finish``)."""
    ctx = RunContext(tmp_path, "example", "laplace_count", seed=3, quiet=True)
    with pytest.raises(AuditIncomplete, match="has no field 'note'"):
        with ctx:
            ctx.finish(ENVELOPE | results, {"command": "test"}, report=False)
    assert not (ctx.run_dir / "results.json").exists()
