"""What Hugging Face's ``transformers.Trainer`` does that breaks DP, named in the accounting check's findings:
the ``Trainer``'s own shuffled sampler, its gradient accumulation and its token-averaged loss (docs/references.md,
"Language model training checks"; Microsoft's dp-transformers replaces all three).

The accounting check (:mod:`audit.plugins.accounting`) and the language-model checks
(:mod:`audit.plugins.lm_checks`) find what these do to the DP-SGD from the steps themselves: which records each
step held (sampling, rate) and whether one record's per-sample gradient depends on the others of its batch
(loss-coupling). They cannot say that the cause is the ``Trainer``, nor give the ``Trainer``'s fix. While the
probe's training runs inside :func:`watched_trainer`, every ``Trainer`` built is kept with the training loader
its loop asked for first (its ``get_train_dataloader``, wrapped on the instance: whichever class defines it).
The ``Trainer`` fetches batches before it trains on them (accelerate's loader reads one batch ahead, and
``get_batch_samples`` a whole accumulation window), so the record indices its loaders yield
(:func:`targets.audit_hooks.loader_indices`) are held back while ``Trainer.train`` runs and handed to the
recorder one batch per ``training_step``, in the order fetched: each noisy step is given the batches it
trained on, not those fetched ahead (any call of ``train`` inside the block: the probe, the other worlds). The
batches of the ``Trainer``'s evaluation (``evaluate``, ``predict``: its per-epoch or per-step evaluation inside
``train`` too) are not held back: they reach the recorder as they are yielded, which drops a batch the model ran on
without autograd, so an evaluation never counts as a step's records (issue 50: they were handed to the next
training steps).
:func:`trainer_findings` then, for a ``Trainer`` that trained:

* **sampling**: when the loader is not Opacus's Poisson ``DPDataLoader`` (the ``Trainer``'s default is a
  ``RandomSampler`` in fixed-size batches), a sampling or rate violation names it, with the fix: return the
  loader ``make_private`` returns from ``get_train_dataloader``. The language-model checks' replay swaps the
  loader ``make_private`` returns; a ``Trainer`` that iterates its own never feeds the replay's batches to the
  steps compared, so a loss-coupling finding read from them is void: it becomes "not checked", saying why.
* **gradient accumulation**: with ``gradient_accumulation_steps`` k > 1 each noisy step holds k micro-batches;
  a rate or sampling violation names that, with the fix (one Poisson batch per noisy step at the accounted
  rate, never the ``Trainer``'s accumulation).
* **``BatchMemoryManager`` under the ``Trainer``**: the ``Trainer`` takes the length of the loader Opacus's
  ``BatchMemoryManager`` yields (the expected number of physical batches, which moves with the dataset's size) as
  its number of training steps, and ends an epoch partway through a logical batch: a dataset-size dependence,
  sampling, rate or records violation names that, with the fix (``make_private``'s loader itself, one whole
  Poisson batch per noisy step, a smaller rate where a batch does not fit in memory; ``BatchMemoryManager`` only in
  a loop of one's own).
* **token-averaged loss**: a loss-coupling violation of a ``Trainer`` whose loss is the ``Trainer``'s own
  ``compute_loss`` (the model's ``labels=`` loss, a mean over every token of the batch, and under accumulation
  over every token of the window, ``num_items_in_batch``) names it, with the fix: override ``compute_loss`` with a
  per-sequence loss. An override that calls ``super().compute_loss`` runs it too: the ``Trainer``'s own is
  patched while the block runs, to see whether a training step called it.

A finding keeps its check and status; its message gains the cause, its fix is the ``Trainer``'s, and its
``details`` a ``trainer`` entry. Without transformers, or when no ``Trainer`` trained, nothing changes.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.util
import inspect
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from audit.stats.outcome import Finding
from targets.audit_hooks import UpdateRecorder

FIX_SAMPLER = ("return the data loader make_private returns (Poisson sampling at the accounted rate) from your "
               "Trainer subclass's get_train_dataloader: the Trainer's own loader shuffles the records into batches "
               "of a fixed size")
FIX_ACCUMULATION = ("set gradient_accumulation_steps=1 and let each noisy step hold one Poisson batch at the "
                    "accounted rate (where a batch does not fit in memory under the Trainer, a smaller rate with its "
                    "noise accounted again: Opacus's BatchMemoryManager splits batches only in a loop of your own), or "
                    "account the rate and steps the accumulated batches really have")
FIX_MEMORY_SPLIT = ("return the loader make_private returns from get_train_dataloader, one whole Poisson batch per "
                    "noisy step, and where a batch does not fit in memory lower the sampling rate and account its "
                    "noise again; Opacus's BatchMemoryManager needs a training loop of your own (the optimizer's "
                    "skipped steps mark its logical batches), which the Trainer's step count cannot follow")
FIX_TRAINER_LOSS = ("override compute_loss in your Trainer subclass with a per-sequence loss: nll = "
                    "cross_entropy(logits, targets, reduction='none'), loss_i = (nll * mask).sum(1) / mask.sum(1), "
                    "then loss_i.sum() with make_private(..., loss_reduction='sum') (loss_i.mean() with Opacus's "
                    "default divides by int(N q), which moves with the dataset's size at some sizes), never the "
                    "model's labels= loss (a mean over every token of the batch, and of "
                    "the accumulation window with num_items_in_batch)")


@dataclass
class TrainerWatch:
    """The ``Trainer`` objects built while the block ran, each with the training loader its loop asked for."""

    trainers: list[Any] = field(default_factory=list)
    loaders: dict[int, Any] = field(default_factory=dict)
    training: int = 0
    evaluating: int = 0
    own_loss: set[int] = field(default_factory=set)  # Trainers whose training steps ran Trainer.compute_loss
    fetched: list[tuple[Any, Any, int, bool]] = field(default_factory=list)


def _wrap_init(watch: TrainerWatch, original: Callable) -> Callable:
    """``Trainer.__init__`` keeping the ``Trainer`` and wrapping its own ``get_train_dataloader``, ``train`` and
    ``training_step``, and its ``evaluate`` and ``predict`` (on the instance: whichever class defines them, even one
    made while the block runs)."""
    @functools.wraps(original)
    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        watch.trainers.append(self)
        self.get_train_dataloader = _kept_loader(watch, self, self.get_train_dataloader)
        self.train = _counted_training(watch, self.train)
        self.training_step = _released_step(watch, self.training_step)
        self.evaluate = _evaluation(watch, self.evaluate)
        self.predict = _evaluation(watch, self.predict)

    return init


def _kept_loader(watch: TrainerWatch, trainer: Any, method: Callable) -> Callable:
    @functools.wraps(method)
    def get_train_dataloader(*args: Any, **kwargs: Any) -> Any:
        loader = method(*args, **kwargs)
        watch.loaders.setdefault(id(trainer), loader)  # the loader the training loop asked for first
        return loader

    return get_train_dataloader


def _counted_training(watch: TrainerWatch, method: Callable) -> Callable:
    @functools.wraps(method)
    def train(*args: Any, **kwargs: Any) -> Any:
        watch.training += 1
        try:
            return method(*args, **kwargs)
        finally:
            watch.training -= 1
            if not watch.training:
                _release(watch, len(watch.fetched))  # fetched and never trained on: noted last, as read

    return train


def _evaluation(watch: TrainerWatch, method: Callable) -> Callable:
    """``evaluate`` or ``predict``: the batches its loaders yield are never held back for the training steps; they go
    to the recorder at once, which drops a batch the model ran on without autograd (the ``Trainer``'s
    ``prediction_step`` runs under ``torch.no_grad``) and counts one only if a gradient flows back from it."""
    @functools.wraps(method)
    def evaluation(*args: Any, **kwargs: Any) -> Any:
        watch.evaluating += 1
        try:
            return method(*args, **kwargs)
        finally:
            watch.evaluating -= 1

    return evaluation


def _noted_loss(watch: TrainerWatch, original: Callable) -> Callable:
    """``Trainer.compute_loss`` noting the ``Trainer`` whose training step ran it (directly or by ``super()``)."""
    @functools.wraps(original)
    def compute_loss(self: Any, *args: Any, **kwargs: Any) -> Any:
        if watch.training and not watch.evaluating:
            watch.own_loss.add(id(self))
        return original(self, *args, **kwargs)

    return compute_loss


def _released_step(watch: TrainerWatch, method: Callable) -> Callable:
    @functools.wraps(method)
    def training_step(*args: Any, **kwargs: Any) -> Any:
        _release(watch, 1)
        return method(*args, **kwargs)

    return training_step


def _release(watch: TrainerWatch, count: int) -> None:
    """Hand the first ``count`` batches fetched to their recorders."""
    released, watch.fetched = watch.fetched[:count], watch.fetched[count:]
    for recorder, indices, size, grad_enabled in released:
        _NOTE(recorder, indices, size, grad_enabled)


_NOTE = UpdateRecorder.note_loader_indices


def _wrap_note(watch: TrainerWatch) -> Callable:
    @functools.wraps(_NOTE)
    def note_loader_indices(self: Any, indices: Any, dataset_size: int, grad_enabled: bool = True) -> None:
        if watch.training and not watch.evaluating:
            watch.fetched.append((self, indices, dataset_size, grad_enabled))
        else:
            _NOTE(self, indices, dataset_size, grad_enabled)

    return note_loader_indices


@contextmanager
def watched_trainer() -> Iterator[TrainerWatch]:
    """Keep every ``transformers.Trainer`` built and the loader its ``get_train_dataloader`` returns, and hand
    the records its batches hold to the recorder as it trains on them (module docstring), while the block runs
    (the patches are undone on exit). transformers is never imported for this: a ``Trainer`` already imported is
    patched at once, one imported while the block runs as its module ``transformers.trainer`` is executed
    (:class:`_OnImport`), so a loop without transformers starts without its import (about 2 s of CPU, with PEFT);
    without transformers, an empty watch."""
    watch, patched = TrainerWatch(), []

    def patch(trainer_module: Any) -> None:
        trainer = trainer_module.Trainer
        for name, wrap in (("__init__", _wrap_init), ("compute_loss", _noted_loss)):
            original = trainer.__dict__[name]
            patched.append((trainer, name, original))
            setattr(trainer, name, wrap(watch, original))

    hook = _OnImport(TRAINER_MODULE, patch)
    if TRAINER_MODULE in sys.modules:
        patch(sys.modules[TRAINER_MODULE])
    else:
        sys.meta_path.insert(0, hook)
    try:
        UpdateRecorder.note_loader_indices = _wrap_note(watch)
        yield watch
    finally:
        if hook in sys.meta_path:
            sys.meta_path.remove(hook)
        UpdateRecorder.note_loader_indices = _NOTE
        for trainer, name, original in patched:
            setattr(trainer, name, original)


#: The module that defines ``transformers.Trainer`` (``from transformers import Trainer`` imports it lazily).
TRAINER_MODULE = "transformers.trainer"


class _OnImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Run ``then(module)`` once the module ``name`` has been executed by its own loader, the first time it is
    imported (a post-import hook: the import system's finder protocol, PEP 451)."""

    def __init__(self, name: str, then: Callable[[Any], None]) -> None:
        self.name, self.then, self.loader = name, then, None

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != self.name or self.loader is not None:
            return None
        sys.meta_path.remove(self)  # found by the other finders, once
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        self.loader, spec.loader = spec.loader, self
        return spec

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        module.__spec__.loader = module.__loader__ = self.loader
        self.loader.exec_module(module)
        self.then(module)


