"""Training the tiny GPT: pretraining a base from scratch, and fine-tuning it non-privately, with DP-SGD
under Opacus (full fine-tuning) or with PEFT LoRA under Opacus.

DP fine-tuning is Opacus's own DP-SGD [Abadi et al. 2016, Algorithm 1]: ``PrivacyEngine.make_private``
with Poisson sampling at rate ``sample_rate`` (a ``DPDataLoader`` built at that rate, ``1 / sample_rate``
steps an epoch), per-example clipping to ``clip``, Gaussian noise of standard deviation
``noise_multiplier * clip``, Adam on the noisy sum of the per-sequence losses' gradients (Adam is invariant
to the scale of its gradient but for its epsilon, so no normaliser is needed): rate, steps and the update's
scale never move with the number of texts, as the accounting check of a one-run audit requires of a
neighbouring dataset. Nothing here instruments it: an audit wraps
the call in :func:`targets.opacus_hooks.instrument_opacus`, which patches ``make_private`` and
``add_noise``, so the DP-SGD that is audited is the one that trains (docs/references.md, "Language
models"). HF's ``Conv1D`` has no Opacus grad sampler and goes through Opacus's functorch fallback; LoRA's
adapters are ``torch.nn.Linear`` layers (hooks). The loss is the batch mean of per-sequence mean losses
with per-example ``position_ids`` (:func:`targets.lm.model.sequence_losses`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch

from audit.errors import UserError
from targets.lm.device import lm_device
from targets.lm.model import build_model, model_device, padded_batch, sequence_losses
from targets.lm.tokenizer import ByteTokenizer

__all__ = ["FineTune", "train_plain", "fine_tune", "LORA_TARGETS"]

#: The GPT-2 modules that carry LoRA adapters (attention in/out projections and the MLP).
LORA_TARGETS = ("c_attn", "c_proj", "c_fc")


@dataclass(frozen=True, kw_only=True)
class FineTune:
    """How to fine-tune. ``noise_multiplier`` None: non-private (shuffled batches of ``batch_size``);
    otherwise DP-SGD under Opacus at Poisson rate ``sample_rate`` with clip norm ``clip``. ``lora_rank``
    0: full fine-tuning; otherwise PEFT LoRA of that rank (``lora_alpha``) on :data:`LORA_TARGETS`."""

    epochs: int = 30
    lr: float = 1e-3
    batch_size: int = 32
    noise_multiplier: float | None = None
    clip: float = 1.0
    sample_rate: float = 0.1
    lora_rank: int = 0
    lora_alpha: float = 16.0
    seed: int = 0

    @property
    def private(self) -> bool:
        return self.noise_multiplier is not None

    def steps(self, n_records: int) -> int:
        """Optimizer steps over the whole run (DP: ``epochs / sample_rate``, the T Opacus accounts)."""
        if self.private:
            return int(round(self.epochs / self.sample_rate))
        return self.epochs * -(-n_records // self.batch_size)


def _step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, ids: torch.Tensor, mask: torch.Tensor,
          summed: bool = False) -> None:
    """One step on the batch mean (``summed``: the sum) of per-sequence losses. An empty Poisson batch under
    Opacus is a noise-only step (zero per-example gradients, the noise added as on every step): DP-SGD takes
    all T steps it accounts, whatever the batches hold [Abadi et al. 2016, Algorithm 1]. The batch goes to the
    model's device."""
    optimizer.zero_grad()
    device = model_device(model)
    ids, mask = ids.to(device), mask.to(device)
    if len(ids):
        width = int(mask.sum(dim=1).max())
        losses = sequence_losses(model, ids[:, :width], mask[:, :width])
        (losses.sum() if summed else losses.mean()).backward()
    elif hasattr(optimizer, "original_optimizer"):  # Opacus's DPOptimizer: no backward ran, no grad samples
        for p in optimizer.params:
            p.grad_sample = torch.zeros((0, *p.shape), dtype=p.dtype, device=p.device)
    optimizer.step()


