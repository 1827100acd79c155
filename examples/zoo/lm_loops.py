"""Opacus fine-tuning loops of a causal language model, each with one pitfall of DP training on Hugging
Face / PEFT models, beside the correct loops.

:func:`train` is the loop the Opacus and Hugging Face tutorials write: texts tokenised and right-padded,
a ``DataLoader``, a ``GPT2LMHeadModel`` (the tiny GPT-2 of :mod:`targets.lm.model`, freshly initialised:
no pretraining, so an audit takes seconds), optionally PEFT LoRA, AdamW, ``make_private`` with the noise
multiplier Opacus calibrates for the claim (Poisson sampling at ``1/len(loader)``) and
``optimizer.step()`` per batch. :data:`N` = 37 speeches of the packaged corpus in batches of 8: rate
0.2, 1 epoch = 5 steps, clip norm 1; at 37 texts neither the rate nor the expected batch size
``int(n q)`` moves when one text is added or removed. Every plugin is a language-model trainer
(``"kind": "lm_trainer"``) claiming (4, 1e-5)-DP, with 64 canary tokens (the tokenizer's reserved ids,
written ``<|rK|>``). The mistakes (sources: docs/reference/bug-zoo.md and
docs/references.md, "Language model training checks"):

* :func:`default_position_ids`: ``position_ids`` not passed, so Hugging Face builds them of shape ``(1, L)``
  (Opacus #841);
* :func:`labels_loss`: the loss of ``model(..., labels=...)``, a mean over every token of the batch
  (transformers #25303);
* :func:`optimizer_before_peft`: the optimizer built before ``get_peft_model``, so it holds none of the
  LoRA adapters (Opacus #820: LoRA weights that do not update);
* :func:`canaries_not_in_tokenizer`: the texts encoded as plain UTF-8 bytes by a tokenizer never told about
  the canary tokens, so each canary is a string of ordinary byte ids;
* :func:`packed_blocks`: the texts joined and cut into blocks (``group_texts`` of Hugging Face's
  ``run_clm.py``), so the training's examples are not the records.
* :func:`polish`: the DP fine-tuning done right, then one ordinary AdamW epoch on a quarter of the texts
  (issue 39: the model returned is not the DP training's).

The correct loops are :func:`correct` (full fine-tuning), :func:`correct_lora`, :func:`batch_memory_manager`
and :func:`evaluation_first` (:data:`CORRECT`); :data:`TWINS` pairs each mistake with the one it departs from.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np
import torch

from targets.lm.model import build_model
from targets.lm.tokenizer import ByteTokenizer, reserved_marker

N, BATCH, EPOCHS, CLIP, LR = 37, 8, 1, 1.0, 1e-3
#: The block length of :func:`group_texts` (the mistake of :func:`packed_blocks`).
BLOCK = 32
#: The fraction of the texts the ordinary epoch of :func:`polish` covers after the DP fine-tuning.
POLISH = 0.25
EPS, DELTA = 4.0, 1e-5
#: The loops' tokenizer: bytes, BOS/EOS/PAD and 64 reserved ids for canaries; texts cut to 64 ids.
TOKENIZER = ByteTokenizer(n_reserved=64, max_length=64)


@functools.cache
def short_speeches() -> tuple[str, ...]:
    """The speeches of 16 to 60 characters of the fine-tuning pool, in corpus order."""
    from targets.lm.base import finetune_pool  # the packaged corpus (the lm extra)

    return tuple(t for t in finetune_pool() if 16 <= len(t) <= 60)


def texts() -> tuple[str, ...]:
    """The first :data:`N` of :func:`short_speeches` (a few dozen short texts)."""
    return short_speeches()[:N]


@functools.cache
def noise_multiplier() -> float:
    """The noise multiplier Opacus's ``get_noise_multiplier`` (RDP) gives for (EPS, DELTA) at rate 1/5 over
    EPOCHS x 5 steps (once per process: what ``make_private_with_epsilon`` would compute at every call)."""
    from opacus.accountants.utils import get_noise_multiplier  # optional dependency (the opacus extra)

    return float(get_noise_multiplier(target_epsilon=EPS, target_delta=DELTA, sample_rate=1 / 5, steps=EPOCHS * 5,
                                      accountant="rdp"))


def bytes_only(text: str) -> list[int]:
    """A byte tokenizer that knows no reserved token: BOS, the UTF-8 bytes, EOS (the mistake of
    :func:`canaries_not_in_tokenizer`)."""
    return [TOKENIZER.bos, *text.encode("utf-8"), TOKENIZER.eos][: TOKENIZER.max_length]


def _padded(encoded: Sequence[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(e) for e in encoded)
    ids = torch.full((len(encoded), width), TOKENIZER.pad, dtype=torch.long)
    mask = torch.zeros((len(encoded), width), dtype=torch.bool)
    for row, e in enumerate(encoded):
        ids[row, : len(e)], mask[row, : len(e)] = torch.tensor(e), True
    return ids, mask


def _positions(ids: torch.Tensor) -> torch.Tensor:
    return torch.arange(ids.shape[1]).expand(ids.shape[0], -1)


def _loss(model: torch.nn.Module, ids: torch.Tensor, mask: torch.Tensor, loss: str, positions: bool) -> torch.Tensor:
    """``"per-sequence"``: each sequence's mean token loss, averaged over the batch; ``"labels"``: Hugging
    Face's ``labels=`` loss (padding ignored). ``positions``: pass per-example position ids."""
    kwargs = {"position_ids": _positions(ids)} if positions else {}
    if loss == "labels":
        return model(input_ids=ids, labels=ids.masked_fill(~mask, -100), **kwargs).loss
    logits = model(input_ids=ids, **kwargs).logits[:, :-1]
    nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")
    counted = mask[:, 1:]
    return ((nll * counted).sum(1) / counted.sum(1).clamp(min=1)).mean()


