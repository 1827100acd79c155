"""The base model of the language-model targets: the tiny GPT pretrained from scratch on one part of the
corpus, built on first use and cached as safetensors.

Pretraining uses the speeches of :data:`PRETRAIN_GENRES` (tragedies, Roman plays, romances); fine-tuning
texts (members and non-members) come from the other genres (:func:`finetune_pool`), so the base never saw
them. The cache entry is ``<cache_dir>/lm-base-<key>.safetensors`` (the caller passes the project's cache
directory); the key hashes the :class:`BaseSpec` and the source of the modules that determine the model,
and is stored in the file's metadata with a SHA-256 of the weights: a stale or damaged entry is rebuilt.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from targets.lm.corpus import GENRES, load_speeches
from targets.lm.device import lm_device
from targets.lm.model import build_model
from targets.lm.tokenizer import ByteTokenizer
from targets.lm.training import train_plain

__all__ = ["BaseSpec", "PRETRAIN_GENRES", "pretrained_base", "finetune_pool", "base_key"]

#: Genres the base is pretrained on; the others are the fine-tuning pool.
PRETRAIN_GENRES = ("tragedies", "roman", "romances")
_MODULES = ("targets.lm.corpus", "targets.lm.tokenizer", "targets.lm.model", "targets.lm.training",
            "targets.lm.base")


@dataclass(frozen=True, kw_only=True)
class BaseSpec:
    """Pretraining: ``n_texts`` speeches of :data:`PRETRAIN_GENRES` (seeded draw; 0 = all), ``epochs`` of
    Adam at ``lr`` in batches of ``batch_size``; the tokenizer's ``n_reserved`` and ``max_length``."""

    n_texts: int = 3000
    epochs: int = 2
    lr: float = 2e-3
    batch_size: int = 32
    n_reserved: int = 1024
    max_length: int = 128
    seed: int = 0

    @property
    def tokenizer(self) -> ByteTokenizer:
        return ByteTokenizer(n_reserved=self.n_reserved, max_length=self.max_length)


def _draw(texts: list[str], n: int, seed: int) -> list[str]:
    if n <= 0 or n >= len(texts):
        return texts
    chosen = np.random.default_rng([seed, 0x1A4B]).choice(len(texts), n, replace=False)
    return [texts[i] for i in np.sort(chosen)]


def finetune_pool() -> list[str]:
    """The speeches of the genres not in :data:`PRETRAIN_GENRES`, in corpus order."""
    return [s.text for s in load_speeches() if s.genre not in PRETRAIN_GENRES and s.genre in GENRES]


def base_key(spec: BaseSpec, device: str = "cpu") -> str:
    """SHA-256 of the spec, the kind of device it is pretrained on (``"cpu"``, ``"cuda"``: their floats differ)
    and the source of the modules that determine the base model."""
    h = hashlib.sha256(json.dumps(asdict(spec) | {"device": device}, sort_keys=True).encode())
    for name in _MODULES:
        origin = importlib.util.find_spec(name).origin
        h.update(Path(origin).read_bytes())
    return h.hexdigest()


def _digest(state: dict[str, torch.Tensor]) -> str:
    h = hashlib.sha256()
    for name in sorted(state):
        h.update(name.encode())
        h.update(state[name].contiguous().numpy().tobytes())
    return h.hexdigest()


def _load(path: Path, key: str) -> dict[str, torch.Tensor] | None:
    if not path.is_file():
        return None
    try:
        # optional dependency: safetensors' metadata reader (the header holds key and digest)
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as handle:
            meta = handle.metadata() or {}
        state = load_file(str(path))
        if meta.get("key") != key or meta.get("sha256") != _digest(state):
            raise ValueError("key or checksum mismatch")
        return state
    except Exception as exc:  # a damaged entry is rebuilt
        sys.stderr.write(f"warning: cached base model {path.name} is unusable ({exc}); pretraining again\n")
        return None


def _save(path: Path, key: str, state: dict[str, torch.Tensor]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu().contiguous() for k, v in state.items()}
    handle, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    os.close(handle)
    try:
        save_file(state, tmp, metadata={"key": key, "sha256": _digest(state)})
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def pretrained_base(spec: BaseSpec, cache_dir: Path | None) -> tuple[torch.nn.Module, bool]:
    """The base model of ``spec`` and whether it came from the cache (``cache_dir`` None: never cached), on the
    run's device (:func:`targets.lm.device.lm_device`), where it is pretrained when not cached."""
    device = lm_device()
    key = base_key(spec, device.type)
    path = None if cache_dir is None else Path(cache_dir) / f"lm-base-{key[:32]}.safetensors"
    tokenizer = spec.tokenizer
    model = build_model(tokenizer, spec.seed).to(device)
    state = None if path is None else _load(path, key)
    if state is not None:
        model.load_state_dict(state)
        return model.eval(), True
    texts = _draw([s.text for s in load_speeches() if s.genre in PRETRAIN_GENRES], spec.n_texts, spec.seed)
    torch.manual_seed(spec.seed)
    train_plain(model, tokenizer, texts, epochs=spec.epochs, lr=spec.lr, batch_size=spec.batch_size, seed=spec.seed)
    if path is not None:
        _save(path, key, model.state_dict())
    return model.eval(), False
