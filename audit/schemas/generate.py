"""The JSON Schema of ``results.json`` and ``compare.json``, generated from the types: one definition per
block of :mod:`audit.stats.outcome` (its fields, their types and constraints, their descriptions from the
block's docstring) and, for each kind, what every run of that kind writes beyond the envelope (its
record's ``results``, :class:`audit.kinds.RunKind`). ``python -m audit schema`` prints it; the shipped
``results.schema.json`` is that output (a test checks it), so after a change of the types run
``python -m audit schema > audit/schemas/results.schema.json``.
"""

from __future__ import annotations

import json
import re
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import Any

from audit.kind_table import kind_records
from audit.run_context import SCHEMA_VERSION
from audit.stats import outcome
from audit.stats.blocks import FLAT, META_FIELDS, Block

__all__ = ["generated_schema", "schema_text", "block_schema"]

_SCALARS = {str: "string", int: "integer", float: "number", bool: "boolean"}
_ATTRIBUTE = re.compile(r"^ {8}(\w+): (.*)$")


def _def_name(block: type[Block]) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", block.__name__).lower()


def _ref(block: type[Block]) -> dict:
    return {"$ref": f"#/$defs/{_def_name(block)}"}


def _descriptions(block: type[Block]) -> dict[str, str]:
    """Each field's line of the ``Attributes:`` sections of the block's docstrings (its bases' first)."""
    out: dict[str, str] = {}
    for cls in reversed(block.__mro__):
        name = None
        for line in (cls.__doc__ or "").splitlines():
            found = _ATTRIBUTE.match(line)
            if found:
                name, out[found.group(1)] = found.group(1), found.group(2).strip()
            elif name and line.startswith(" " * 12) and line.strip():
                out[name] += " " + line.strip()
            else:
                name = None
    return out


def _type_schema(hint: Any) -> dict:
    """The JSON Schema of a field's annotation (``None`` allowed where the annotation allows it)."""
    if hint is Any:
        return {}
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]}
    if isinstance(hint, type) and issubclass(hint, Block):
        return _ref(hint)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        options = [_type_schema(a) for a in args if a is not type(None)]
        one = options[0] if len(options) == 1 else {"anyOf": options}
        return {"anyOf": [one, {"type": "null"}]} if type(None) in args else one
    if origin in (tuple, Sequence, list):
        return {"type": "array", "items": _type_schema(args[0])}
    if origin in (Mapping, dict):
        values = _type_schema(args[1])
        return {"type": "object", **({"additionalProperties": values} if values else {})}
    raise TypeError(f"no JSON Schema for the annotation {hint!r}")


def _field_schema(f: Any, hint: Any) -> dict:
    schema = _type_schema(hint)
    if f.metadata.get("number_or_inf"):
        schema = {"anyOf": [{"$ref": "#/$defs/number_or_inf"}, {"type": "null"}]} \
            if type(None) in typing.get_args(hint) else {"$ref": "#/$defs/number_or_inf"}
    constraints = f.metadata.get("schema")
    if constraints and "anyOf" in schema:
        schema = {"anyOf": [schema["anyOf"][0] | constraints, schema["anyOf"][1]]}
    elif constraints:
        schema = schema | constraints
    return schema


def _properties(block: type[Block]) -> dict:
    """The typed, described keys of a block, a :func:`audit.stats.blocks.flat` field's block's keys in its
    place (a flat field whose type is chosen on reading, ``Outcome.detail``, is the kind's part)."""
    hints = typing.get_type_hints(block)
    described = _descriptions(block)
    properties = {}
    for f in fields(block):
        if f.name in META_FIELDS:
            continue
        if f.metadata.get("shape") == FLAT:
            properties |= _properties(f.metadata["block"]) if f.metadata["block"] is not None else {}
            continue
        properties[f.name] = _field_schema(f, hints[f.name])
        if described.get(f.name):
            properties[f.name] = {"description": described[f.name]} | properties[f.name]
    return properties