def _logprobs(model: torch.nn.Module, encode: Callable[[str], list[int]]) -> Callable:
    """``logprobs(texts)``: for each text the log-probability of each token after BOS."""
    @torch.no_grad()
    def logprobs(batch: Sequence[str]) -> list[np.ndarray]:
        model.eval()
        out = []
        for text in batch:
            ids = torch.tensor([encode(text)])
            logits = model(input_ids=ids, position_ids=_positions(ids)).logits[0, :-1].double()
            out.append(torch.log_softmax(logits, -1).gather(1, ids[0, 1:, None])[:, 0].numpy())
        return out

    return logprobs


def group_texts(encoded: Sequence[list[int]], block: int = BLOCK) -> tuple[torch.Tensor, torch.Tensor]:
    """Hugging Face ``run_clm.py``'s ``group_texts``: the encoded texts joined and cut into blocks of ``block``
    ids, the remainder dropped (the mistake of :func:`packed_blocks`)."""
    joined = [i for e in encoded for i in e]
    ids = torch.tensor(joined[: len(joined) // block * block]).reshape(-1, block)
    return ids, torch.ones_like(ids, dtype=torch.bool)


def _epoch(model: torch.nn.Module, optimizer: torch.optim.Optimizer, loader, loss: str, positions: bool) -> None:
    for batch_ids, batch_mask in loader:
        optimizer.zero_grad()
        if len(batch_ids):
            _loss(model, batch_ids, batch_mask, loss, positions).backward()
        optimizer.step()


@torch.no_grad()
def _evaluate(model: torch.nn.Module, loader, loss: str, positions: bool) -> float:
    """A no-grad pass over ``loader``: the mean loss of its batches."""
    return float(np.mean([float(_loss(model, i, m, loss, positions)) for i, m in loader]))


def train(batch_texts: list[str], seed: int, *, positions: bool = True, loss: str = "per-sequence",
          lora: bool = False, optimizer_first: bool = False, encode: Callable[[str], list[int]] = TOKENIZER.encode,
          pattern: str = "plain"):
    """The loop (module docstring); the keywords are its pitfalls, ``pattern`` how it is written: ``"plain"``,
    ``"memory-manager"`` (each logical batch through Opacus's ``BatchMemoryManager`` in physical batches of at
    most 3), ``"evaluation"`` (a no-grad evaluation loss over the training texts before training),
    ``"packed"`` (the texts packed into blocks by :func:`group_texts`, in a ``DPDataLoader`` at the rate 1/5 of
    the other loops: the rate and divisor Opacus derives do not move with one text) or ``"polish"`` (after the DP
    epochs, one ordinary AdamW epoch over :data:`POLISH` of the texts on ``to_standard_module()``). Returns
    ``logprobs``."""
    from opacus import PrivacyEngine  # optional dependency (the opacus extra)
    from opacus.data_loader import DPDataLoader
    from opacus.utils.batch_memory_manager import BatchMemoryManager

    torch.manual_seed(seed)
    encoded = [encode(t) for t in batch_texts]
    ids, mask = group_texts(encoded) if pattern == "packed" else _padded(encoded)
    dataset = torch.utils.data.TensorDataset(ids, mask)
    loader = (DPDataLoader(dataset, sample_rate=1 / 5) if pattern == "packed" else
              torch.utils.data.DataLoader(dataset, batch_size=BATCH))
    model = build_model(TOKENIZER, 0)
    if pattern == "evaluation":
        _evaluate(model, loader, loss, positions)
    if optimizer_first:
        optimizer = torch.optim.AdamW(model.parameters(), lr=LR)
    if lora:
        from peft import LoraConfig, get_peft_model  # optional dependency (the lm extra)

        model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=["c_attn"],
                                                 fan_in_fan_out=True))
    if not optimizer_first:
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=LR)
    engine = PrivacyEngine(accountant="rdp")
    model, optimizer, loader = engine.make_private(module=model, optimizer=optimizer, data_loader=loader,
                                                   noise_multiplier=noise_multiplier(), max_grad_norm=CLIP)
    model.train()
    for _ in range(EPOCHS):
        if pattern == "memory-manager":
            with BatchMemoryManager(data_loader=loader, max_physical_batch_size=3, optimizer=optimizer) as physical:
                _epoch(model, optimizer, physical, loss, positions)
        else:
            _epoch(model, optimizer, loader, loss, positions)
    if pattern == "polish":
        _polish(model.to_standard_module(), ids, mask, int(POLISH * len(ids)), loss, positions)
    return _logprobs(model, encode)


