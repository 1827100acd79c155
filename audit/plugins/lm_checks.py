"""The checks of a language-model trainer's DP fine-tuning that the noisy sums cannot show (issue 35,
item 3): four pitfalls of Opacus on Hugging Face / PEFT models, each read from the code's own Opacus
objects in two calls of its ``train`` (sources: docs/references.md, "Language model training
checks"). Each is a finding with its fix; those that void the accounting are violations.
The *watched* call is the accounting check's probe (:func:`watched_training` around it), so the checks
add only the replay's three steps and the canary tokens' ``logprobs`` calls to the audit.

While a call runs, ``PrivacyEngine.make_private`` is wrapped: the module, optimizer and data loader it
returns are kept, and every ``DPOptimizer.step`` (and a subclass's own ``step``) is wrapped too.

* **position-ids** (violation), both calls: before each step, every trained parameter's per-sample
  gradient (``p.grad_sample``) must hold one row per example of the batch. Position ids of shape
  ``(1, L)`` broadcast across the batch — Hugging Face's default when ``position_ids`` is not passed —
  reach the position embedding with a batch of one, so Opacus computes one gradient for the whole batch
  there (Opacus #841). Opacus 1.6 then fails as soon as a batch holds two examples ("stack expects
  each tensor to be equal size"); code that ran past it would clip the batch's summed gradient as one
  example's, so no example's gradient would be clipped to C alone and the accountant's sensitivity
  would not hold. The call is stopped at the first step where it is seen.
* **loss-coupling** (violation), the *replay* call: the loop's loader is replaced by one yielding
  the first record alone, then with the next :data:`PARTNERS` records, then with the :data:`PARTNERS`
  after those; dropout is switched off, every step is read and skipped (no update, no noise) and the
  weights are put back before every forward pass, so the three steps see the same weights. The first
  record's per-sample gradient must be the same in the three batches (relative difference at most
  :data:`COUPLING_TOL`). Hugging Face's ``labels=`` loss
  averages over every token of the batch (transformers #25303), so Opacus's per-sample gradient of an
  example is its token-sum gradient times ``B / N_tokens``: it scales with the other examples' lengths.
  Adding or removing one record then changes every other example's clipped gradient, and the noisy
  sum moves by more than C [Abadi et al. 2016, Alg. 1 clips the gradient of each example's own loss].
* **frozen-weights** (a note) and **non-dp-updates** (violation), the *watched* call (a whole
  training): the parameters that require grad when ``make_private`` runs are copied, and compared at
  every DP step and at the end. A trainable tensor that never moved is trained by nothing — PEFT LoRA
  weights that silently stay at their initial values under Opacus (Opacus #820), or an optimizer built
  before ``get_peft_model`` that holds none of the adapters: privacy is intact (no data reaches them),
  the model is not trained and gradient canaries in those tensors see nothing. A trainable tensor
  that moved but is not in the DP optimizer is trained without clipping or noise: a violation.
* **canary-ids** (a note), the watched call: the token ids the model's input embedding receives while
  training, against those of each of the plugin's canary tokens, read through the trained model's
  ``logprobs`` on the token's text once and twice over (the ids whose count grows are the token's own,
  the ids a tokenizer adds to every text do not grow). A canary token encoded to ids that the training
  texts also produce is not a new token (Panda et al. 2025): its canaries lose their power, while the
  bound they give stays sound (the records are fixed, the canaries' coins independent).

A loop that is not Opacus (no ``make_private`` in the call) is not checked here: one note says so.
:func:`lm_checks` returns the findings and whether the training could run as written.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from audit.errors import TargetCodeError
from audit.plugins.gate_checks import GateCheck, register
from audit.plugins.training import train_once
from audit.stats.outcome import Finding
from targets.catalogue import is_language_model
from targets.opacus_hooks import classes_defining, require_opacus
from targets.plugins.loading import TrainerPlugin
from targets.threads import thread_limit

#: Relative change of the first record's per-sample gradient above which the loss couples the batch's
#: examples: float32 gradients of one example computed in batches of other shapes agree to about 1e-6;
#: a coupled loss scales it by ``B n_a / N_tokens``, off by far more unless the lengths happen to agree.
COUPLING_TOL = 1e-3
#: Records beside the first one in each batch of the replay.
PARTNERS = 7
#: Names of parameters listed in a message.
SHOWN = 4
#: Canary tokens whose ids are read (at evenly spaced places of the plugin's list): each costs two calls of
#: ``logprobs``, and a tokenizer that does not know the canary tokens splits them all.
MAX_CANARY_TOKENS = 8
FIX_POSITIONS = ("pass position_ids of shape (B, L), one row per example, to every forward: "
                 "torch.arange(L).expand(B, -1), or attention_mask.cumsum(1) - 1 with left padding")
FIX_LOSS = ("compute each sequence's own loss and reduce over the batch: nll = cross_entropy(logits, targets, "
            "reduction='none'), loss_i = (nll * mask).sum(1) / mask.sum(1), then loss_i.mean() with Opacus's "
            "loss_reduction='mean' where int(N q) does not move with one record (else .sum() with 'sum' and the "
            "learning rate divided by a batch size fixed in advance: Opacus #571); never labels= (a mean over every "
            "token of the batch)")
FIX_FROZEN = ("build the optimizer after get_peft_model from the parameters that require grad, "
              "torch.optim.AdamW([p for p in model.parameters() if p.requires_grad]), and pass that model and "
              "optimizer to make_private")
FIX_OUTSIDE = ("give every trained parameter to the one optimizer make_private wraps, or freeze the others "
               "(requires_grad_(False))")
FIX_CANARY = ("use canary tokens that encode to ids no training text produces: add them to the tokenizer as new "
              "tokens (tokenizer.add_tokens and model.resize_token_embeddings) or reserve ids outside the data's")


class _Stop(BaseException):
    """Raised inside the user's loop to end a call once the check has what it needs (a BaseException, so
    the loop's own ``except Exception`` cannot swallow it)."""


