"""DP fine-tuning of a causal language model through Hugging Face's ``transformers.Trainer`` wired to Opacus,
with the three things the ``Trainer`` does that break DP, each beside the correct loop.

The wiring (:class:`OpacusTrainer` and :class:`OpacusCallback`) follows the public design of Microsoft's
dp-transformers — a ``Trainer`` subclass that owns the DP optimizer, the sampler and the loss, and a
callback that clears Opacus's state after each step and takes Opacus's virtual steps under gradient
accumulation — written here for Opacus's ``make_private``:

* ``__init__`` makes the model, the optimizer and a loader over the training texts private with
  ``PrivacyEngine.make_private`` (Poisson sampling at rate ``q``; the noise multiplier Opacus calibrates for
  the claim) and hands the private model and DP optimizer to the ``Trainer`` (``optimizers=(optimizer,
  None)``);
* :meth:`OpacusTrainer.get_train_dataloader` returns the Poisson loader ``make_private`` returned; the
  ``Trainer``'s own loader shuffles the texts into fixed-size batches (a ``RandomSampler``);
* :meth:`OpacusTrainer.compute_loss` is each text's mean token loss, averaged over the batch, with position
  ids of shape ``(B, L)``, and not divided by the accumulation steps (``loss_is_scaled_for_ga``: Opacus
  normalises the noisy sum); an empty Poisson batch is a noise-only step (:meth:`OpacusTrainer.training_step`);
* the ``Trainer`` evaluates the model on :data:`HELD_OUT` other speeches every :data:`EVAL_STEPS` steps
  (``eval_strategy="steps"``, no-grad batches of :data:`EVAL_BATCH` from its own evaluation loader): a pass that
  never counts as a step's records, in every loop here;
* :class:`OpacusCallback` clears the DP optimizer after each step (the ``Trainer`` only clears the model's
  gradients, and Opacus would carry the clipped sums into the next step) and, between the micro-batches of a
  gradient-accumulation window, takes Opacus's virtual step (clip and accumulate, no noise).

The fine-tuned model is the cached quick base of the language-model targets (the tiny GPT-2 of
:mod:`targets.lm.model` pretrained on 200 speeches, :func:`targets.lm.base.pretrained_base`, in
:func:`targets.lm.plugins.lm_cache_dir`), on the 37 short speeches of :mod:`examples.zoo.lm_loops` in
batches of 8 (rate 0.2, one epoch = 5 steps), claiming (4, 1e-5)-DP. The mistakes (sources:
docs/references.md, "Language model training checks", and docs/reference/bug-zoo.md):

* :func:`shuffled_sampler`: the ``Trainer`` keeps its default shuffled sampler (``get_train_dataloader`` not
  overridden), while Opacus accounts Poisson sampling (Chua et al. 2024);
* :func:`gradient_accumulation`: ``gradient_accumulation_steps=2`` over Poisson batches of rate ``q``, each
  noisy step holding two of them (the callback's virtual steps clip and accumulate the first), while Opacus and
  the claim account one batch of rate ``q`` per noisy step;
* :func:`labels_loss`: the ``Trainer``'s own ``compute_loss`` (a collator adding ``labels``, as Hugging Face's
  causal-LM collator does), i.e. the model's ``labels=`` loss, a mean over every token of the batch
  (transformers #25303);
* :func:`batch_memory_manager`: the ``Trainer`` iterating the loader of Opacus's ``BatchMemoryManager`` (Poisson
  batches split into physical batches of :data:`PHYSICAL`), as Opacus's tutorials split batches for memory: the
  ``Trainer`` takes the loader's length (the expected number of physical batches) as its number of steps and ends
  the epoch partway through a logical batch, so the number of noisy steps moves with the dataset's size.

The correct loop is :func:`correct`; :data:`TWINS` pairs each mistake with it.
"""

from __future__ import annotations

import functools
import tempfile
from typing import Any

