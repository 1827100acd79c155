"""A cache of trained models keyed by a hash of everything that determines them.

Entries are safetensors files (no pickle: loading a tampered file cannot run code) written
atomically; each carries its key and a SHA-256 of its tensor bytes in the header metadata, so a
truncated or corrupted file is detected and the models are retrained with a warning.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import struct
import sys
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from audit.io import atomic_write_bytes

Params = dict[str, torch.Tensor]


#: Modules whose code determines what a training run produces; their source is part of every key.
TRAINING_MODULES = ("targets.training", "targets.dpsgd_step", "targets.sampling", "targets.models",
                    "targets.ghost_clipping", "targets.dpsgd_audit", "targets.reconstruction_runs",
                    "targets.dpsgd_controls", "audit.executors")


def code_fingerprint() -> str:
    """SHA-256 of the trainer's source files, so a model trained by older code is never reused."""

    h = hashlib.sha256()
    for name in TRAINING_MODULES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin:
            h.update(Path(spec.origin).read_bytes())
    return h.hexdigest()


def cache_key(payload: dict) -> str:
    """SHA-256 of the canonical JSON of ``payload`` (sorted keys) and the trainer's code fingerprint."""
    keyed = {"payload": payload, "code": code_fingerprint()}
    return hashlib.sha256(json.dumps(keyed, sort_keys=True, default=str).encode()).hexdigest()


def _digest(params: Params) -> str:
    h = hashlib.sha256()
    for name in sorted(params):
        h.update(name.encode())
        h.update(params[name].contiguous().numpy().tobytes())
    return h.hexdigest()


def _header_metadata(raw: bytes) -> dict:
    (length,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8 : 8 + length]).get("__metadata__", {})


def load_entry(path: Path, key: str) -> Params | None:
    """The cached models at ``path`` if the file is intact and belongs to ``key``, else None."""
    if not path.is_file():
        return None
    try:
        raw = path.read_bytes()
        meta = _header_metadata(raw)
        params = st_load(raw)
        if meta.get("key") != key or meta.get("sha256") != _digest(params):
            raise ValueError("checksum or key mismatch")
        return params
    except Exception as exc:  # any parse failure means a damaged entry: retrain
        sys.stderr.write(f"warning: cache entry {path.name} is corrupt ({exc}); retraining\n")
        return None


def save_entry(path: Path, key: str, params: Params) -> None:
    """Write ``params`` atomically with their key and checksum."""
    params = {k: v.contiguous() for k, v in params.items()}
    atomic_write_bytes(path, st_save(params, metadata={"key": key, "sha256": _digest(params)}))


def entry_path(cache_dir: Path, key: str) -> Path:
    """Where the entry of ``key`` lives in ``cache_dir``."""
    return Path(cache_dir) / f"{key[:32]}.safetensors"


def cached_models(cache_dir: Path, payload: dict, train: Callable[[], Params]) -> tuple[Params, bool]:
    """Load the models for ``payload`` from the cache, or train and store them.

    Returns ``(params, hit)``.
    """
    key = cache_key(payload)
    path = entry_path(cache_dir, key)
    params = load_entry(path, key)
    if params is not None:
        return params, True
    params = train()
    save_entry(path, key, params)
    return params, False