def _shuffled(ids: torch.Tensor, mask: torch.Tensor, batch_size: int, epochs: int,
              generator: torch.Generator) -> Iterable[tuple[torch.Tensor, torch.Tensor]]:
    for _ in range(epochs):
        order = torch.randperm(len(ids), generator=generator)
        for start in range(0, len(ids), batch_size):
            chosen = order[start: start + batch_size]
            yield ids[chosen], mask[chosen]


def train_plain(model: torch.nn.Module, tokenizer: ByteTokenizer, texts: Sequence[str], *, epochs: int, lr: float,
                batch_size: int, seed: int) -> torch.nn.Module:
    """Non-private training of every trainable parameter of ``model`` (Adam, shuffled batches, seeded)."""
    ids, mask = padded_batch(tokenizer, texts)
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr)
    model.train()
    for batch_ids, batch_mask in _shuffled(ids, mask, batch_size, epochs, torch.Generator().manual_seed(seed)):
        _step(model, optimizer, batch_ids, batch_mask)
    return model.eval()


def _with_lora(model: torch.nn.Module, config: FineTune) -> torch.nn.Module:
    # optional dependency (the lm extra)
    from peft import LoraConfig, get_peft_model

    lora = LoraConfig(r=config.lora_rank, lora_alpha=config.lora_alpha, lora_dropout=0.0,
                      target_modules=list(LORA_TARGETS), fan_in_fan_out=True, bias="none")
    return get_peft_model(model, lora)


def _train_private(model: torch.nn.Module, tokenizer: ByteTokenizer, texts: Sequence[str],
                   config: FineTune) -> torch.nn.Module:
    """DP-SGD by Opacus (module docstring); returns the trained module (unwrapped)."""
    # the lm targets' Opacus DP-SGD is the one the update-level audit instruments (targets.opacus_hooks)
    from targets.opacus_hooks import require_opacus

    opacus = require_opacus()
    # optional dependency (the opacus extra)
    from opacus.data_loader import DPDataLoader

    ids, mask = padded_batch(tokenizer, texts)
    loader = DPDataLoader(torch.utils.data.TensorDataset(ids, mask), sample_rate=config.sample_rate)
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=config.lr)
    engine = opacus.PrivacyEngine(accountant="rdp")
    private, optimizer, loader = engine.make_private(module=model, optimizer=optimizer, data_loader=loader,
                                                     noise_multiplier=config.noise_multiplier,
                                                     max_grad_norm=config.clip, poisson_sampling=True,
                                                     loss_reduction="sum")
    private.train()
    for _ in range(config.epochs):
        for batch_ids, batch_mask in loader:
            _step(private, optimizer, batch_ids, batch_mask, summed=True)
    private.remove_hooks()
    return private._module


def fine_tune(base: torch.nn.Module, tokenizer: ByteTokenizer, texts: Sequence[str],
              config: FineTune) -> torch.nn.Module:
    """A copy of ``base`` fine-tuned on ``texts`` as ``config`` says (seeded: ``torch.manual_seed`` drives
    Opacus's batches and noise), on the run's device (:func:`targets.lm.device.lm_device`); LoRA adapters are
    merged into the returned ``GPT2LMHeadModel``."""
    if len(texts) == 0:
        raise UserError("fine-tuning needs at least one text")
    model = build_model(tokenizer, config.seed).to(lm_device())
    model.load_state_dict(base.state_dict())
    if config.lora_rank:
        model = _with_lora(model, config)
    torch.manual_seed(int(config.seed))
    if config.private:
        model = _train_private(model, tokenizer, texts, config)
    else:
        model = train_plain(model, tokenizer, texts, epochs=config.epochs, lr=config.lr,
                            batch_size=config.batch_size, seed=config.seed)
    if config.lora_rank:
        model = model.merge_and_unload()
    return model.eval()
