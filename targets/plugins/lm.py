"""The language-model trainer contract: ``{"kind": "lm_trainer", ...}``, a user's fine-tuning of a causal LM
(Hugging Face, Opacus, PEFT or a hand-written DP-SGD loop) audited by ``run dp --one-run``.

``factory()`` returns a plain dict (no import of this project needed)::

    {"kind": "lm_trainer",
     "texts": [str, ...],                      # the records: one text = one example of the DP guarantee
     "train": train,                           # train(texts, seed) -> logprobs
     "claim": {"epsilon": E, "delta": D},      # as for a trainer plugin; omit it for non-private training
     # optional
     "canary_tokens": [str, ...],              # texts that each encode ONE token no record contains
     "canary_prefixes": [str, ...],            # held-out texts the canaries' prefixes are cut from
     "name": ..., "description": ..., "params": {...}, "rng": "seed" | ..., "delta": D}

``train(texts, seed)`` fine-tunes on exactly ``texts`` (a list of str, in any order it likes) and returns
``logprobs(texts) -> [np.ndarray, ...]``: for each text the log-probabilities ``log p(token_t | tokens_<t)``
of its tokens (any tokenizer; one 1-D array per text). The DP-SGD the code runs is read through Opacus's
``make_private`` or the two calls of :mod:`targets.audit_hooks`, exactly as for a trainer plugin, so the
updates and white-box threats put gradient canaries in whatever parameters the optimizer trains (LoRA
adapters under PEFT). The black-box threat adds canary *texts* by fair coins and scores each by the
log-probability of its secret given its prefix, ``sum logprobs(prefix + secret) - sum logprobs(prefix)``
(Panda et al. 2025's new-token canaries when the secret is one of ``canary_tokens``;
docs/references.md, "Language models").

The adapter (:func:`lm_trainer_fields`) turns the dict into the fields of a
:class:`targets.plugins.TrainerPlugin`: the texts become a one-column object array ``X`` (labels all 0), so
the accounting check's "dataset plus one record / less one record" adds or removes one text, and
``train(X, y, seed)`` calls the user's ``train(list_of_texts, seed)``. Every malformed field is a one-line
:class:`audit.errors.UserError` naming it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from audit.errors import UserError, did_you_mean
from targets.plugins.rng import rng_kind

__all__ = ["LMTexts", "LM_TRAINER_KEYS", "lm_trainer_fields", "texts_of", "MIN_TEXTS"]

#: The keys an ``lm_trainer`` dict may hold.
LM_TRAINER_KEYS = frozenset(("kind", "name", "description", "params", "claim", "rng", "delta", "texts", "train",
                             "canary_tokens", "canary_prefixes", "neighbouring"))
#: Fewest texts a plugin may give (the accounting check removes one; Poisson batches need a few).
MIN_TEXTS = 10


@dataclass(frozen=True)
class LMTexts:
    """What an ``lm_trainer`` adds to a trainer plugin: whether it states a claim, its canary tokens (each one
    token no record contains) and the held-out texts canary prefixes are cut from (empty: the records')."""

    claimed: bool
    canary_tokens: tuple[str, ...] = ()
    canary_prefixes: tuple[str, ...] = ()


def _strings(spec: str, value: Any, key: str, minimum: int) -> tuple[str, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) and not isinstance(value, np.ndarray):
        raise UserError(f"plugin {spec}: field {key!r} must be a list of str, got {type(value).__name__}")
    items = list(value)
    bad = next((i for i, t in enumerate(items) if not isinstance(t, str) or not t), None)
    if bad is not None:
        raise UserError(f"plugin {spec}: field {key!r} must hold non-empty str; item {bad} is {items[bad]!r:.40}")
    if len(items) < minimum:
        raise UserError(f"plugin {spec}: field {key!r} needs at least {minimum} texts, got {len(items)}")
    return tuple(items)


def texts_of(X: np.ndarray) -> list[str]:
    """The texts of a text plugin's one-column object array ``X``."""
    return [str(t) for t in np.asarray(X, dtype=object).reshape(-1)]


def _adapted(train: Callable[..., Any]) -> Callable[..., Any]:
    """``train(X, y, *rng)`` of a trainer plugin calling the user's ``train(texts, *rng)``."""
    def train_texts(X: np.ndarray, y: np.ndarray, *rng: Any) -> Any:
        return train(texts_of(X), *rng)

    return train_texts


def lm_trainer_fields(spec: str, made: dict) -> dict[str, Any]:
    """The :class:`targets.plugins.TrainerPlugin` fields of an ``lm_trainer`` dict (module docstring) but the
    claim (the caller reads it as for any trainer): ``dataset``, ``train``, ``rng``, ``lm``, ``description``,
    ``neighbouring``; one-line errors for a malformed field."""
    unknown = sorted(str(k) for k in made if k not in LM_TRAINER_KEYS)
    if unknown:
        raise UserError(f"plugin {spec}: unknown key {unknown[0]!r}{did_you_mean(unknown[0], LM_TRAINER_KEYS)} "
                        f"(an lm_trainer takes "
                        f"{', '.join(sorted(LM_TRAINER_KEYS))})")
    if "texts" not in made:
        raise UserError(f"plugin {spec}: an lm_trainer needs field 'texts', the list of training texts")
    texts = _strings(spec, made["texts"], "texts", MIN_TEXTS)
    train = made.get("train")
    if not callable(train):
        raise UserError(f"plugin {spec}: field 'train' must be a function train(texts, seed) -> logprobs")
    tokens = _strings(spec, made.get("canary_tokens", ()), "canary_tokens", 0)
    inside = next((t for t in tokens if any(t in text for text in texts)), None)
    if inside is not None:
        raise UserError(f"plugin {spec}: canary token {inside!r} occurs in the texts; a new-token canary needs a token "
                        f"no record contains")
    prefixes = _strings(spec, made.get("canary_prefixes", ()), "canary_prefixes", 0)
    X = np.empty(len(texts), dtype=object)
    X[:] = texts
    return {"dataset": (X, np.zeros(len(texts), dtype=np.int64)), "train": _adapted(train),
            "rng": rng_kind(train, made.get("rng"), 1, "seed", f"plugin {spec}"),
            "lm": LMTexts("claim" in made, tokens, prefixes),
            "description": str(made.get("description", f"user language-model trainer {spec}")),
            "neighbouring": str(made.get("neighbouring", "add/remove one text"))}
