"""The file format has one source, the types: ``python -m audit schema`` prints the schema generated from
them (audit.schemas.generate), the shipped ``audit/schemas/results.schema.json`` is that output, and
results.json files written by older versions of format 4 (with keys no block names) still load and write
back the same bytes."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass

import jsonschema
from helpers import FIXTURES

from audit.cli import main
from audit.kind_table import kind_records
from audit.results_file import load_outcome, write_outcome
from audit.run_context import SCHEMA_VERSION
from audit.schemas import SCHEMA_PATH, results_schema
from audit.schemas.generate import schema_text
from audit.stats.blocks import Block
from audit.stats.outcome import Outcome


def test_the_shipped_schema_is_the_generated_one() -> None:
    assert SCHEMA_PATH.read_text(encoding="utf-8") == schema_text(), \
        "regenerate it: python -m audit schema > audit/schemas/results.schema.json"
    jsonschema.Draft202012Validator.check_schema(results_schema())
    assert results_schema()["$defs"]["outcome"]["properties"]["schema_version"]["const"] == SCHEMA_VERSION


def test_the_schema_command_prints_it(capsys) -> None:
    assert main(["schema"]) == 0
    assert capsys.readouterr().out == schema_text()


def test_a_file_of_an_older_version_loads_and_writes_back_the_same_bytes(tmp_path) -> None:
    # the fixture was written by an older version: its attacks hold n_shadow_models, which no block names, and
    # it holds a sweep's points, which no block of a membership run names
    run = tmp_path / "run"
    shutil.copytree(FIXTURES / "run_membership", run)
    data = json.loads((run / "results.json").read_text(encoding="utf-8"))
    assert data["schema_version"] == 4
    data["a_key_since_removed"] = {"any": [1, 2]}
    (run / "results.json").write_text(json.dumps(data, indent=2, sort_keys=True), encoding="utf-8")
    outcome = load_outcome(run)
    assert outcome.extra == {"a_key_since_removed": {"any": [1, 2]}, "sweep": data["sweep"]}
    assert outcome.attacks["shadow"].extra == {"n_shadow_models": data["attacks"]["shadow"]["n_shadow_models"]}
    write_outcome(tmp_path / "again.json", outcome)
    assert json.loads((tmp_path / "again.json").read_text(encoding="utf-8")) == data


def test_no_kind_block_names_a_key_of_the_envelope() -> None:
    # a kind's block is written beside the envelope's keys: a shared name would make the file ambiguous
    blocks = {record.name: record.load("detail") for record in kind_records() if record.detail}
    assert {"dp", "membership", "inversion", "extraction", "reconstruction", "sweep"} <= set(blocks)
    assert {name: Outcome.clashes(block) for name, block in blocks.items()} == {name: () for name in blocks}

    @dataclass(frozen=True, kw_only=True)
    class Clashing(Block):
        """A block that names two envelope keys (one a flat group's).

        Attributes:
            target: clashes with the envelope's.
            timing: clashes with the stamp's.
            own: its own.
        """

        target: str
        timing: int
        own: int

    assert Outcome.clashes(Clashing) == ("target", "timing")