@dataclass
class Watch:
    """What one call showed: the Opacus objects, the per-sample gradient mismatch, the parameters."""

    replay: bool = False
    module: Any = None
    optimizer: Any = None
    mismatch: dict[str, int] = field(default_factory=dict)
    sampled: int = 0
    batch: int = 0
    before: dict[str, torch.Tensor] = field(default_factory=dict)
    in_dp: set[str] = field(default_factory=set)
    outside_moved: set[str] = field(default_factory=set)
    rows: list[torch.Tensor] = field(default_factory=list)
    fetched: list[int] = field(default_factory=list)
    held: list[list[int]] = field(default_factory=list)
    ids: Counter = field(default_factory=Counter)
    hook: Any = None
    restore: Any = None
    dropout: list[tuple[Any, float]] = field(default_factory=list)

    def names(self) -> dict[int, str]:
        return {id(p): n.removeprefix("_module.") for n, p in self.module.named_parameters()}


def _flat_samples(p: torch.Tensor) -> torch.Tensor | None:
    """``p.grad_sample`` (a tensor, or a list after several backward passes) as one tensor, or None."""
    gs = getattr(p, "grad_sample", None)
    if isinstance(gs, list):
        gs = torch.cat(gs) if gs else None
    return gs


def _read_step(watch: Watch, optimizer: Any) -> None:
    """Before a DP step: per-sample gradient rows per parameter (position-ids), moves outside DP-SGD."""
    if optimizer is not watch.optimizer:  # another training in the same block (the probe's repeat)
        return
    if not optimizer.params and watch.before:  # nothing to clip or noise: no step trains anything
        raise _Stop
    names = watch.names()
    sizes = {names.get(id(p), "?"): gs.shape[0] for p in optimizer.params if (gs := _flat_samples(p)) is not None}
    watch.sampled += bool(sizes)
    if sizes and len(set(sizes.values())) > 1:
        watch.batch = max(sizes.values())
        watch.mismatch = {n: s for n, s in sizes.items() if s != watch.batch}
        raise _Stop
    for name, p in watch.module.named_parameters():
        short = name.removeprefix("_module.")
        if short in watch.before and short not in watch.in_dp and not torch.equal(p.detach(), watch.before[short]):
            watch.outside_moved.add(short)
    if watch.replay:
        _replay_step(watch, optimizer)