import torch

from examples.zoo.lm_loops import (
    BATCH,
    CLIP,
    DELTA,
    EPOCHS,
    EPS,
    LR,
    _logprobs,
    _loss,
    noise_multiplier,
    short_speeches,
    texts,
)

#: The quick base of the language-model targets (pretrained once on 200 speeches, cached).
BASE_TEXTS, BASE_EPOCHS = 200, 1
#: Canary tokens named by the plugins (reserved ids of the base's tokenizer).
N_CANARY_TOKENS = 64
#: The held-out speeches the ``Trainer`` evaluates on, its evaluation batch size and how often it evaluates (steps).
HELD_OUT, EVAL_BATCH, EVAL_STEPS = 24, 10, 2
#: The physical batch size of :func:`batch_memory_manager`.
PHYSICAL = 4


def held_out() -> tuple[str, ...]:
    """:data:`HELD_OUT` short speeches after the training texts (:func:`examples.zoo.lm_loops.short_speeches`)."""
    return short_speeches()[len(texts()):len(texts()) + HELD_OUT]


@functools.cache
def base_spec() -> Any:
    """The :class:`targets.lm.base.BaseSpec` of the quick base."""
    from targets.lm.base import BaseSpec

    return BaseSpec(n_texts=BASE_TEXTS, epochs=BASE_EPOCHS)


@functools.cache
def _base_state() -> dict[str, torch.Tensor]:
    from targets.lm.base import pretrained_base
    from targets.lm.plugins import lm_cache_dir

    return {k: v.clone() for k, v in pretrained_base(base_spec(), lm_cache_dir())[0].state_dict().items()}


def base_model() -> torch.nn.Module:
    """A fresh copy of the cached quick base (pretrained on first use)."""
    from targets.lm.model import build_model

    model = build_model(base_spec().tokenizer, 0)
    model.load_state_dict(_base_state())
    return model


class TextRows(torch.utils.data.Dataset):
    """The training texts, tokenised and right-padded: item ``i`` is ``(ids, mask)`` of text ``i``."""

    def __init__(self, batch_texts: list[str]) -> None:
        from examples.zoo.lm_loops import _padded

        self.ids, self.mask = _padded([base_spec().tokenizer.encode(t) for t in batch_texts])

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.ids[i], self.mask[i]


