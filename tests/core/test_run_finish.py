"""RunContext.finish stamps and writes: it takes the run's typed RunResults (a mapping is a workbench bug, refused
with a clear error), writes results.json only through the typed outcome (audit.results_file) and returns that
outcome, read back into the same types (a kind without blocks of its own, as a new kind starts); it renders no
report (the command's step, audit.report_step). A kind's own block is built typed by its runner and written beside
the envelope's keys, and one that clashes with the envelope's keys or is another type is a runner's bug; results
that do not follow the schema are a runner's bug, an audit that could not complete, and no results.json is
written."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from audit.errors import AuditIncomplete
from audit.io import read_json
from audit.results_file import load_outcome
from audit.results_header import ResultsHeader
from audit.run_context import RunContext
from audit.run_results import RunResults, Unbounded
from audit.stats.blocks import Block
from audit.stats.outcome import Outcome, Table, Verdict

HEADER = ResultsHeader(description="a target", delta=None, confidence=0.95, epsilon_theory=None)
NO_CLAIM = Unbounded(verdict=Verdict(status="no-claim", text="no claim tested"))
RESULTS = RunResults(header=HEADER, judgement=NO_CLAIM)


def test_results_are_written_as_the_typed_outcome_and_no_report(tmp_path) -> None:
    ctx = RunContext(tmp_path, "example", "laplace_count", seed=3, quiet=True)
    with ctx:
        returned = ctx.finish(RESULTS, {"command": "test"})
    outcome = load_outcome(ctx.run_dir)
    assert outcome.kind == "example" and outcome.seed == 3 and outcome.verdict.status == "no-claim"
    assert isinstance(returned, Outcome) and returned == outcome  # what the runner returns is what the file holds
    assert read_json(ctx.run_dir / "config.json")["command"] == "test"
    assert not (ctx.run_dir / "report.html").exists() and not (tmp_path / "index.html").exists()


def test_a_mapping_is_refused_as_a_workbench_bug(tmp_path) -> None:
    """A runner that hands finish its entries as a dict (even the very entries its RunResults gives) is a bug of
    the workbench: a clear error naming RunResults, the audit incomplete (exit 3), nothing written."""
    ctx = RunContext(tmp_path, "example", "laplace_count", seed=3, quiet=True)
    with pytest.raises(AuditIncomplete, match="finish takes the run's RunResults .* not a dict: its runner must "
                                              "build them typed"):
        with ctx:
            ctx.finish(RESULTS.entries(), {"command": "test"})  # type: ignore[arg-type]
    assert not (ctx.run_dir / "results.json").exists() and not (ctx.run_dir / "config.json").exists()
    assert "TypeError: finish takes the run's RunResults" in (ctx.run_dir / "log.txt").read_text()


def test_typed_tables_are_written_as_the_schema_reads_them(tmp_path) -> None:
    ctx = RunContext(tmp_path, "example", "x", seed=3, quiet=True)
    table = Table(title="T", columns=["c"], rows=[[1]], caption="a table")
    with ctx:
        outcome = ctx.finish(RunResults(header=HEADER, judgement=NO_CLAIM, tables=(table,)), {"command": "test"})
    assert outcome.tables == (table,)
    assert read_json(ctx.run_dir / "results.json")["tables"] == [
        {"title": "T", "columns": ["c"], "rows": [[1]], "caption": "a table"}]


def test_results_that_do_not_follow_the_schema_are_an_incomplete_audit(tmp_path) -> None:
    ctx = RunContext(tmp_path, "example", "laplace_count", seed=3, quiet=True)
    wrong = RunResults(header=ResultsHeader(description="a target", delta=None, confidence="high"), judgement=NO_CLAIM)
    with pytest.raises(AuditIncomplete, match="does not follow the results schema"):
        with ctx:
            ctx.finish(wrong, {"command": "test"})
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
        returned = ctx.finish(RunResults(header=HEADER, judgement=NO_CLAIM, detail=Letters(letters=["a", "b"])),
                              {"command": "test"})
    assert read_json(ctx.run_dir / "results.json")["letters"] == ["a", "b"]  # flat: the file format of schema 4
    assert "detail" not in read_json(ctx.run_dir / "results.json")
    assert returned.detail == Letters(letters=["a", "b"]) and load_outcome(ctx.run_dir) == returned


def test_a_block_of_another_type_is_an_incomplete_audit(tmp_path, example_kind_block) -> None:
    ctx = RunContext(tmp_path, "example", "x", seed=3, quiet=True)
    with pytest.raises(AuditIncomplete, match="not the block its record names \\(Letters\\)"):
        with ctx:
            ctx.finish(RunResults(header=HEADER, judgement=NO_CLAIM, detail=Verdict(status="no-claim", text="")),
                       {"command": "test"})
    assert not (ctx.run_dir / "results.json").exists()


@dataclass(frozen=True, kw_only=True)
class Clash(Block):
    """A kind's block that names one of the envelope's keys.

    Attributes:
        quick: as the envelope's.
    """

    quick: bool


def test_a_block_key_set_beside_the_envelopes_is_an_incomplete_audit(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr("audit.results_file.detail_block", lambda kind: Clash if kind == "example" else None)
    ctx = RunContext(tmp_path, "example", "x", seed=3, quiet=True)
    with pytest.raises(AuditIncomplete, match="quick: keys of the example kind's block Clash, given beside"):
        with ctx:
            ctx.finish(RunResults(header=HEADER, judgement=NO_CLAIM, quick=True), {"command": "test"})
    assert not (ctx.run_dir / "results.json").exists()


@pytest.mark.parametrize("results", [
    {"judgement": Unbounded(verdict=Verdict(status="no-claim", text="no claim tested",
                                            extra={"note": "a key no block names"}))},
    {"tables": (Table(title="T", columns=["c"], rows=[[1]], extra={"note": "nested"}),)},
], ids=["block", "nested block"])
def test_a_runner_writing_to_extra_is_an_incomplete_audit(tmp_path, results) -> None:
    """``extra`` is for files of older versions only: a runner of any kind that sets it on a block it writes
    leaves no results.json (every runner's results go through ``finish``)."""
    ctx = RunContext(tmp_path, "example", "laplace_count", seed=3, quiet=True)
    with pytest.raises(AuditIncomplete, match="has no field 'note'"):
        with ctx:
            ctx.finish(RunResults(**({"header": HEADER, "judgement": NO_CLAIM} | results)), {"command": "test"})
    assert not (ctx.run_dir / "results.json").exists()
