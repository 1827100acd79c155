"""The base of the typed results blocks (:mod:`audit.stats.outcome`): a frozen, keyword-only dataclass that
converts to the JSON object ``results.json`` holds and back, losslessly.

A block's fields are the keys its schema definition names (``audit/schemas/results.schema.json``). A field
without a default is a key every block of that sort writes; a field that defaults to ``None`` is written
only when set. A field that holds other blocks says so with :func:`nested` (one block, a list of blocks, or
a mapping of names to blocks). Every key a file holds beyond the named ones, and an optional named key
written as ``null``, goes into ``extra`` on reading and comes back from it on writing, so that reading a
``results.json`` and writing it again gives the same bytes (``audit.io.write_json`` sorts the keys).
Numbers that may be infinite are written as the strings ``"inf"``/``"-inf"`` (the schema's
``number_or_inf``); the fields marked :func:`number_or_inf` hold them as floats.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import MISSING, Field, dataclass, field, fields
from typing import Any, Self

__all__ = ["Block", "nested", "number_or_inf", "ONE", "LIST", "MAP"]

#: Shapes of a nested field: one block, a list of blocks, a mapping of names to blocks.
ONE, LIST, MAP = "one", "list", "map"


def nested(block: type[Block], shape: str = ONE, *, optional: bool = False) -> Any:
    """A field that holds blocks of type ``block`` in ``shape`` (:data:`ONE`, :data:`LIST`, :data:`MAP`).

    Args:
        block: the block type.
        shape: how the field holds it.
        optional: whether the key may be absent (the field then defaults to None).

    Returns:
        The dataclass field.
    """
    metadata = {"block": block, "shape": shape}
    return field(default=None, metadata=metadata) if optional else field(metadata=metadata)


def number_or_inf(*, optional: bool = False) -> Any:
    """A float field written as ``"inf"``/``"-inf"`` when infinite (read back as a float).

    Args:
        optional: whether the key may be absent (the field then defaults to None).

    Returns:
        The dataclass field.
    """
    metadata = {"number_or_inf": True}
    return field(default=None, metadata=metadata) if optional else field(metadata=metadata)


def _optional(f: Field) -> bool:
    return f.default is None


def _read_number(value: Any) -> Any:
    if value == "inf":
        return math.inf
    if value == "-inf":
        return -math.inf
    return value


def _read(f: Field, value: Any) -> Any:
    if value is None:
        return None
    if f.metadata.get("number_or_inf"):
        return _read_number(value)
    block, shape = f.metadata.get("block"), f.metadata.get("shape")
    if block is None:
        return value
    if shape == LIST:
        return tuple(block.from_dict(item) for item in value)
    if shape == MAP:
        return {name: block.from_dict(item) for name, item in value.items()}
    return block.from_dict(value)


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
        extra: the keys beyond the named fields (and optional named keys written as ``null``), as read;
            written back unchanged.
    """

    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        """The JSON keys this block names (its fields less ``extra``).

        Returns:
            The keys, in field order.
        """
        return tuple(f.name for f in fields(cls) if f.name != "extra")

    @classmethod
    def required_keys(cls) -> tuple[str, ...]:
        """The keys every block of this sort writes (the fields without a default).

        Returns:
            The keys, in field order.
        """
        return tuple(f.name for f in fields(cls) if f.name != "extra" and f.default is MISSING
                     and f.default_factory is MISSING)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """The block of a JSON object (as ``json.load`` or a runner gives it).

        Args:
            data: the object; its keys beyond the named ones go into ``extra``.

        Returns:
            The block.

        Raises:
            TypeError: a required key is missing (the schema check runs first where a file is read).
        """
        named = {f.name: f for f in fields(cls) if f.name != "extra"}
        kwargs: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in data.items():
            f = named.get(key)
            if f is None or (value is None and _optional(f)):
                extra[key] = value
            else:
                kwargs[key] = _read(f, value)
        return cls(**kwargs, extra=extra)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of this block: the exact dict ``results.json`` holds (numpy values and
        infinities as given; :func:`audit.io.write_json` converts them).

        Returns:
            The named keys (an optional one only when set), then ``extra``.
        """
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.name == "extra":
                continue
            value = getattr(self, f.name)
            if value is None and _optional(f):
                continue
            out[f.name] = _write(f, value)
        return out | dict(self.extra)