def collate(rows: list[tuple[torch.Tensor, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """A batch as the ``Trainer`` passes it on: ``input_ids`` and ``attention_mask``."""
    return {"input_ids": torch.stack([r[0] for r in rows]), "attention_mask": torch.stack([r[1] for r in rows])}


def labelled(rows: list[tuple[torch.Tensor, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """:func:`collate` with what the ``Trainer``'s own ``compute_loss`` needs: ``labels`` (padding -100) and
    position ids of shape ``(B, L)`` (dp-transformers' collator adds them the same way)."""
    batch = collate(rows)
    ids, mask = batch["input_ids"], batch["attention_mask"]
    return batch | {"labels": ids.masked_fill(~mask.bool(), -100),
                    "position_ids": torch.arange(ids.shape[1]).expand(len(ids), -1)}


def _rows(inputs: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """``(ids, mask)`` of a batch (Opacus's empty batch keeps the first batch's structure)."""
    if isinstance(inputs, dict):
        return inputs["input_ids"], inputs["attention_mask"]
    return inputs[0], inputs[1]


@functools.cache
def trainer_classes() -> tuple[type, type]:
    """:class:`OpacusTrainer` and ``TrainerLossTrainer`` (its twin with the ``Trainer``'s own ``compute_loss``),
    built on first use (transformers and Opacus are the lm and opacus extras)."""
    from opacus import PrivacyEngine  # optional dependency (the opacus extra)
    from transformers import PrinterCallback, Trainer, TrainerCallback  # optional dependency (the lm extra)

    class OpacusCallback(TrainerCallback):
        """Clears the DP optimizer after each step; takes Opacus's virtual step between the micro-batches of a
        gradient-accumulation window (module docstring)."""

        def on_substep_end(self, args: Any, state: Any, control: Any, optimizer: Any = None, **kwargs: Any) -> None:
            dp = optimizer.optimizer  # the DPOptimizer inside accelerate's wrapper
            dp.signal_skip_step(do_skip=True)
            dp.step()
            dp.zero_grad(set_to_none=True)

        def on_step_end(self, args: Any, state: Any, control: Any, optimizer: Any = None, **kwargs: Any) -> None:
            optimizer.optimizer.zero_grad(set_to_none=True)

    class OpacusTrainer(Trainer):
        """``Trainer`` with Opacus DP-SGD (module docstring). ``poisson``: iterate the loader ``make_private``
        returns (else the ``Trainer``'s own); ``loss``: ``"per-sequence"`` or ``"labels"``."""

        collator = staticmethod(collate)

        def __init__(self, *, model: torch.nn.Module, args: Any, train_dataset: TextRows, eval_dataset: TextRows,
                     poisson: bool = True) -> None:
            optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad],
                                          lr=args.learning_rate)
            loader = torch.utils.data.DataLoader(train_dataset, batch_size=args.per_device_train_batch_size,
                                                 collate_fn=self.collator)
            self.engine = PrivacyEngine(accountant="rdp")
            private, optimizer, self.dp_loader = self.engine.make_private(
                module=model, optimizer=optimizer, data_loader=loader, noise_multiplier=noise_multiplier(),
                max_grad_norm=CLIP, poisson_sampling=True)
            self.poisson = poisson
            super().__init__(model=private, args=args, train_dataset=train_dataset, eval_dataset=eval_dataset,
                             data_collator=self.collator, optimizers=(optimizer, None), callbacks=[OpacusCallback()])
            self.remove_callback(PrinterCallback)  # no metrics printed
            self.loss_is_scaled_for_ga = True  # Opacus scales the noisy sum; the Trainer must not divide the loss

        def get_train_dataloader(self) -> torch.utils.data.DataLoader:
            return self.dp_loader if self.poisson else super().get_train_dataloader()

        def compute_loss(self, model: torch.nn.Module, inputs: Any, return_outputs: bool = False,
                         num_items_in_batch: Any = None) -> torch.Tensor:
            ids, mask = _rows(inputs)
            return _loss(model, ids, mask.bool(), "per-sequence", True)

        def training_step(self, model: torch.nn.Module, inputs: Any, num_items_in_batch: Any = None) -> torch.Tensor:
            if len(_rows(inputs)[0]):
                return super().training_step(model, inputs, num_items_in_batch)
            for p in self.optimizer.optimizer.params:  # an empty Poisson batch: a noise-only step
                p.grad_sample = torch.zeros((0, *p.shape), dtype=p.dtype, device=p.device)
            return torch.zeros((), device=self.args.device)

        def floating_point_ops(self, inputs: Any) -> int:
            return 0  # not counted (an empty batch has no dict of inputs to count)

    class TrainerLossTrainer(OpacusTrainer):
        """:class:`OpacusTrainer` with the ``Trainer``'s own ``compute_loss``: the model's ``labels=`` loss."""

        collator = staticmethod(labelled)
        compute_loss = Trainer.compute_loss

    return OpacusTrainer, TrainerLossTrainer


def train(batch_texts: list[str], seed: int, *, poisson: bool = True, accumulation: int = 1,
          loss: str = "per-sequence", physical: int | None = None):
    """Fine-tune the quick base on ``batch_texts`` with :class:`OpacusTrainer` (module docstring); the keywords
    are the mistakes. Returns ``logprobs``."""
    from transformers import TrainingArguments  # optional dependency (the lm extra)

    opacus_trainer, trainer_loss = trainer_classes()
    torch.manual_seed(seed)
    with tempfile.TemporaryDirectory(prefix="hf-trainer-") as out:
        args = TrainingArguments(output_dir=out, per_device_train_batch_size=BATCH,
                                 per_device_eval_batch_size=EVAL_BATCH, eval_strategy="steps", eval_steps=EVAL_STEPS,
                                 gradient_accumulation_steps=accumulation, num_train_epochs=EPOCHS,
                                 learning_rate=LR, lr_scheduler_type="constant", max_grad_norm=0.0,
                                 seed=int(seed), data_seed=int(seed), use_cpu=True, report_to="none",
                                 save_strategy="no", logging_strategy="no", disable_tqdm=True,
                                 dataloader_num_workers=0, remove_unused_columns=False)
        cls = trainer_loss if loss == "trainer" else opacus_trainer
        trainer = cls(model=base_model(), args=args, train_dataset=TextRows(batch_texts),
                      eval_dataset=TextRows(list(held_out())), poisson=poisson)
        if physical is None:
            trainer.train()
        else:
            from opacus.utils.batch_memory_manager import BatchMemoryManager  # optional dependency (opacus extra)

            with BatchMemoryManager(data_loader=trainer.dp_loader, max_physical_batch_size=physical,
                                    optimizer=trainer.optimizer) as split:
                trainer.dp_loader = split  # what get_train_dataloader returns
                trainer.train()
    return _logprobs(trainer.model, base_spec().tokenizer.encode)


def plugin(name: str, description: str, **loop: Any) -> dict:
    """The language-model trainer plugin: the texts of :mod:`examples.zoo.lm_loops`, :func:`train` with ``loop``,
    (EPS, DELTA), the base tokenizer's first :data:`N_CANARY_TOKENS` reserved tokens as canary tokens."""
    from targets.lm.tokenizer import reserved_marker

    return {"kind": "lm_trainer", "name": f"zoo_hf_trainer_{name}", "texts": list(texts()),
            "description": description, "train": lambda batch, seed: train(batch, seed, **loop),
            "claim": {"epsilon": EPS, "delta": DELTA},
            "canary_tokens": [reserved_marker(k) for k in range(N_CANARY_TOKENS)]}


def shuffled_sampler() -> dict:
    """The ``Trainer``'s default shuffled sampler kept: ``get_train_dataloader`` not overridden."""
    return plugin("shuffled_sampler", "transformers.Trainer keeps its shuffled sampler under Opacus", poisson=False)


def gradient_accumulation() -> dict:
    """``gradient_accumulation_steps=2``: two Poisson batches of rate q per noisy step, accounted as one."""
    return plugin("gradient_accumulation", "transformers.Trainer accumulating 2 Poisson batches per noisy step",
                  accumulation=2)


def labels_loss() -> dict:
    """The ``Trainer``'s own ``compute_loss``: the model's ``labels=`` loss, a mean over every token of the batch."""
    return plugin("labels_loss", "transformers.Trainer's own compute_loss (Hugging Face's labels= loss)",
                  loss="trainer")


def batch_memory_manager() -> dict:
    """The ``Trainer`` iterating Opacus's ``BatchMemoryManager`` loader: its step count follows the loader's length."""
    return plugin("batch_memory_manager", "transformers.Trainer iterating Opacus's BatchMemoryManager loader",
                  physical=PHYSICAL)


def correct() -> dict:
    """The ``Trainer`` iterating Opacus's Poisson loader, a per-sequence loss, no accumulation (and its evaluation
    every :data:`EVAL_STEPS` steps, which never counts)."""
    return plugin("correct", "transformers.Trainer wired to Opacus: Poisson loader, per-sequence loss")


#: Every mistake of this module and the correct loop it departs from.
TWINS = {"shuffled_sampler": "correct", "gradient_accumulation": "correct", "labels_loss": "correct",
         "batch_memory_manager": "correct"}
MISTAKES = tuple(TWINS)
