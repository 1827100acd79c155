"""How reports write numbers and nested values: 3 significant digits, intervals as ``0.000–0.220``,
lists and objects as readable text — never a raw Python or JSON dump."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from audit.stats.outcome import Table

#: Lists longer than this are summarised (count and range) instead of listed.
MAX_LISTED = 6


def format_number(value: float) -> str:
    """A float to 3 significant digits: ``0.109``, ``8.00``, ``12.1``, ``20,000``, ``1.23e-05``, ``1e-05``.

    Args:
        value: the number.

    Returns:
        The text.
    """
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "∞" if value > 0 else "-∞"
    if value == 0:
        return "0"
    size = abs(value)
    if size < 1e-3 or size >= 1e6:
        return f"{value:.3g}"
    if size >= 1000:
        return f"{round(value, 2 - int(math.floor(math.log10(size)))):,.0f}"
    return f"{value:#.3g}".rstrip(".")


def format_value(value: Any) -> str:
    """A JSON value as report text: numbers to 3 significant digits (integers whole), None as a dash,
    ``"inf"`` strings as ∞, two-number lists as intervals, other lists and objects as short text.

    Args:
        value: a JSON value.

    Returns:
        The text.
    """
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10_000 else str(value)
    if isinstance(value, float):
        return format_number(value)
    if isinstance(value, str):
        return {"inf": "∞", "-inf": "-∞"}.get(value, value)
    if isinstance(value, (list, tuple)):
        return _format_list(value)
    if isinstance(value, Mapping):
        return "; ".join(f"{key}: {format_value(item)}" for key, item in value.items()) or "—"
    return str(value)


def format_epsilon(value: Any) -> str:
    """An epsilon as a report's sentences write it: :func:`format_value`, or ``—`` for None.

    Args:
        value: the epsilon, or None.

    Returns:
        The text.
    """
    return format_value(value) if value is not None else "—"


def format_percent(value: Any) -> str:
    """A fraction as a percentage of 3 significant digits (``95%``), or ``—`` for anything not a number.

    Args:
        value: the fraction.

    Returns:
        The text.
    """
    return "—" if not isinstance(value, (int, float)) else f"{100 * value:.3g}%"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) or value in ("inf", "-inf")


def _format_list(values: list | tuple) -> str:
    if len(values) == 2 and all(_is_number(v) for v in values):
        return format_interval(values)
    if len(values) > MAX_LISTED and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return f"{len(values)} values from {format_value(min(values))} to {format_value(max(values))}"
    if len(values) > MAX_LISTED:
        return f"{len(values)} entries"
    return ", ".join(format_value(v) for v in values) or "—"


def format_interval(ci: Any) -> str:
    """A confidence interval ``[lo, hi]`` as ``lo–hi`` (3 decimals for rates in [0, 1]); "" for anything else.

    Args:
        ci: a ``[lo, hi]`` pair (anything else gives "").

    Returns:
        The text.
    """
    if not (isinstance(ci, (list, tuple)) and len(ci) == 2 and all(_is_number(v) for v in ci)):
        return ""
    lo, hi = (float(v) for v in ci)
    if 0 <= lo <= 1 and 0 <= hi <= 1:
        return f"{lo:.3f}–{hi:.3f}"
    return f"{format_value(lo)}–{format_value(hi)}"


def flat_rows(mapping: Any, prefix: str = "") -> list[tuple[str, str]]:
    """``(key, text)`` rows of a JSON object, nested objects flattened to ``outer.inner`` keys.

    Args:
        mapping: a JSON object (anything else gives no rows).
        prefix: the key prefix of nested objects.

    Returns:
        The rows.
    """
    if not isinstance(mapping, Mapping):
        return []
    rows: list[tuple[str, str]] = []
    for key in sorted(mapping, key=str):
        value = mapping[key]
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            rows.extend(flat_rows(value, f"{name}."))
        else:
            rows.append((name, format_value(value)))
    return rows


def format_table(table: Table) -> dict:
    """A runner's table (``$defs/table``) as the template shows it, every cell formatted.

    Args:
        table: the runner's table.

    Returns:
        ``{"title", "columns", "rows", "caption"}``, every cell text.
    """
    rows = [[format_value(cell) if cell != "" else "" for cell in row] for row in table.rows if isinstance(row, list)]
    return {"title": str(table.title), "columns": [str(c) for c in table.columns], "rows": rows,
            "caption": "" if table.caption is None else str(table.caption)}
