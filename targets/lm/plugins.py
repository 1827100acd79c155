"""The built-in language-model targets written as language-model trainer plugins (the contract of
:mod:`targets.plugins.lm`): ``nonprivate_tinygpt``, ``dpsgd_tinygpt`` and ``dpsgd_tinygpt_lora``, the recipes
of :mod:`targets.lm.recipes` on their members, so the code ``run dp --one-run`` audits on them is the code a
user's plugin goes through.

Each factory returns ``{"kind": "lm_trainer", "texts": members, "train": train, "claim": ..., "canary_tokens":
the tokenizer's reserved markers, "canary_prefixes": held-out speeches}``: the members are ``n_members``
speeches of the fine-tuning pool (:func:`targets.lm.base.finetune_pool`, a seeded draw), the prefixes the rest
of the pool. ``train(texts, seed)`` fine-tunes the cached base (:func:`targets.lm.base.pretrained_base`, in
:func:`lm_cache_dir`, pretrained by the first call of ``train`` when not cached: the factory itself is
cheap, e.g. for ``bound``) on ``texts`` with the recipe at ``seed`` and
returns :func:`targets.lm.model.logprob_function`; pretraining and fine-tuning run under one intra-op thread
(faster on the shared 2-core machine: ``benchmarks/bench_lm.py``). The DP
claim states its DP-SGD accounting (noise multiplier, rate, steps), checked by the PLD accountant.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any

import numpy as np
import torch

from audit.theory.disk_cache import CACHE_ENV, cache_folder
from targets.lm.base import BaseSpec, finetune_pool, pretrained_base
from targets.lm.model import logprob_function
from targets.lm.recipes import LMRecipe, lm_recipe
from targets.lm.tokenizer import reserved_marker
from targets.lm.training import FineTune, fine_tune
from targets.threads import thread_limit

__all__ = ["lm_cache_dir", "lm_trainer", "lm_trainer_spec", "nonprivate_tinygpt", "dpsgd_tinygpt", "dpsgd_tinygpt_lora",
           "CACHE_ENV"]


def lm_cache_dir() -> Path:
    """Where the base model is cached: the workbench's cache folder, ``$PRIVACY_AUDIT_CACHE`` (:data:`CACHE_ENV`),
    else ``~/.cache/privacy-audit`` (:func:`audit.theory.disk_cache.cache_folder`)."""
    return cache_folder()


def lm_trainer(recipe: LMRecipe, *, members: int | None = None, base: BaseSpec | None = None,
               finetune: FineTune | None = None) -> dict[str, Any]:
    """The ``lm_trainer`` dict of ``recipe`` (module docstring); ``members``, ``base`` and ``finetune`` replace
    the recipe's (smaller settings for tests and tutorials)."""
    base = base or recipe.base
    config = finetune or recipe.finetune
    n = recipe.n_members if members is None else int(members)
    pool = finetune_pool()
    order = np.random.default_rng([recipe.finetune.seed, 0x7E37]).permutation(len(pool))
    texts = [pool[i] for i in np.sort(order[:n])]
    prefixes = [pool[i] for i in order[n:]]
    tokenizer = base.tokenizer

    @functools.cache
    def base_model() -> torch.nn.Module:
        return pretrained_base(base, lm_cache_dir())[0]

    def train(texts: list[str], seed: int):
        with thread_limit(1):
            tuned = fine_tune(base_model(), tokenizer, texts, dataclasses.replace(config, seed=int(seed)))
        return logprob_function(tuned, tokenizer)

    made = {"kind": "lm_trainer", "name": recipe.name, "texts": texts, "train": train,
            "canary_tokens": [reserved_marker(i) for i in range(tokenizer.n_reserved)], "canary_prefixes": prefixes,
            "description": f"tiny GPT-2 fine-tuned on {n} speeches" + (
                f" by Opacus DP-SGD{' (PEFT LoRA)' if config.lora_rank else ''}, claims ({recipe.epsilon:g}, "
                f"{recipe.delta:g})" if config.private else " without privacy"),
            "params": {"members": n, "finetune": dataclasses.asdict(config), "base": dataclasses.asdict(base)}}
    if config.private:
        made["claim"] = {"epsilon": recipe.epsilon, "delta": recipe.delta,
                         "dpsgd": {"noise_multiplier": config.noise_multiplier, "sample_rate": config.sample_rate,
                                   "steps": config.steps(n)}}
    return made


def lm_trainer_spec(name: str) -> str:
    """The plugin spec of built-in language-model target ``name`` as an lm_trainer (what ``run dp --one-run``
    audits); a one-line error for another name."""
    return f"{__name__}:{lm_recipe(name).name}"


def nonprivate_tinygpt() -> dict[str, Any]:
    """Built-in target ``nonprivate_tinygpt`` (no claim: audited black-box against ``--epsilon``)."""
    return lm_trainer(lm_recipe("nonprivate_tinygpt"))


def dpsgd_tinygpt() -> dict[str, Any]:
    """Built-in target ``dpsgd_tinygpt``: Opacus DP-SGD, full fine-tuning, (4, 1e-5)."""
    return lm_trainer(lm_recipe("dpsgd_tinygpt"))


def dpsgd_tinygpt_lora() -> dict[str, Any]:
    """Built-in target ``dpsgd_tinygpt_lora``: PEFT LoRA under Opacus DP-SGD, (4, 1e-5)."""
    return lm_trainer(lm_recipe("dpsgd_tinygpt_lora"))
