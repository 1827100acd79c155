"""Costly accounting results remembered on disk, so that a search done once is read back by the next process.

A DP-SGD noise calibration (:func:`audit.theory.dpsgd.calibrate_noise_multiplier`) composes dozens of privacy-loss
distributions: 2 to 5 CPU seconds, paid again by every process that needs the same figure (the gate of each
``run dp --check-config`` on the same training, each run of a built-in DP target). :func:`remembered` keeps such a
figure in ``<cache>/accounting/<sha256>.json`` (:func:`cache_folder`: ``$PRIVACY_AUDIT_CACHE``, else
``~/.cache/privacy-audit``, the folder the language-model bases are cached in).

* The key is the question (a name and its arguments), the installed dp-accounting's version and a SHA-256 of this
  package's sources (:func:`accounting_fingerprint`): a change of the search, of the accountants or of dp-accounting
  never reads a figure the older code computed.
* The figure read back is the float the search returned (JSON writes a float's shortest exact repr), so a result
  is the same with or without the cache.
* An entry is written atomically (a temporary file renamed over it): processes running at once (pytest-xdist
  workers, parallel audits) read a whole entry or none. An unreadable entry, or one that is not a finite number
  under its own key, is computed again and rewritten; a folder that cannot be written only costs the time.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import tempfile
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

__all__ = ["CACHE_ENV", "cache_folder", "accounting_fingerprint", "remembered"]

#: Environment variable naming the cache folder (default ``~/.cache/privacy-audit``).
CACHE_ENV = "PRIVACY_AUDIT_CACHE"
#: The subfolder of :func:`cache_folder` holding the remembered accounting figures.
SUBFOLDER = "accounting"


def cache_folder() -> Path:
    """The workbench's cache folder: ``$PRIVACY_AUDIT_CACHE``, else ``~/.cache/privacy-audit``."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "privacy-audit").expanduser()


@functools.cache
def accounting_fingerprint() -> str:
    """SHA-256 of the sources of :mod:`audit.theory` and the installed dp-accounting's version."""
    h = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    try:
        h.update(version("dp-accounting").encode())
    except PackageNotFoundError:
        h.update(b"no dp-accounting")
    return h.hexdigest()


def _entry(name: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], Path]:
    key = {"name": name, "arguments": arguments, "code": accounting_fingerprint()}
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()
    return key, cache_folder() / SUBFOLDER / f"{digest}.json"


def _read(path: Path, key: dict[str, Any]) -> float | None:
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    value = entry.get("value") if isinstance(entry, dict) and entry.get("key") == key else None
    return float(value) if isinstance(value, float) and math.isfinite(value) else None


def _write(path: Path, key: dict[str, Any], value: float) -> None:
    temporary: Path | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False, encoding="utf-8") as f:
            temporary = Path(f.name)
            json.dump({"key": key, "value": value}, f)
        os.replace(temporary, path)
    except OSError:  # no folder, or a full disk: the figure is only not remembered
        if temporary is not None:
            temporary.unlink(missing_ok=True)


def remembered(name: str, arguments: dict[str, Any], compute: Callable[[], float]) -> float:
    """The figure ``compute()`` returns for the question ``name(**arguments)``, read from the cache when an earlier
    process computed it with the same code (module docstring), else computed and written there.

    Args:
        name: what is computed (e.g. ``"dpsgd_noise_multiplier"``).
        arguments: the arguments that determine it (JSON numbers and strings).
        compute: the computation; its errors propagate and nothing is written.

    Returns:
        The float ``compute()`` returns (or returned in the process that wrote the entry).
    """
    key, path = _entry(name, arguments)
    cached = _read(path, key)
    if cached is not None:
        return cached
    value = float(compute())
    _write(path, key, value)
    return value