def _sampler_of(loader: Any) -> tuple[bool, bool, str]:
    """Whether ``loader`` is Opacus's Poisson ``DPDataLoader``, whether it is the loader Opacus's
    ``BatchMemoryManager`` yields (Poisson batches split into physical ones), and how it samples, in words."""
    inner = getattr(loader, "base_dataloader", loader)  # accelerate's DataLoaderShard
    batches = getattr(inner, "batch_sampler", None)
    if importlib.util.find_spec("opacus") is not None:
        # optional dependency (the opacus extra): the loaders make_private and BatchMemoryManager return
        from opacus.data_loader import DPDataLoader
        from opacus.utils.batch_memory_manager import BatchSplittingSampler

        if isinstance(loader, DPDataLoader):
            return True, False, f"Opacus's Poisson DPDataLoader at rate {float(loader.sample_rate):.4g}"
        if isinstance(batches, BatchSplittingSampler):
            rate = getattr(batches.sampler, "sample_rate", None)
            return False, True, ("Opacus's BatchMemoryManager loader (Poisson batches" + (
                f" at rate {float(rate):.4g}" if rate is not None else "") +
                f" split into physical batches of at most {batches.max_batch_size})")
    batches = getattr(batches, "batch_sampler", batches)  # accelerate's BatchSamplerShard
    sampler = getattr(batches, "sampler", getattr(inner, "sampler", None))
    size = getattr(batches, "batch_size", None)
    over = f"accelerate's {type(loader).__name__} over " if inner is not loader else ""
    return False, False, f"{over}a {type(sampler).__name__}" + (f" in batches of {size}" if size else "")