def _polish(model: torch.nn.Module, ids: torch.Tensor, mask: torch.Tensor, rows: int, loss: str,
            positions: bool) -> None:
    """One ordinary (non-private) AdamW epoch over ``rows`` texts drawn at random: no clipping, no noise."""
    plain = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=LR)
    for chosen in torch.randperm(len(ids))[:rows].split(BATCH):
        plain.zero_grad()
        _loss(model, ids[chosen], mask[chosen], loss, positions).backward()
        plain.step()


def plugin(name: str, description: str, **loop) -> dict:
    """The language-model trainer plugin: :func:`texts`, the loop of :func:`train` with ``loop``, (EPS, DELTA)."""
    return {"kind": "lm_trainer", "name": f"zoo_lm_{name}", "texts": list(texts()), "description": description,
            "train": lambda batch, seed: train(batch, seed, **loop), "claim": {"epsilon": EPS, "delta": DELTA},
            "canary_tokens": [reserved_marker(k) for k in range(TOKENIZER.n_reserved)]}


def default_position_ids() -> dict:
    """``position_ids`` not passed: Hugging Face's ``(1, L)`` default broadcast across the batch."""
    return plugin("default_position_ids", "no position_ids: (1, L) broadcast across the batch", positions=False)


def labels_loss() -> dict:
    """The loss of ``labels=``, a mean over every token of the batch."""
    return plugin("labels_loss", "Hugging Face's labels= loss (a mean over the batch's tokens)", loss="labels")


def optimizer_before_peft() -> dict:
    """The optimizer built over the model's parameters before ``get_peft_model`` freezes them and adds LoRA."""
    return plugin("optimizer_before_peft", "AdamW built before get_peft_model: holds none of the adapters",
                  lora=True, optimizer_first=True)


def canaries_not_in_tokenizer() -> dict:
    """The texts encoded by a byte tokenizer that knows no reserved token: each canary is ordinary bytes."""
    return plugin("canaries_not_in_tokenizer", "a tokenizer never told about the canary tokens",
                  encode=bytes_only)


def packed_blocks() -> dict:
    """The texts joined and cut into blocks of 32 ids (``group_texts`` of Hugging Face's ``run_clm.py``): a text
    spans two or three blocks and adding one shifts every later block, so per-text accounting does not hold."""
    return plugin("packed_blocks", f"texts packed into blocks of {BLOCK} ids (run_clm.py group_texts)",
                  pattern="packed")


def batch_memory_manager() -> dict:
    """Correct: each logical batch through Opacus's ``BatchMemoryManager`` in physical batches of at most 3."""
    return plugin("batch_memory_manager", "BatchMemoryManager: logical batches of ~8 in physical batches of 3",
                  pattern="memory-manager")


def evaluation_first() -> dict:
    """Correct: a no-grad evaluation loss over the training texts before training."""
    return plugin("evaluation_first", "a no-grad evaluation over the training texts before training",
                  pattern="evaluation")


def polish() -> dict:
    """DP fine-tuning done right, then one ordinary AdamW epoch on 25% of the texts (a non-private "polish")."""
    return plugin("polish", "DP fine-tuning, then one non-private epoch on 25% of the texts", pattern="polish")


def correct() -> dict:
    return plugin("correct", "per-example position ids, per-sequence loss, reserved canary ids")


def correct_lora() -> dict:
    return plugin("correct_lora", "LoRA, AdamW built after get_peft_model over the adapters", lora=True)


#: Every mistake of this module and the correct loop it departs from.
TWINS = {"default_position_ids": "correct", "labels_loss": "correct", "optimizer_before_peft": "correct_lora",
         "canaries_not_in_tokenizer": "correct", "packed_blocks": "correct",
         "polish": "correct"}
MISTAKES = tuple(TWINS)
#: Correct loops written as the Opacus and Hugging Face docs show them: each must pass.
CORRECT = ("correct", "correct_lora", "batch_memory_manager", "evaluation_first")
