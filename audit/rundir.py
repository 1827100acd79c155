"""Run directories: ``<out>/<utc-time>-<kind>-<target>/`` with config.json, results.json,
report.html, plots and log.txt; ``<out>/cache/`` holds trained models shared between runs."""

from __future__ import annotations

import datetime as _dt
import os
import platform
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from audit.errors import UserError

SCHEMA_VERSION = 2
#: Top-level results.json keys that may differ between two runs of the same command and seed.
VOLATILE_KEYS = ["created", "host", "timing"]


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def host_info() -> dict:
    import numpy
    import torch

    return {"python": platform.python_version(), "platform": platform.platform(), "torch": torch.__version__,
            "numpy": numpy.__version__, "cpus": os.cpu_count(),
            "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}


def package_versions() -> dict:
    """Versions of the packages that determine results (recorded in config.json)."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ("privacy-audit", "torch", "numpy", "scipy", "scikit-learn", "dp-accounting", "mlxtend"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


@dataclass(frozen=True)
class RunPaths:
    root: Path
    run_dir: Path
    cache_dir: Path

    def log(self, message: str, echo: bool = True) -> None:
        """Append a line to the run's log.txt and (unless quiet) print it to stderr."""
        with open(self.run_dir / "log.txt", "a", encoding="utf-8") as handle:
            handle.write(f"{utc_now()} {message}\n")
        if echo:
            sys.stderr.write(message + "\n")
            sys.stderr.flush()


def safe_name(text: str) -> str:
    """A file-name-safe rendering of a target name or plugin path."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[:80]


def make_run_dir(out: str | os.PathLike, kind: str, target: str) -> RunPaths:
    """Create a fresh run directory under ``out`` (never reusing an existing one)."""
    root = Path(out).expanduser()
    try:
        root.mkdir(parents=True, exist_ok=True)
        stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        base = f"{stamp}-{kind}-{safe_name(target)}"
        run_dir = root / base
        suffix = 1
        while run_dir.exists():
            suffix += 1
            run_dir = root / f"{base}-{suffix}"
        run_dir.mkdir()
        probe = run_dir / ".write-test"
        probe.write_text("ok")
        probe.unlink()
        cache_dir = root / "cache"
        cache_dir.mkdir(exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot write to output directory {root} ({exc.strerror}); pass a writable --out DIR") from None
    return RunPaths(root, run_dir, cache_dir)
