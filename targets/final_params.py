"""The DP iterates of a training and the model it returns, recorded cheaply (issue 39, item 3).

What a DP-SGD guarantee covers is the sequence of iterates ``theta_0, ..., theta_T`` (the parameters
before the first noisy step and after each one) and anything computed from them alone: the last
iterate, an average or an exponential moving average of them (De et al. 2022), any linear combination
``sum_t w_t theta_t``. A model changed by anything else after (or between) the noisy steps — a
non-private "polish" epoch — is not covered. :mod:`audit.plugins.final_model` decides from what this
module records; here only the recording:

* **The iterates** (:class:`IterateSketch`): when Opacus's ``make_private`` returns (the audit's
  instrumentation, :mod:`targets.opacus_hooks`, calls :meth:`IterateSketch.attach`), ``theta_0`` is read
  from the DP optimizer's parameters, and a step post-hook on the optimizer Opacus wraps
  (``original_optimizer``, whose ``step`` the DP optimizer calls only on a real, noisy step) reads ``theta_t``
  after each update. A step of that optimizer with no noisy step since the last iterate (the loop calling
  ``original_optimizer.step()`` itself on a raw gradient: no clipping, no noise) is not an iterate: it is counted
  (:attr:`IterateSketch.raw_steps`) and the model it moved is outside the span of the iterates. Keeping the
  T + 1 iterates would cost ``(T + 1) d`` floats; the sketch keeps ``s_t = P theta_t``
  for one Gaussian matrix ``P`` of ``k = T + 1 + MARGIN`` rows (``T`` the steps the probe counted), plus
  the last iterate itself: ``k d + d + k (T + 1)`` floats. For ``k >= d`` no sketch is needed and the
  iterates are kept as they are (``P`` the identity).

  Why the sketch is exact: for a fixed subspace ``V`` of dimension ``r <= k`` (the span of the iterates and
  the returned parameters: ``r <= T + 2``), a Gaussian ``P`` is injective on ``V`` with probability one, so
  ``P theta* in span(P theta_t)`` if and only if ``theta* in span(theta_t)``. The ``MARGIN`` extra rows
  make the residual of a vector outside the span large, not only non-zero: its square is the squared
  distance of ``theta*`` to the span, in the sketch's scale, times a chi-square with at least ``MARGIN``
  degrees of freedom over ``k`` (below a tenth of its mean with probability under 1e-9 at ``MARGIN`` 16).
  ``P`` is seeded, stored in float32 and applied in float64, so the sketch of float32 parameters is exact
  to float64 rounding. Above :data:`MAX_SKETCH_FLOATS` the sketch is not kept and the check says it could
  not read the model (:attr:`IterateSketch.unreadable`).
* **The returned model** (:func:`returned_parameters`): the torch modules (else bare tensors) that the
  object ``train`` returns is, holds or closes over (``predict_proba`` / ``logprobs`` closures and
  default arguments, bound methods, ``functools.partial``, decorated functions), matched to the DP
  optimizer's parameters by name (wrappers' ``_module.`` / ``module.`` segments dropped: Opacus's ``GradSampleModule``,
  ``torch.optim.swa_utils.AveragedModel``), else by the sequence of shapes of bare tensors. What cannot
  be matched is reported as unread, never as a pass.

Hooked loops (:mod:`targets.audit_hooks`) report noisy gradient sums, not parameters: their iterates are
not seen, and the check says so.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

#: Rows of the sketch beyond the iterates it must hold (module docstring).
MARGIN = 16
#: The largest sketch kept (rows x parameters, float32: 256 MiB).
MAX_SKETCH_FLOATS = 1 << 26
#: Rows of the sketch converted to float64 at a time.
_CHUNK = 1 << 20
#: How deep :func:`returned_parameters` looks into closures, bound methods and attributes.
_DEPTH = 4


def normalised_name(name: str) -> str:
    """A parameter's name without the wrappers' ``_module`` / ``module`` segments."""
    return ".".join(part for part in name.split(".") if part not in ("_module", "module"))


def matching_parameter(found: dict[str, torch.Tensor], name: str, shape: tuple[int, ...]) -> torch.Tensor | None:
    """The parameter of ``found`` (by normalised name) that is the DP optimizer's ``name`` of ``shape``: the same
    name, else the one name that ends the other at a segment boundary (a PEFT model's
    ``base_model.model.transformer...`` is the wrapped module's ``transformer...``); None when none or several."""
    if name in found:
        return found[name] if tuple(found[name].shape) == tuple(shape) else None
    candidates = [p for f, p in found.items() if (name.endswith("." + f) or f.endswith("." + name))
                  and tuple(p.shape) == tuple(shape)]
    return candidates[0] if len(candidates) == 1 else None


def _flat(tensors: list[torch.Tensor]) -> torch.Tensor:
    return torch.cat([t.detach().reshape(-1).to("cpu", torch.float64) for t in tensors])


class IterateSketch:
    """The DP iterates of one training, sketched (module docstring).

    Args:
        expected_steps: the noisy steps the training is expected to take (the probe's count); the sketch
            holds ``expected_steps + 1 + MARGIN`` iterates exactly.
        seed: seeds ``P``.
        budget: the largest ``rows x parameters`` kept.

    After the training: ``names`` and ``shapes`` of the DP optimizer's parameters, ``sketches`` (one row
    per iterate, ``theta_0`` first), ``last`` (the last iterate, float64), ``steps`` (iterates after
    ``theta_0``), ``eps`` (the largest machine epsilon of their dtypes), ``unreadable`` (why the iterates could not
    be kept; None when they were), ``raw_steps`` (steps of the wrapped optimizer without a noisy step).
    """

    def __init__(self, expected_steps: int, seed: int, budget: int = MAX_SKETCH_FLOATS) -> None:
        self.rows, self.seed, self.budget = int(expected_steps) + 1 + MARGIN, int(seed), int(budget)
        self.params: list[torch.Tensor] = []
        self.names: list[str] = []
        self.shapes: list[tuple[int, ...]] = []
        self.projection: torch.Tensor | None = None
        self.sketches: list[np.ndarray] = []
        self.last: np.ndarray | None = None
        self.unreadable: str | None = None
        self.eps = float(torch.finfo(torch.float32).eps)
        self.handle: Any = None
        self.noisy_steps: Callable[[], int] | None = None
        self.noisy_seen = 0
        self.raw_steps = 0

    @property
    def steps(self) -> int:
        return max(len(self.sketches) - 1, 0)

    @property
    def dimension(self) -> int:
        return int(sum(int(np.prod(s)) for s in self.shapes))

    def attach(self, module: Any, optimizer: Any, noisy_steps: Callable[[], int] | None = None) -> None:
        """Read ``theta_0`` from ``optimizer``'s parameters (named as in ``module``) and read each later
        iterate after the step of the optimizer it wraps (Opacus's ``original_optimizer``); ``noisy_steps``: the
        count of noisy steps so far (the recorder's), so that a step of the wrapped optimizer without one is a raw
        step, not an iterate (None: every step is an iterate)."""
        if self.params:
            self.unreadable = "the training made more than one DP optimizer"
            return
        names = {id(p): normalised_name(n) for n, p in module.named_parameters()}
        self.params = [p for group in optimizer.param_groups for p in group["params"]]
        self.names = [names.get(id(p), f"#{i}") for i, p in enumerate(self.params)]
        self.shapes = [tuple(p.shape) for p in self.params]
        self.eps = max((float(torch.finfo(p.dtype).eps) for p in self.params if p.is_floating_point()),
                       default=float(torch.finfo(torch.float32).eps))
        d = self.dimension
        if self.rows < d and self.rows * d > self.budget:
            self.unreadable = (f"the sketch of the iterates would hold {self.rows} x {d} floats, above the "
                               f"{self.budget} the audit keeps")
            return
        if self.rows < d:
            gen = torch.Generator().manual_seed(self.seed)
            self.projection = torch.randn(self.rows, d, generator=gen, dtype=torch.float32)
        inner = getattr(optimizer, "original_optimizer", optimizer)
        self.noisy_steps = noisy_steps
        self.noisy_seen = noisy_steps() if noisy_steps is not None else 0
        self.handle = inner.register_step_post_hook(lambda *_: self.stepped())
        self.observe()

    def stepped(self) -> None:
        """After a step of the wrapped optimizer: the next iterate when a noisy step came since the last one, else
        a raw step (counted, not an iterate)."""
        if self.noisy_steps is not None:
            now = self.noisy_steps()
            if now == self.noisy_seen:
                self.raw_steps += 1
                return
            self.noisy_seen = now
        self.observe()

    def sketch(self, theta: torch.Tensor) -> np.ndarray:
        """``P theta`` in float64 (``theta`` itself when no sketch is needed)."""
        if self.projection is None:
            return theta.numpy().copy()
        step = max(1, _CHUNK // theta.numel())
        return np.concatenate([(self.projection[i:i + step].double() @ theta).numpy()
                               for i in range(0, self.projection.shape[0], step)])

    def observe(self) -> None:
        """Record the current parameters as the next iterate."""
        theta = _flat(self.params)
        self.sketches.append(self.sketch(theta))
        self.last = theta.numpy()

    def detach(self) -> None:
        """Remove the step hook (the training is over)."""
        if self.handle is not None:
            self.handle.remove()
            self.handle = None


def _children(obj: Any) -> list[Any]:
    """What a returned object holds that may hold the model."""
    if isinstance(obj, functools.partial):
        return [obj.func, *obj.args, *obj.keywords.values()]
    if isinstance(obj, (list, tuple, set, frozenset)):
        return list(obj)
    if isinstance(obj, dict):
        return list(obj.values())
    if inspect.ismethod(obj):
        return [obj.__self__, obj.__func__]
    if inspect.isfunction(obj):
        cells = []
        for cell in obj.__closure__ or ():
            try:
                cells.append(cell.cell_contents)
            except ValueError:  # an empty cell
                continue
        defaults = [*(obj.__defaults__ or ()), *(obj.__kwdefaults__ or {}).values()]
        return cells + defaults + ([obj.__wrapped__] if hasattr(obj, "__wrapped__") else [])
    return list(vars(obj).values()) if hasattr(obj, "__dict__") else []


def _collect(obj: Any, depth: int, seen: set[int], modules: list, tensors: list) -> None:
    if id(obj) in seen or depth > _DEPTH or isinstance(obj, (str, bytes, int, float, np.ndarray, type)):
        return
    seen.add(id(obj))
    if isinstance(obj, torch.nn.Module):
        modules.append(obj)
        return
    if isinstance(obj, torch.Tensor):
        if obj.is_floating_point():
            tensors.append(obj)
        return
    for child in _children(obj):
        _collect(child, depth + 1, seen, modules, tensors)


def merged_adapters(trained: Any, names: list[str]) -> bool:
    """Whether the DP optimizer's ``names`` are all LoRA adapters (PEFT's ``lora_A`` / ``lora_B``) and the model
    ``trained`` holds none: the adapters were merged into the weights (``merge_and_unload``), so the returned
    parameters are a function of the last iterate and the frozen base that the name match cannot compare."""
    modules: list[torch.nn.Module] = []
    _collect(trained, 0, set(), modules, [])
    def adapter(name: str) -> bool:
        return any(part.startswith("lora_") for part in name.split("."))

    return (bool(names) and bool(modules) and all(adapter(n) for n in names)
            and not any(adapter(name) for m in modules for name, _ in m.named_parameters()))


def returned_parameters(trained: Any, names: list[str],
                        shapes: list[tuple[int, ...]]) -> tuple[np.ndarray | None, str]:
    """The parameters of the model ``trained`` (what ``train`` returned) holds, flattened in the order of the DP
    optimizer's ``names`` / ``shapes`` (module docstring), and how they were found; None and the reason when they
    could not be matched."""
    modules: list[torch.nn.Module] = []
    tensors: list[torch.Tensor] = []
    _collect(trained, 0, set(), modules, tensors)
    found: dict[str, torch.Tensor] = {}
    for module in modules:
        for name, p in module.named_parameters():
            found.setdefault(normalised_name(name), p)
    matched = [matching_parameter(found, n, s) for n, s in zip(names, shapes, strict=True)]
    if modules and all(m is not None for m in matched):
        return _flat(matched).numpy(), (f"the parameters of the torch module(s) the returned "
                                        f"{type(trained).__name__} holds, by name")
    if not modules and [tuple(t.shape) for t in tensors] == list(shapes):
        return _flat(tensors).numpy(), "the tensors the returned function closes over, in the optimizer's order"
    if not modules and not tensors:
        return None, (f"the returned {type(trained).__name__} holds no torch module or tensor the audit can reach "
                      "(closures, bound methods, attributes)")
    missing = [n for n, m in zip(names, matched, strict=True) if m is None]
    return None, (f"the model the returned {type(trained).__name__} holds does not line up with the DP optimizer's "
                  f"{len(names)} parameter tensors ({len(missing)} not found by name and shape, e.g. "
                  f"{missing[:1]})")
