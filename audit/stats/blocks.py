"""The base of the typed results blocks (:mod:`audit.stats.outcome`): a frozen, keyword-only dataclass that
converts to the JSON object ``results.json`` holds and back, losslessly.

A block's fields are the keys its schema definition names (``audit/schemas/results.schema.json``). A field
without a default is a key every block of that sort writes; a field that defaults to ``None`` is written only
when set. A field that holds other blocks says so with :func:`nested` (one block, a list of blocks, or a
mapping of names to blocks); a :func:`flat` field holds one block whose keys the JSON object holds beside the
parent's own (a group of keys typed together, as the run's envelope groups its stamp). An optional named key
written as ``null`` is recorded in ``nulls`` and written back as ``null``. Every key a run writes is a named
field: a runner's results with a key no block names fail when they are typed (``strict``, :class:`UnnamedKey`,
in :meth:`audit.run_context.RunContext.finish`). Only a file written by an older version may hold keys beyond
the named ones: they go into ``extra`` on reading and come back from it on writing, so that reading a
``results.json`` and writing it again gives the same bytes (``audit.io.write_json`` sorts the keys). Numbers
that may be infinite are written as the strings ``"inf"``/``"-inf"`` (the schema's ``number_or_inf``); the
fields marked :func:`number_or_inf` hold them as floats.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import MISSING, Field, dataclass, field, fields
from typing import Any, Self

__all__ = ["Block", "UnnamedKey", "nested", "flat", "number_or_inf", "constrained", "ONE", "LIST", "MAP", "FLAT",
           "META_FIELDS", "INTERVAL"]

#: Shapes of a nested field: one block, a list of blocks, a mapping of names to blocks, or one block whose keys
#: are written beside the parent's own (:func:`flat`).
ONE, LIST, MAP, FLAT = "one", "list", "map", "flat"
#: The fields of every block that are not keys of its JSON object.
META_FIELDS = ("extra", "nulls")


class UnnamedKey(ValueError):
    """A results object holds a key that no field of its block names (a runner's mistake: name the key in
    :mod:`audit.stats.outcome`, then regenerate the schema, ``python -m audit schema``)."""


#: The JSON Schema constraint of an interval: two numbers.
INTERVAL = {"minItems": 2, "maxItems": 2}


def _field(metadata: dict, optional: bool, schema: dict | None) -> Any:
    metadata = metadata | ({"schema": schema} if schema else {})
    return field(default=None, metadata=metadata) if optional else field(metadata=metadata)


def nested(block: type[Block], shape: str = ONE, *, optional: bool = False, schema: dict | None = None) -> Any:
    """A field that holds blocks of type ``block`` in ``shape`` (:data:`ONE`, :data:`LIST`, :data:`MAP`).

    Args:
        block: the block type.
        shape: how the field holds it.
        optional: whether the key may be absent (the field then defaults to None).
        schema: JSON Schema constraints beyond the type (e.g. ``{"minItems": 1}``), see :func:`constrained`.

    Returns:
        The dataclass field.
    """
    return _field({"block": block, "shape": shape}, optional, schema)


def flat(block: type[Block] | None, *, optional: bool = False) -> Any:
    """A field that holds one block of type ``block`` whose keys are written beside the parent block's own
    keys, not under the field's name: a group of the parent's keys typed together (the file holds them flat).
    ``block`` None: the block's type is chosen where the parent is read (a kind's own block,
    ``audit.stats.outcome.Outcome.detail``).

    Args:
        block: the block type, or None.
        optional: whether the group may be absent (the field then defaults to None); else a group of which
            no key is written reads as the block with every field at its default.

    Returns:
        The dataclass field.
    """
    metadata = {"block": block, "shape": FLAT}
    if optional:
        return field(default=None, metadata=metadata)
    return field(default_factory=block, metadata=metadata) if block is not None else field(metadata=metadata)


def number_or_inf(*, optional: bool = False) -> Any:
    """A float field written as ``"inf"``/``"-inf"`` when infinite (read back as a float).

    Args:
        optional: whether the key may be absent (the field then defaults to None).

    Returns:
        The dataclass field.
    """
    return _field({"number_or_inf": True}, optional, None)


def constrained(schema: dict, *, optional: bool = False) -> Any:
    """A field whose JSON Schema adds ``schema`` to what its type gives (an ``enum``, a ``pattern``, a
    ``minimum``, the ``required`` keys of a mapping): the generated schema
    (:func:`audit.schemas.generate.generated_schema`) holds it.

    Args:
        schema: the constraints.
        optional: whether the key may be absent (the field then defaults to None).

    Returns:
        The dataclass field.
    """
    return _field({}, optional, schema)


def _optional(f: Field) -> bool:
    return f.default is None


def _is_flat(f: Field) -> bool:
    return f.metadata.get("shape") == FLAT


def _read_number(value: Any) -> Any:
    if value == "inf":
        return math.inf
    if value == "-inf":
        return -math.inf
    return value


def _read(f: Field, value: Any, strict: bool) -> Any:
    if value is None:
        return None
    if f.metadata.get("number_or_inf"):
        return _read_number(value)
    block, shape = f.metadata.get("block"), f.metadata.get("shape")
    if block is None:
        return value
    if shape == LIST:
        return tuple(block.from_dict(item, strict=strict) for item in value)
    if shape == MAP:
        return {name: block.from_dict(item, strict=strict) for name, item in value.items()}
    return block.from_dict(value, strict=strict)


def _write(f: Field, value: Any) -> Any:
    if value is None:
        return None
    shape = f.metadata.get("shape")
    if f.metadata.get("block") is None:
        return value
    if shape == LIST:
        return [item.to_dict() for item in value]
    if shape == MAP:
        return {name: item.to_dict() for name, item in value.items()}
    return value.to_dict()


@dataclass(frozen=True, kw_only=True)
class Block:
    """A typed JSON object of ``results.json``.

    Attributes:
        extra: the keys beyond the named fields of a file written by an older version, as read; written
            back unchanged. Never set by a run (a test checks every kind's outcome).
        nulls: the optional named keys the object holds as ``null`` (written back as ``null``).
    """

    extra: Mapping[str, Any] = field(default_factory=dict)
    nulls: frozenset[str] = frozenset()

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        """The JSON keys this block names (its fields less :data:`META_FIELDS`, a :func:`flat` field's block's
        keys in its place; a flat field of a type chosen on reading names none here).

        Returns:
            The keys, in field order.
        """
        out: list[str] = []
        for f in fields(cls):
            if f.name in META_FIELDS:
                continue
            if _is_flat(f):
                out += f.metadata["block"].keys() if f.metadata["block"] is not None else ()
            else:
                out.append(f.name)
        return tuple(out)

    @classmethod
    def required_keys(cls) -> tuple[str, ...]:
        """The keys every block of this sort writes (the fields without a default; a required :func:`flat`
        field's block's required keys).

        Returns:
            The keys, in field order.
        """
        out: list[str] = []
        for f in fields(cls):
            if f.name in META_FIELDS:
                continue
            if _is_flat(f):
                block = f.metadata["block"]
                out += block.required_keys() if block is not None and f.default is not None else ()
            elif f.default is MISSING and f.default_factory is MISSING:
                out.append(f.name)
        return tuple(out)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, strict: bool = False) -> Self:
        """The block of a JSON object (as ``json.load`` or a runner gives it).

        Args:
            data: the object.
            strict: refuse a key no field names (a run's results); else it goes into ``extra`` (a file
                written by an older version).

        Returns:
            The block.

        Raises:
            TypeError: a required key is missing (the schema check runs first where a file is read).
            UnnamedKey: ``strict`` and a key no field names.
        """
        named = {f.name: f for f in fields(cls) if f.name not in META_FIELDS and not _is_flat(f)}
        groups = [f for f in fields(cls) if _is_flat(f) and f.metadata["block"] is not None]
        owner = {key: f.name for f in groups for key in f.metadata["block"].keys()}
        parts: dict[str, dict[str, Any]] = {f.name: {} for f in groups}
        kwargs: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        nulls = set()
        for key, value in data.items():
            f = named.get(key)
            if key in owner:
                parts[owner[key]][key] = value
            elif f is None:
                if strict:
                    raise UnnamedKey(f"{cls.__name__} has no field {key!r}: name it in audit/stats/outcome.py, "
                                     f"then regenerate the schema (python -m audit schema)")
                extra[key] = value
            elif value is None and _optional(f):
                nulls.add(key)
            else:
                kwargs[key] = _read(f, value, strict)
        for f in groups:
            if parts[f.name] or f.default is not None:
                kwargs[f.name] = f.metadata["block"].from_dict(parts[f.name], strict=strict)
        return cls(**kwargs, extra=extra, nulls=frozenset(nulls))

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of this block: the exact dict ``results.json`` holds (numpy values and
        infinities as given; :func:`audit.io.write_json` converts them).

        Returns:
            The named keys (an optional one when set or in ``nulls``), then ``extra``.
        """
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.name in META_FIELDS:
                continue
            value = getattr(self, f.name)
            if _is_flat(f):
                out |= value.to_dict() if value is not None else {}
                continue
            if value is None and _optional(f) and f.name not in self.nulls:
                continue
            out[f.name] = _write(f, value)
        return out | dict(self.extra)