@dataclass(frozen=True)
class TrainerFacts:
    """What the ``Trainer`` that trained shows: its loader samples by Poisson, or is ``BatchMemoryManager``'s
    (``memory_split``), how it samples in words, its accumulation, and whether its ``compute_loss`` is the
    ``Trainer``'s own."""

    poisson: bool
    memory_split: bool
    sampler: str
    accumulation: int
    default_loss: bool

    def to_dict(self) -> Finding:
        return {"poisson_loader": self.poisson, "batch_memory_manager": self.memory_split, "sampler": self.sampler,
                "gradient_accumulation_steps": self.accumulation, "default_compute_loss": self.default_loss}


def trainer_facts(watch: TrainerWatch | None) -> TrainerFacts | None:
    """The facts of the first ``Trainer`` whose loop asked for a training loader; None when none did."""
    if watch is None:
        return None
    trained = [t for t in watch.trainers if watch.loaders.get(id(t)) is not None]
    if not trained:
        return None
    # optional dependency (the lm extra)
    from transformers import Trainer

    first = trained[0]
    poisson, memory_split, sampler = _sampler_of(watch.loaders[id(first)])
    # unwrapped: a class made while a watch ran may hold its wrapper (``compute_loss = Trainer.compute_loss``)
    own = inspect.unwrap(type(first).compute_loss) is inspect.unwrap(Trainer.compute_loss)
    return TrainerFacts(poisson, memory_split, sampler,
                        int(getattr(first.args, "gradient_accumulation_steps", 1) or 1),
                        own or id(first) in watch.own_loss)