def block_schema(block: type[Block]) -> dict:
    """The definition of one block: an object with its named keys typed, the required ones listed."""
    properties = _properties(block)
    doc = (block.__doc__ or "").strip().split("\n\n")[0]
    return {"type": "object", "description": " ".join(doc.split()), "required": list(block.required_keys()),
            "properties": properties}


def _blocks() -> list[type[Block]]:
    """The blocks of :mod:`audit.stats.outcome` (less the groups the outcome writes flat and the base of the
    kinds' blocks, which name no key of their own), then each kind's own (``RunKind.detail``) and the blocks it
    holds."""
    grouped = {f.metadata["block"] for f in fields(outcome.Outcome) if f.metadata.get("shape") == FLAT}
    found = [getattr(outcome, name) for name in outcome.__all__
             if getattr(outcome, name) not in grouped | {outcome.Detail}]
    todo = [record.load("detail") for record in kind_records() if record.detail]
    while todo:
        block = todo.pop(0)
        if block not in found:
            found.append(block)
            todo += [h for h in _nested(typing.get_type_hints(block).values()) if h not in found]
    return found


def _nested(hints: Any) -> list[type[Block]]:
    """The block types an annotation names (``X``, ``X | None``, ``tuple[X, ...]``, ``Mapping[str, X]``)."""
    out = []
    for hint in hints:
        if isinstance(hint, type) and issubclass(hint, Block) and hint is not Block:
            out.append(hint)
        else:
            out += _nested(typing.get_args(hint))
    return out


def _kind_part(record: Any) -> dict:
    """What a kind requires: its record's ``results`` and, when it names a detail block, that block's keys
    (written beside the envelope's)."""
    parts = [record.results] if record.results else []
    if record.detail:
        detail = record.load("detail")
        clashes = outcome.Outcome.clashes(detail)
        if clashes:
            raise ValueError(f"the result block of kind {record.name!r} ({record.detail}) names keys of the envelope, "
                             f"beside which its keys are written: {', '.join(clashes)}; rename them")
        parts.append(_ref(detail))
    return parts[0] if len(parts) == 1 else {"allOf": parts}


def _run() -> dict:
    """``$defs/run``: the outcome, then what each kind requires when ``kind`` is its name."""
    rules = [{"if": {"properties": {"kind": {"const": record.name}}}, "then": _kind_part(record)}
             for record in kind_records() if record.results or record.detail]
    return {"description": "a run of any kind: the outcome, and the keys every run of its kind writes",
            "allOf": [_ref(outcome.Outcome), *rules]}


def generated_schema() -> dict:
    """The whole schema of ``results.json`` (a run) and ``compare.json`` (a comparison).

    Returns:
        The schema (JSON Schema draft 2020-12).
    """
    defs = {"number_or_inf": {"description": "a number, or the string 'inf' or '-inf' for an infinite one",
                              "anyOf": [{"type": "number"}, {"enum": ["inf", "-inf"]}]}}
    defs |= {_def_name(block): block_schema(block) for block in _blocks()}
    defs["outcome"]["properties"]["schema_version"] |= {"const": SCHEMA_VERSION}
    defs["comparison"]["not"] = {"required": ["kind"]}
    defs["run"] = _run()
    kinds = ", ".join(record.name for record in kind_records())
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "privacy-audit/results.schema.json",
            "title": f"privacy-audit results.json (schema version {SCHEMA_VERSION})",
            "description": f"results.json of every run kind ({kinds}) and compare.json of python -m audit compare, "
                           "generated from the types of audit.stats.outcome (python -m audit schema). Numbers "
                           "that are infinite are written as the strings 'inf'/'-inf'. A run kind requires the "
                           "keys every run of that kind writes; a file written by an older version may hold "
                           "keys no block names.",
            "type": "object", "oneOf": [{"$ref": "#/$defs/run"}, _ref(outcome.Comparison)], "$defs": defs}


def schema_text() -> str:
    """The schema as ``results.schema.json`` holds it (two-space indents, a final newline).

    Returns:
        The text.
    """
    return json.dumps(generated_schema(), indent=2, ensure_ascii=False) + "\n"
