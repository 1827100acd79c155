"""A mechanism plugin's outputs as the float matrix the audit scores, the same way in both worlds.

Rule (docs/reference/plugins.md, "Randomness, outputs, threads and provenance"):

* **numeric**: a number, an array of numbers, or a tuple, list or dict of those (nested) is
  flattened into one vector: tuples and lists in order, dicts in the order of their sorted keys,
  arrays (numpy, or anything with ``__array__``: torch, jax) row-major. A histogram's
  ``(counts, edges)`` is ``counts`` followed by ``edges``. Every call must give the same number of
  values.
* **categorical**: any other value hashed by value (a string, an enum member, a tuple holding a
  string, None) is one category. Categories get indices 0, 1, 2, ... in the order they first
  appear, one mapping for the whole audit (fit draws, audit draws, both worlds), so an index means
  the same output everywhere; :mod:`audit.stats.score_fit` then estimates the log-ratio of each
  category.
* anything else (sets, lists of strings, objects hashed by identity, ...) is a one-line error
  saying what to return.

The first batch fixes which of the two forms the audit uses; a later output of the other form is an
error (a mechanism that sometimes returns a number and sometimes a string should return strings).
"""

from __future__ import annotations

import numbers
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from audit.errors import UserError
from audit.stats.score_fit import as_matrix

__all__ = ["OutputEncoder", "flatten_numeric"]

WHAT_TO_RETURN = ("return a number, an array of numbers, a tuple/list/dict of those (flattened), or a hashable "
                  "category such as a string")


def flatten_numeric(output: Any) -> np.ndarray | None:
    """The numeric leaves of ``output`` as a float vector (module docstring), or None when it is not numeric."""
    if isinstance(output, (numbers.Real, np.bool_)) and not isinstance(output, np.datetime64):
        return np.array([float(output)])
    if hasattr(output, "__array__") and not isinstance(output, np.ndarray):  # torch, jax, ... arrays
        output = np.asarray(output)
    if isinstance(output, np.ndarray):
        return output.astype(np.float64).ravel() if output.dtype.kind in "biuf" else None
    if isinstance(output, dict):
        keys = sorted(output, key=str)
        return _concatenate([output[k] for k in keys])
    if isinstance(output, (tuple, list)):
        return _concatenate(output)
    return None


def _concatenate(items: Sequence[Any]) -> np.ndarray | None:
    parts = [flatten_numeric(item) for item in items]
    if any(p is None for p in parts):
        return None
    return np.concatenate(parts) if parts else np.empty(0)


class OutputEncoder:
    """Encodes batches of one plugin's outputs (module docstring); ``what`` names it in errors."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.form: str | None = None  # "numeric" or "categorical", fixed by the first batch
        self.categories: dict[Hashable, int] = {}

    def encode(self, outputs: Sequence[Any]) -> np.ndarray:
        """(n, m) float matrix of ``outputs`` (m = 1 for categories)."""
        vectors = [flatten_numeric(o) for o in outputs]
        numeric = all(v is not None for v in vectors)
        if self.form is None:
            self.form = "numeric" if numeric else "categorical"
        if self.form == "numeric":
            if not numeric:
                bad = next(o for o, v in zip(outputs, vectors, strict=True) if v is None)
                raise UserError(f"{self.what}: outputs mix numbers and other values (got a {type(bad).__name__} "
                                f"after numbers); {WHAT_TO_RETURN}, the same kind every call")
            sizes = {v.size for v in vectors}
            if len(sizes) > 1:
                raise UserError(f"{self.what}: outputs must have the same number of values every call (got "
                                f"{sorted(sizes)[:2]}); pad them, or return a category")
            return as_matrix(np.array(vectors).reshape(len(vectors), -1), self.what)
        return np.array([[self._category(o)] for o in outputs], dtype=np.float64).reshape(len(outputs), 1)

    def _category(self, output: Any) -> int:
        try:
            if output is not None and type(output).__hash__ is object.__hash__:  # hashed by identity: no category
                raise TypeError
            return self.categories.setdefault(output, len(self.categories))
        except TypeError:  # unhashable, or every output its own category
            raise UserError(f"{self.what}: cannot audit an output of type {type(output).__name__}; "
                            f"{WHAT_TO_RETURN}") from None