def _replay_step(watch: Watch, optimizer: Any) -> None:
    """A step of the replay: the records its per-sample gradients hold (fetched from the replay's dataset since
    the last step); the first record's row is kept when that record leads the batch (alone, then with partners),
    so that the rows compared are those of the batches the replay chose, whatever wraps its loader (Opacus's
    ``BatchMemoryManager`` splits them into physical batches)."""
    held, watch.fetched = watch.fetched, []
    if held and held[0] == 0 and (len(held) == 1) == (not watch.rows):
        rows = [gs.reshape(gs.shape[0], -1)[0] for p in optimizer.params if (gs := _flat_samples(p)) is not None]
        watch.rows.append(torch.cat(rows).double() if rows else torch.zeros(0, dtype=torch.float64))
        watch.held.append(held)
    optimizer.zero_grad(True)
    if len(watch.rows) == 3:
        raise _Stop


def _input_embedding(module: torch.nn.Module) -> torch.nn.Module | None:
    """The token embedding of ``module`` (Hugging Face's ``get_input_embeddings``, else the largest one)."""
    inner = getattr(module, "_module", module)
    getter = getattr(inner, "get_input_embeddings", None)
    found = getter() if callable(getter) else None
    if isinstance(found, torch.nn.Embedding):
        return found
    embeddings = [m for m in inner.modules() if isinstance(m, torch.nn.Embedding)]
    return max(embeddings, key=lambda m: m.num_embeddings, default=None)


class _Fetched(torch.utils.data.Dataset):
    """The loop's dataset, noting in ``watch.fetched`` every index read (which records a step's batch holds)."""

    def __init__(self, dataset: Any, watch: Watch) -> None:
        self.dataset, self.watch = dataset, watch

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> Any:
        self.watch.fetched.append(int(index))
        return self.dataset[index]


