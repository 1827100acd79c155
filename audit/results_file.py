"""The one way ``results.json`` and ``compare.json`` are read and written as types: :func:`load_outcome`
validates the object against the shipped schema (:func:`audit.schemas.validate_results`) and reads it into
:class:`audit.stats.outcome.Outcome` (a run) or :class:`audit.stats.outcome.Comparison`;
:func:`write_outcome` writes one back (:meth:`audit.stats.blocks.Block.to_dict`, key-sorted by
:func:`audit.io.write_json`), so that a load and a write give the same bytes."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema

from audit.errors import UserError
from audit.io import to_jsonable, write_json
from audit.kind_table import kind_records
from audit.schemas import results_schema, validate_results
from audit.stats.blocks import Block
from audit.stats.outcome import Comparison, Outcome
from audit.terminal import printable

__all__ = ["load_outcome", "outcome_of", "write_outcome", "results_path"]

#: The longest excerpt of a schema error a one-line message quotes.
_MESSAGE_CHARS = 160


def results_path(run_dir: str | os.PathLike) -> Path:
    """The file a finished run or comparison holds its outcome in: ``compare.json`` for a comparison,
    ``results.json`` otherwise.

    Args:
        run_dir: the run's directory.

    Returns:
        The path (which may not exist).
    """
    run_dir = Path(run_dir)
    compare = run_dir / "compare.json"
    return compare if compare.is_file() and not (run_dir / "results.json").is_file() else run_dir / "results.json"


def _schema_error(where: str, data: Mapping[str, Any]) -> UserError:
    # the first mismatch within the branch the object means (a run or a comparison), not "matches neither"
    branch = "#/$defs/run" if "kind" in data or "schema_version" in data else "#/$defs/comparison"
    validator = jsonschema.Draft202012Validator(results_schema() | {"oneOf": [{"$ref": branch}]})
    best = jsonschema.exceptions.best_match(validator.iter_errors(data))
    at = printable("/".join(str(p) for p in best.absolute_path) or "the top level")  # the file's keys, as typed
    message = printable(" ".join(best.message.split()))
    if len(message) > _MESSAGE_CHARS:
        message = message[:_MESSAGE_CHARS - 3] + "..."
    return UserError(f"{where} does not follow the results schema (at {at}: {message}): re-run the audit to "
                     f"regenerate it")


def outcome_of(results: Mapping[str, Any], where: str = "the results", *,
               strict: bool = False) -> Outcome | Comparison:
    """The typed outcome of a results object (as a runner builds it or ``json.load`` reads it), validated
    against the schema first.

    Args:
        results: the object (numpy values and infinities are converted as ``results.json`` writes them).
        where: what to call it in an error message (e.g. its path).
        strict: refuse a key no block names (a run's results, :meth:`audit.run_context.RunContext.finish`);
            else such keys of a file written by an older version are kept in the blocks' ``extra``.

    Returns:
        An :class:`Outcome` for a run, a :class:`Comparison` for ``compare.json``.

    Raises:
        UserError: the object does not follow the schema (one line: where, and the first mismatch).
        audit.stats.blocks.UnnamedKey: ``strict`` and a key no block names.
    """
    data = to_jsonable(results)
    try:
        validate_results(data)
    except jsonschema.ValidationError:
        raise _schema_error(where, data) from None
    if "kind" not in data:
        return Comparison.from_dict(data, strict=strict)
    return Outcome.from_dict(data, strict=strict, detail=detail_block(data["kind"]))


def detail_block(kind: str) -> type[Block] | None:
    """The result block the record of ``kind`` names (:attr:`audit.kinds.RunKind.detail`), read from the
    table of kinds; None for a kind that names none or that the table does not hold (its keys beyond the
    envelope's are then an older file's, kept in ``extra``, or refused from a run).

    Args:
        kind: the run kind.

    Returns:
        The block type, or None.
    """
    record = next((r for r in kind_records() if r.name == kind), None)
    return record.load("detail") if record is not None and record.detail else None


def load_outcome(path: str | os.PathLike) -> Outcome | Comparison:
    """Read ``results.json`` or ``compare.json`` (or the one in a run directory) into its typed outcome.

    Args:
        path: the file, or a run directory (see :func:`results_path`).

    Returns:
        The outcome (:func:`outcome_of`).

    Raises:
        UserError: the file is missing, unreadable, not JSON, or does not follow the schema.
    """
    path = Path(path)
    if path.is_dir():
        path = results_path(path)
    if not path.is_file():
        raise UserError(f"{path} not found: pass the directory of a finished run (it holds {path.name})")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"{path} is unreadable or not valid JSON ({type(exc).__name__}): re-run the audit "
                        f"to regenerate it") from None
    if not isinstance(data, dict):
        raise UserError(f"{path} does not hold a JSON object: re-run the audit to regenerate it")
    return outcome_of(data, str(path))


def write_outcome(path: str | os.PathLike, outcome: Outcome | Comparison) -> Path:
    """Write ``outcome`` as ``results.json`` (or ``compare.json``): the dict :meth:`Block.to_dict` gives,
    key-sorted and atomically (:func:`audit.io.write_json`).

    Args:
        path: the file to write.
        outcome: the outcome.

    Returns:
        The path written.
    """
    return write_json(path, outcome.to_dict())
