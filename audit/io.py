"""Atomic file writes: a crash never leaves a half-written file where a good one was."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` via a temporary file in the same directory and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the file normal permissions
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write UTF-8 ``text`` atomically."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def to_jsonable(obj: Any) -> Any:
    """Convert numpy scalars/arrays, tuples and typed results blocks (``to_dict``,
    :class:`audit.stats.blocks.Block`) into plain JSON types (recursively)."""
    # io is on the --help path: numpy only when arrays are written
    import numpy as np

    if callable(getattr(obj, "to_dict", None)):
        return to_jsonable(obj.to_dict())
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, (np.floating, float)):
        value = float(obj)
        if value != value or value in (float("inf"), float("-inf")):
            return None if value != value else ("inf" if value > 0 else "-inf")
        return value
    return obj


def write_json(path: str | os.PathLike, obj: Any) -> Path:
    """Write ``obj`` as indented, key-sorted JSON, atomically (deterministic bytes)."""
    text = json.dumps(to_jsonable(obj), indent=2, sort_keys=True) + "\n"
    return atomic_write_text(path, text)


def read_json(path: str | os.PathLike) -> Any:
    """Read a JSON file written by :func:`write_json`."""
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)