def _replay_loader(loader: Any, watch: Watch) -> Any:
    """The replay's loader over the loop's dataset: record 0 alone, with records 1..m, with m+1..2m (the records
    each batch holds noted in ``watch``)."""
    n = len(loader.dataset)
    m = min(PARTNERS, (n - 1) // 2)
    batches = [[0], list(range(m + 1)), [0, *range(m + 1, 2 * m + 1)]]
    return torch.utils.data.DataLoader(_Fetched(loader.dataset, watch), batch_sampler=batches,
                                       collate_fn=loader.collate_fn)


def _attach(watch: Watch, out: tuple) -> tuple:
    """Keep what ``make_private`` returned; the replay also gets its own loader and no dropout."""
    module, optimizer = out[0], out[1]
    if watch.module is not None:
        return out
    watch.module, watch.optimizer = module, optimizer
    watch.in_dp = {watch.names()[id(p)] for p in optimizer.params}
    watch.before = {n.removeprefix("_module."): p.detach().clone() for n, p in module.named_parameters()
                    if p.requires_grad}
    embedding = _input_embedding(module)
    if embedding is not None:
        def count(_module: Any, args: tuple) -> None:
            if args and torch.is_tensor(args[0]):
                values, counts = torch.unique(args[0].detach().cpu(), return_counts=True)
                watch.ids.update(dict(zip(values.tolist(), counts.tolist(), strict=True)))
        watch.hook = embedding.register_forward_pre_hook(count)
    if not watch.replay:
        return out
    start = [(p, p.detach().clone()) for p in module.parameters()]

    @torch.no_grad()
    def restore(_module: Any, _args: tuple) -> None:  # every replayed step sees the same weights
        for p, value in start:
            p.copy_(value)

    watch.restore = module.register_forward_pre_hook(restore)
    for sub in module.modules():  # the rate each had is put back when the replay ends (_replay_call)
        if isinstance(sub, torch.nn.modules.dropout._DropoutNd):
            watch.dropout.append((sub, sub.p))
            sub.p = 0.0
    return (*out[:-1], _replay_loader(out[-1], watch))


@contextmanager
def _watching(watch: Watch) -> Iterator[Watch]:
    """Wrap ``make_private`` and every ``DPOptimizer`` ``step`` while the block runs (restored on exit)."""
    require_opacus()
    # optional dependency (the opacus extra)
    from opacus import PrivacyEngine
    from opacus.optimizers import DPOptimizer

    saved = [(cls, "step", cls.__dict__["step"]) for cls in classes_defining(DPOptimizer, "step")]
    saved.append((PrivacyEngine, "make_private", PrivacyEngine.__dict__["make_private"]))

    def wrap(name: str, original: Callable) -> Callable:
        @functools.wraps(original)
        def wrapped(self: Any, *args: Any, **kwargs: Any) -> Any:
            if name == "make_private":
                return _attach(watch, original(self, *args, **kwargs))
            _read_step(watch, self)
            return None if watch.replay else original(self, *args, **kwargs)
        return wrapped

    try:
        for cls, name, original in saved:
            setattr(cls, name, wrap(name, original))
        yield watch
    finally:
        for cls, name, original in saved:
            setattr(cls, name, original)


@contextmanager
def watched_training() -> Iterator[Watch]:
    """The *watched* call: the training inside the block (one call of ``train``; the first ``make_private``
    is the one watched) under :func:`_watching`; a stop of the checks ends the block quietly. The model's
    embedding stays watched until :func:`lm_checks` has read the canary tokens' ids."""
    watch = Watch()
    try:
        with _watching(watch):
            yield watch
    except _Stop:
        pass


def _replay_call(plugin: TrainerPlugin, X: np.ndarray, y: np.ndarray, seed: int) -> Watch:
    """The *replay* call of ``train`` (module docstring), its hooks removed."""
    replay = Watch(replay=True)
    try:
        with _watching(replay):
            train_once(plugin, X, y, seed)
    except _Stop:
        pass
    finally:
        for handle in (replay.hook, replay.restore):
            if handle is not None:
                handle.remove()
        for sub, rate in replay.dropout:  # a model the user's code keeps across calls trains with its dropout
            sub.p = rate
    return replay


@dataclass(frozen=True)
class LMChecks:
    """The findings of :func:`lm_checks`; ``runs``: whether the training runs as written under Opacus
    (False: a per-sample gradient mismatch stops it, or its DP optimizer holds no parameter), so that the
    accounting check, which trains it whole, cannot."""

    findings: list[Finding]
    runs: bool


def _shown(names: Sequence[str]) -> str:
    names = sorted(names)
    return ", ".join(names[:SHOWN]) + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")


def _position_finding(watch: Watch) -> Finding:
    if not watch.mismatch:
        return Finding.checked("position-ids", False, True, "Every trained parameter's per-sample gradients hold one "
                       f"row per example of the batch ({watch.sampled} steps)." if watch.sampled else "Could not "
                       "read: no step held per-sample gradients (ghost clipping keeps only their norms).",
                       read=bool(watch.sampled))
    rows = sorted(set(watch.mismatch.values()))
    text = (f"The per-sample gradients of {_shown(watch.mismatch)} hold {'/'.join(map(str, rows))} row(s) where "
            f"the batch holds {watch.batch} examples: an input broadcast across the batch, as position ids of shape "
            "(1, L) (Hugging Face's default when position_ids is not passed), gives that embedding one gradient for "
            "the whole batch: Opacus fails with 'stack expects each tensor to be equal size', and code that ran "
            "past it would clip the batch's summed gradient as one example's, so the accountant's per-example "
            "sensitivity C would not hold.")
    return Finding.checked("position-ids", True, True, text, FIX_POSITIONS,
                           {"rows": watch.mismatch, "batch": watch.batch})


def _coupling_finding(replay: Watch) -> Finding:
    if len(replay.rows) < 3:
        return Finding.checked("loss-coupling", False, True, "Could not read: the replay's batches (the first record "
                       f"alone, then with other records) reached {len(replay.rows)} of the 3 steps compared: the loop "
                       "does not feed the batches of the data loader make_private returns to its steps (it "
                       "iterates another loader, or splits them into batches of one).", read=False)
    alone = replay.rows[0]
    if not alone.numel():
        return Finding.checked("loss-coupling", False, True, "Could not read: the replayed steps held no per-sample "
                       "gradients (ghost clipping keeps only their norms).", read=False)
    scale = max(float(alone.norm()), float(np.finfo(float).tiny))
    changes = [float((row - alone).norm()) / scale for row in replay.rows[1:]]
    details = {"relative_change": changes, "tolerance": COUPLING_TOL, "partners": PARTNERS,
               "batches_compared": replay.held}
    if max(changes) <= COUPLING_TOL:
        return Finding.checked("loss-coupling", False, True, f"The first record's per-sample gradient is the same "
                       f"alone and in two batches of other records (relative change at most {max(changes):.2g}): the "
                       "loss is per example.", "", details)
    return Finding.checked("loss-coupling", True, True, f"The first record's per-sample gradient changes by "
                   f"{max(changes):.3g} (relative) between a batch of its own and a batch with other records: the loss "
                   "couples the examples of a batch (Hugging Face's labels= loss averages over every token of the "
                   "batch, so an example's gradient scales with the others' lengths). Adding or removing one record "
                   "changes every other example's clipped gradient: the noisy sum moves by more than the clip norm "
                   "C the accountant assumes.", FIX_LOSS, details)


def _weight_findings(watch: Watch) -> list[Finding]:
    now = {n.removeprefix("_module."): p.detach() for n, p in watch.module.named_parameters()}
    still = [n for n, p in watch.before.items() if n in now and torch.equal(now[n], p)]
    outside = sorted(watch.outside_moved | {n for n in watch.before if n not in watch.in_dp and n not in still})
    missing = [n for n in still if n not in watch.in_dp]
    details = {"trainable": len(watch.before), "did_not_move": sorted(still), "in_dp_optimizer": len(watch.in_dp),
               "moved_outside_dp": outside}
    frozen = (Finding.checked("frozen-weights", True, False, f"{len(still)} of the {len(watch.before)} tensors that "
                      f"require grad did not move during training ({_shown(still)}; {len(missing)} of them are not in "
                      f"the optimizer make_private received, which holds {len(watch.in_dp)} tensors): they keep their "
                      "initial values (Opacus #820, LoRA weights that do not update; with none in the DP optimizer, "
                      "Opacus stops at the second step, 'Poisson sampling is not compatible with grad accumulation', "
                      "unless the loop clears the module's gradients itself). Privacy is intact, but the model is not "
                      "trained and gradient canaries in those tensors see nothing.", FIX_FROZEN, details)
              if still else Finding.checked("frozen-weights", False, False, f"Every one of the {len(watch.before)} "
                                    "tensors that require grad moved during training.", "", details))
    outside_found = (Finding.checked("non-dp-updates", True, True, f"{_shown(outside)} moved during training but "
                             f"{'is' if len(outside) == 1 else 'are'} not in the DP optimizer: trained without "
                             "clipping or noise.", FIX_OUTSIDE, details) if outside else
                     Finding.checked("non-dp-updates", False, True, "Every tensor that moved is in the DP optimizer."))
    return [outside_found, frozen]


def _canary_ids(plugin: TrainerPlugin, logprobs: Callable, token: str, watch: Watch) -> set[int] | None:
    """The ids of canary token ``token``: those counted more on its text twice over than once; None when the
    trained model's input embedding saw no id while ``logprobs`` ran (it scores with another model)."""
    counts = []
    for text in (token, token + token):
        watch.ids = Counter()
        try:
            with thread_limit(plugin.threads), torch.no_grad():
                logprobs([text])
        except Exception as exc:
            raise TargetCodeError(f"logprobs of plugin {plugin.spec} raised {type(exc).__name__}: {exc}") from exc
        if not watch.ids:
            return None
        counts.append(watch.ids)
    return {i for i, c in counts[1].items() if c > counts[0].get(i, 0)}


def _canary_finding(plugin: TrainerPlugin, logprobs: Callable | None, watch: Watch) -> Finding:
    tokens = plugin.lm.canary_tokens if is_language_model(plugin) else ()
    if not tokens or logprobs is None or watch.hook is None:
        why = ("the plugin names no canary tokens" if not tokens else "the model's input embedding was not found"
               if watch.hook is None else "the training did not finish")
        return Finding.checked("canary-ids", False, False, f"Not checked: {why}.")
    seen, shared = watch.ids, {}
    chosen = [tokens[int(i)] for i in np.unique(np.linspace(0, len(tokens) - 1, MAX_CANARY_TOKENS).round())]
    for token in chosen:
        ids = _canary_ids(plugin, logprobs, token, watch)
        if ids is None:
            return Finding.checked("canary-ids", False, False, "Not checked: the input embedding of the model trained "
                           "saw no token while logprobs scored a canary token (logprobs scores with another model).")
        overlap = sorted(i for i in ids if seen.get(i, 0) > 0)
        if overlap:
            shared[token] = overlap
    details = {"canary_tokens": len(tokens), "checked": len(chosen), "in_data": shared}
    checked = f"{len(chosen)} canary tokens checked (of {len(tokens)}, evenly spaced)"
    if not shared:
        return Finding.checked("canary-ids", False, False, f"None of the {checked} encodes to an id the training texts "
                       "produce.", "", details)
    first, ids = next(iter(shared.items()))
    text = (f"{len(shared)} of the {checked} encode to ids the training texts also produce (e.g. {first!r}: ids "
            f"{ids[:SHOWN]}, seen {seen[ids[0]]} times in training): they are not new tokens, so their canaries lose "
            "their power (Panda et al. 2025); the bound they give stays sound.")
    return Finding.checked("canary-ids", True, False, text, FIX_CANARY, details)


def lm_checks(plugin: TrainerPlugin, X: np.ndarray, y: np.ndarray, seed: int, watch: Watch,
              trained: Callable | None) -> LMChecks:
    """The checks of the module docstring on the plugin's data ``(X, y)``: ``watch`` and ``trained`` (its
    ``logprobs``, None when stopped) from a call of ``train`` inside :func:`watched_training` (the accounting
    check's probe), then, when it ran, the replay; the findings in the order position-ids, loss-coupling,
    non-dp-updates, frozen-weights, canary-ids (the violations rank first: :data:`CHECKS`)."""
    try:
        if watch.module is None:
            return LMChecks([Finding.checked("position-ids", False, True, "Not checked: the loop made no Opacus "
                                     "PrivacyEngine (the language-model checks read Opacus's objects).")], True)
        if watch.mismatch:
            return LMChecks([_position_finding(watch)], False)
        findings = _weight_findings(watch) + [_canary_finding(plugin, trained, watch)]
    finally:
        if watch.hook is not None:
            watch.hook.remove()
    if not watch.in_dp:  # stopped at its first step: the DP optimizer holds no parameter
        return LMChecks(findings, False)
    replay = _replay_call(plugin, X, y, seed)
    first = _position_finding(replay if replay.mismatch else watch)
    return LMChecks([first, _coupling_finding(replay), *findings], not replay.mismatch)


#: The language-model checks in the gate's registry (:mod:`audit.plugins.gate_checks`): they run on the watched
#: training (:func:`lm_checks`), and their violations decide before the accounting check's: what voids
#: per-example clipping before what the noisy sums show. The notes (frozen-weights, canary-ids) decide nothing.
CHECKS = (GateCheck("position-ids", 0), GateCheck("loss-coupling", 10), GateCheck("non-dp-updates", 20))
for _check in CHECKS:
    register(_check)