def _named(f: Finding, cause: str, fix: str, facts: TrainerFacts) -> Finding:
    return replace(f, message=f"{f.message} {cause}", fix=fix, details={**(f.details or {}),
                                                                        "trainer": facts.to_dict()})


def _void_replay(f: Finding, facts: TrainerFacts) -> Finding:
    return Finding.checked("loss-coupling", False, True, "Could not read: the transformers.Trainer iterates a "
                           f"training loader ({facts.sampler}) other than the one make_private returns, so the "
                           "replay's chosen batches never reached the steps compared.", "",
                           {**(f.details or {}), "trainer": facts.to_dict()}, read=False)


def _named_finding(f: Finding, facts: TrainerFacts) -> Finding:
    """``f`` with the ``Trainer``'s cause and fix where the ``Trainer`` explains it (module docstring)."""
    check = f.check
    if check == "loss-coupling" and not facts.poisson and (f.problem or f.read is False):
        return _void_replay(f, facts)
    if not f.violation:
        return f
    if facts.memory_split and check in ("world-dependence", "sampling", "rate", "records"):
        return _named(f, f"The transformers.Trainer iterates {facts.sampler}: it counts the loader's length (the "
                         "expected number of physical batches, which moves with the dataset's size) as its "
                         "training steps and ends an epoch partway through a logical batch.", FIX_MEMORY_SPLIT, facts)
    if check in ("sampling", "rate") and not facts.poisson:
        return _named(f, f"The transformers.Trainer iterates its own training loader ({facts.sampler}), not the "
                         "Poisson loader make_private returns.", FIX_SAMPLER, facts)
    if check in ("sampling", "rate") and facts.accumulation > 1:
        return _named(f, f"The transformers.Trainer accumulates {facts.accumulation} batches of {facts.sampler} "
                         f"per noisy step (gradient_accumulation_steps={facts.accumulation}), each sampled at the "
                         "rate accounted for the whole step.", FIX_ACCUMULATION, facts)
    if check == "loss-coupling" and facts.default_loss:
        return _named(f, "The transformers.Trainer's own compute_loss returns the model's labels= loss.",
                      FIX_TRAINER_LOSS, facts)
    return f


def trainer_findings(findings: Sequence[Finding], watch: TrainerWatch | None) -> list[Finding]:
    """``findings`` with the ``Trainer``'s causes named (module docstring); unchanged when no ``Trainer``
    trained while ``watch`` ran."""
    facts = trainer_facts(watch)
    return list(findings) if facts is None else [_named_finding(f, facts) for f in findings]
