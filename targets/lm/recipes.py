"""The three language-model targets of issue 35 as recipes (what a runner needs to train and claim them):
``nonprivate_tinygpt``, ``dpsgd_tinygpt`` (Opacus DP-SGD, full fine-tuning) and ``dpsgd_tinygpt_lora``
(PEFT LoRA under Opacus), each the cached base (:func:`targets.lm.base.pretrained_base`) fine-tuned on
``n_members`` speeches of the fine-tuning pool (:func:`targets.lm.base.finetune_pool`).

The DP recipes claim (EPSILON, DELTA) for add/remove neighbours: the noise multiplier is calibrated by the
project's PLD accountant (:func:`audit.theory.dpsgd.calibrate_noise_multiplier`) for Poisson rate
``sample_rate`` over ``epochs / sample_rate`` steps, the T that Opacus runs and accounts
(docs/references.md, "DP-SGD accounting" and "Language models").
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

from audit.errors import UserError
from audit.theory.dpsgd import calibrate_noise_multiplier
from targets.lm.base import BaseSpec
from targets.lm.training import FineTune

__all__ = ["LMRecipe", "lm_recipe", "LM_TARGETS", "LM_DESCRIPTIONS", "EPSILON", "DELTA"]

EPSILON, DELTA = 4.0, 1e-5
#: The built-in language-model targets.
LM_TARGETS = ("nonprivate_tinygpt", "dpsgd_tinygpt", "dpsgd_tinygpt_lora")
#: One line on each built-in language-model target (``python -m audit list``).
LM_DESCRIPTIONS = {
    "nonprivate_tinygpt": "tiny GPT-2 (byte-level, cached base) fine-tuned non-privately on 300 Shakespeare speeches, "
                          "30 epochs",
    "dpsgd_tinygpt": "tiny GPT-2 fully fine-tuned with Opacus DP-SGD on Shakespeare speeches, (4, 1e-5) by PLD",
    "dpsgd_tinygpt_lora": "tiny GPT-2 fine-tuned with PEFT LoRA (rank 8) under Opacus DP-SGD, (4, 1e-5) by PLD",
}
_DP = {"epochs": 10, "lr": 2e-3, "sample_rate": 0.1, "clip": 1.0}


@dataclass(frozen=True)
class LMRecipe:
    """A language-model target: its base, its fine-tuning, how many members, and its claim (None:
    non-private)."""

    name: str
    base: BaseSpec
    finetune: FineTune
    n_members: int
    epsilon: float | None
    delta: float | None


@functools.cache
def _sigma(sample_rate: float, steps: int) -> float:
    return float(calibrate_noise_multiplier(EPSILON, DELTA, sample_rate, steps))


def lm_recipe(name: str, seed: int = 0) -> LMRecipe:
    """The recipe of built-in target ``name`` (:data:`LM_TARGETS`); a one-line error for another name."""
    if name not in LM_TARGETS:
        raise UserError(f"unknown language-model target {name!r}; choose one of {', '.join(LM_TARGETS)}")
    base = BaseSpec(seed=0)
    if name == "nonprivate_tinygpt":
        return LMRecipe(name, base, FineTune(epochs=30, seed=seed), 300, None, None)
    dp = FineTune(**_DP, noise_multiplier=1.0, lora_rank=8 if name.endswith("lora") else 0, seed=seed)
    sigma = _sigma(dp.sample_rate, dp.steps(0))
    return LMRecipe(name, base, dataclasses.replace(dp, noise_multiplier=sigma), 300, EPSILON, DELTA)
