"""The two audit hooks for JAX: pytrees in, the canaried sum out, eager or inside a jitted step.

JAX arrays are immutable and a JAX training step is usually compiled with ``jax.jit``, so the torch hooks
of :mod:`targets.audit_hooks` (which change a tensor in place) cannot reach it. These are their functional
twins, with the same meaning [Abadi et al. 2016, Alg. 1; the canaries of Nasr et al. 2021/2023, see
docs/references.md, "Canaries and threat models"]::

    from targets import jax_hooks

    @jax_hooks.jit                                     # a drop-in for jax.jit (same keyword arguments)
    def step(params, key, x, y, mask):
        grads = clipped_sum(params, x, y, mask)        # sum_i clip(g_i): a pytree like params
        grads = jax_hooks.add_canary(grads, clip_norm=C, sample_rate=q, batch=mask)
        noise = gaussian_like(key, grads, sigma * C)
        noisy = jax.tree.map(jnp.add, grads, noise)
        jax_hooks.report_update(noisy)                 # the noisy SUM, before dividing by the batch
        return jax.tree.map(lambda p, g: p - lr * g / (q * n), params, noisy)

:func:`add_canary` returns the clipped sum with the audit's canaries added (outside an audit: the same
pytree, untouched); :func:`report_update` returns its argument. ``batch`` is a boolean mask over the
training set's rows or an array of row indices (negative entries, the ``-1`` padding of jax_privacy's
``pad_to_multiple_of``, are dropped). ``params=`` (optional, both hooks): the parameters the step starts
from (``add_canary``) and those it ends with (``report_update``), in the structure of the gradients; given
them, ``--threat white-box`` reads the total change of the parameters.

**Inside ``jax.jit``.** :func:`jit` compiles two versions of the step and picks one per call by whether an
audit is recording (:func:`targets.audit_hooks.active`), so the decision never hides in a stale trace:

* outside an audit the hooks return their argument while the step is traced, so the compiled step is
  exactly the one ``jax.jit`` would build; the wrapper adds one Python call and one module-variable check
  per step (measured by ``benchmarks/bench_jax_hooks.py``);
* during an audit the hooks are traced into ordered ``jax.experimental.io_callback`` calls that hand the
  arrays to the run's :class:`targets.audit_hooks.UpdateRecorder` as numpy arrays (the same recorder the
  torch hooks and Opacus feed: the probe, the accounting check and the one-run game read a JAX loop as they
  read a torch one), and the wrapper waits for the step's callbacks (``jax.effects_barrier``) and raises
  on the host what the recorder raised inside a callback (an error of the loop, or the probe's repeat
  stopping the training), which JAX would otherwise turn into a runtime error.

JAX also caches the traces of functions the step calls (a ``lax.scan`` body, an inner ``jax.jit``) apart
from the step's own, so a trace made outside an audit could reach an audited step without its hooks. When an
audit starts after such a trace, the hooks drop every JAX trace and compilation (``jax.clear_caches``,
through :data:`targets.audit_hooks.RECORDING_STARTS`), and the first call of a step outside an audit after
audited traces does the same: each state then traces afresh. An audit that runs in its own process (the
command line) never clears: all its calls are audited.

Hooks traced by a plain ``jax.jit`` with no :func:`jit` around it raise a one-line error, audit or not: the
wrapper is what raises the recorder's errors on the host. Called outside any jit (between a jitted clipped
sum and a jitted noise-and-update, say) they work eagerly.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback

from audit.errors import UserError
from targets.audit_hooks import RECORDING_STARTS, StepSource, UpdateRecorder, active

__all__ = ["add_canary", "report_update", "jit", "DRIVER"]

#: ``StepSource.kind`` of the steps these hooks record (``driver`` in results.json).
DRIVER = "jax"

#: While :func:`jit` traces a step: whether that trace is the audited version (``audit``), else unset.
_TRACE = threading.local()
#: Whether a plain (False) or an audited (True) trace was made since JAX's caches were last cleared.
_TRACED = {False: False, True: False}


def _clear_traces() -> None:
    """Drop every JAX trace and compilation (``jax.clear_caches``): a function the step calls whose trace JAX
    caches apart (a ``lax.scan`` body, an inner ``jax.jit``) is traced again in the new audit state."""
    jax.clear_caches()
    _TRACED[False] = _TRACED[True] = False


def _on_recording(recorder: UpdateRecorder) -> None:
    """An audit starts: traces made outside an audit would skip the hooks, so drop them (module docstring)."""
    if _TRACED[False]:
        _clear_traces()


RECORDING_STARTS.append(_on_recording)


class _Deferred:
    """What the recorder raised inside a callback of the audit's current recorder, raised again on the host
    by :func:`jit` once the step's callbacks have run; later callbacks of that recorder do nothing."""

    recorder: UpdateRecorder | None = None
    error: BaseException | None = None

    @classmethod
    def hold(cls, recorder: UpdateRecorder, error: BaseException) -> None:
        if cls.recorder is not recorder or cls.error is None:
            cls.recorder, cls.error = recorder, error

    @classmethod
    def halted(cls, recorder: UpdateRecorder) -> bool:
        return cls.recorder is recorder and cls.error is not None

    @classmethod
    def raise_held(cls, recorder: UpdateRecorder) -> None:
        if cls.halted(recorder):
            error, cls.recorder, cls.error = cls.error, None, None
            raise error


@contextmanager
def _tracing(audited: bool) -> Iterator[None]:
    previous = getattr(_TRACE, "audit", None)
    _TRACE.audit = audited
    _TRACED[audited] = True
    try:
        yield
    finally:
        _TRACE.audit = previous


def jit(fun: Callable | None = None, **jit_kwargs: Any) -> Callable:
    """``jax.jit`` for a step that calls the hooks (module docstring): the same keyword arguments
    (``static_argnums``, ``donate_argnums``, ...); usable as ``@jit`` or ``@jit(static_argnums=0)``.

    Args:
        fun: the step.
        **jit_kwargs: passed to ``jax.jit``.

    Returns:
        The compiled step: the plain version outside an audit, the audited one while an audit records.
    """
    if fun is None:
        return functools.partial(jit, **jit_kwargs)

    def version(audited: bool) -> Callable:
        @functools.wraps(fun)
        def traced(*args: Any, **kwargs: Any) -> Any:
            with _tracing(audited):
                return fun(*args, **kwargs)

        return jax.jit(traced, **jit_kwargs)

    plain, audited = version(False), version(True)

    @functools.wraps(fun)
    def step(*args: Any, **kwargs: Any) -> Any:
        recorder = active()
        if recorder is None:
            if _TRACED[True]:  # an audit ran in this process: its traces hold the hooks' callbacks
                _clear_traces()
            return plain(*args, **kwargs)
        out = audited(*args, **kwargs)
        jax.effects_barrier()
        _Deferred.raise_held(recorder)
        return out

    return step


def _leaves(tree: Any, what: str) -> tuple[list[Any], Any]:
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    if not leaves or not all(hasattr(leaf, "shape") and hasattr(leaf, "dtype") for leaf in leaves):
        raise UserError(f"{what} must be a JAX array or a pytree of arrays (one per parameter), got "
                        f"{type(tree).__name__}")
    return leaves, treedef


def _traced(leaves: list[Any]) -> bool | None:
    """None when the hooks run eagerly; else whether the trace is the audited version. A plain ``jax.jit``
    around the hooks is a one-line error (module docstring)."""
    if not any(isinstance(leaf, jax.core.Tracer) for leaf in leaves):
        return None
    audited = getattr(_TRACE, "audit", None)
    if audited is None:
        raise UserError("targets.jax_hooks.add_canary / report_update were traced by a plain jax.jit: decorate the "
                        "step that calls them with targets.jax_hooks.jit (a drop-in for jax.jit), or call them "
                        "outside any jit")
    return audited


def _indices(batch: Any) -> np.ndarray | None:
    """The rows a step held: a boolean mask as given, indices without the negative padding."""
    if batch is None:
        return None
    array = np.asarray(batch)
    return array if array.dtype == bool else array.astype(np.int64).reshape(-1)[array.reshape(-1) >= 0]


def _flat(leaves: list[Any]) -> np.ndarray:
    return np.concatenate([np.asarray(leaf, dtype=np.float64).reshape(-1) for leaf in leaves])


def _record_add(recorder: UpdateRecorder, host: list[np.ndarray], clip: float, rate: float, batch: Any,
                params: list[Any] | None) -> None:
    """The recorder's ``add_canary`` on writable numpy copies (changed in place); the first step's parameters."""
    q = float(rate)
    recorder.add_canary(host, float(clip), q, source=StepSource(DRIVER, q), batch=_indices(batch))
    if params is not None and recorder.initial is None:
        recorder.initial = _flat(params)


def _record_report(recorder: UpdateRecorder, host: list[np.ndarray], params: list[Any] | None) -> None:
    recorder.report(host)
    if params is not None:
        recorder.final = _flat(params)


def _params_leaves(params: Any, treedef: Any, hook: str) -> list[Any] | None:
    if params is None:
        return None
    leaves, structure = _leaves(params, f"{hook}'s params")
    if structure != treedef:
        raise UserError(f"{hook}'s params must have the structure of the gradients (the same pytree of arrays)")
    return leaves


def add_canary(grads: Any, clip_norm: Any, sample_rate: Any, batch: Any = None, params: Any = None) -> Any:
    """Before the noise: the clipped gradient sum with the audit's canaries added, each joining with
    probability ``sample_rate`` (functional: the input is unchanged). Outside an audit: ``grads`` itself.

    Args:
        grads: the clipped per-example gradient sum of this step, before the noise: a JAX array or a pytree
            of arrays (numpy arrays work too).
        clip_norm: the clipping norm C (the sensitivity of the sum: with jax_privacy's
            ``clipped_grad(..., normalize_by=B)``, its ``sensitivity()``, C / B).
        sample_rate: the probability a record joins a batch in the loop (Poisson rate q).
        batch: the rows this step's sum holds: a boolean mask over the training set, or indices (negative
            entries, padding, are dropped); without it the sampling, rate and clipping checks say "not checked".
        params: the parameters the step starts from, in the structure of ``grads`` (white-box threat).

    Returns:
        The clipped sum with the canaries that joined added, in the structure and dtypes of ``grads``.

    Raises:
        UserError: ``grads`` is not a pytree of arrays, ``params`` has another structure, or the hooks were
            traced by a plain ``jax.jit``.
    """
    leaves, treedef = _leaves(grads, "add_canary's gradient sum")
    audited = _traced(leaves)
    recorder = active()
    if audited is False or (audited is None and recorder is None):
        return grads
    param_leaves = _params_leaves(params, treedef, "add_canary")
    if audited is None:
        _Deferred.raise_held(recorder)
        host = [np.array(leaf) for leaf in leaves]
        _record_add(recorder, host, clip_norm, sample_rate, batch, param_leaves)
        return treedef.unflatten([h if isinstance(leaf, np.ndarray) else jnp.asarray(h, dtype=leaf.dtype)
                                  for h, leaf in zip(host, leaves, strict=True)])
    rows = None if batch is None else jnp.asarray(batch)
    return treedef.unflatten(_callback_add(leaves, clip_norm, sample_rate, rows, param_leaves))


def report_update(noisy: Any, params: Any = None) -> Any:
    """After the noise: record the noisy clipped sum (before any division by the batch size). Returns
    ``noisy``.

    Args:
        noisy: the noisy clipped gradient sum of this step, in the structure of the ``grads`` given to
            :func:`add_canary`.
        params: the parameters after this step's update, in the same structure (white-box threat).

    Returns:
        ``noisy``, unchanged.
    """
    leaves, treedef = _leaves(noisy, "report_update's noisy sum")
    audited = _traced(leaves)
    recorder = active()
    if audited is False or (audited is None and recorder is None):
        return noisy
    param_leaves = _params_leaves(params, treedef, "report_update")
    if audited is None:
        _Deferred.raise_held(recorder)
        _record_report(recorder, [np.array(leaf) for leaf in leaves], param_leaves)
    else:
        _callback_report(leaves, param_leaves)
    return noisy


def _split(arrays: list[Any], counts: list[int]) -> list[list[Any]]:
    out, start = [], 0
    for count in counts:
        out.append(list(arrays[start:start + count]))
        start += count
    return out


def _callback_add(leaves: list[Any], clip_norm: Any, sample_rate: Any, batch: Any,
                  params: list[Any] | None) -> list[Any]:
    """The audited trace of :func:`add_canary`: an ordered host callback returning the canaried leaves."""
    dtypes = [leaf.dtype for leaf in leaves]
    extra = [jnp.asarray(clip_norm), jnp.asarray(sample_rate)] if _is_traced(clip_norm, sample_rate) else []
    operands = [*leaves, *extra, *([] if batch is None else [batch]), *(params or [])]
    counts = [len(leaves), len(extra), 0 if batch is None else 1, len(params or [])]

    def host(*arrays: Any) -> list[np.ndarray]:
        grads, scalars, step_batch, step_params = _split(arrays, counts)
        copies = [np.array(g, dtype=d) for g, d in zip(grads, dtypes, strict=True)]
        recorder = active()
        if recorder is None or _Deferred.halted(recorder):
            return copies
        clip, rate = (float(scalars[0]), float(scalars[1])) if scalars else (clip_norm, sample_rate)
        try:
            _record_add(recorder, copies, clip, rate, step_batch[0] if step_batch else None, step_params or None)
        except BaseException as exc:  # noqa: BLE001 - raised again on the host by jit (module docstring)
            _Deferred.hold(recorder, exc)
            return [np.array(g, dtype=d) for g, d in zip(grads, dtypes, strict=True)]
        return copies

    shapes = [jax.ShapeDtypeStruct(leaf.shape, leaf.dtype) for leaf in leaves]
    return list(io_callback(host, shapes, *operands, ordered=True))


def _callback_report(leaves: list[Any], params: list[Any] | None) -> None:
    """The audited trace of :func:`report_update`: an ordered host callback that records the noisy sum."""
    count = len(leaves)

    def host(*arrays: Any) -> None:
        recorder = active()
        if recorder is None or _Deferred.halted(recorder):
            return
        try:
            _record_report(recorder, [np.array(a) for a in arrays[:count]], list(arrays[count:]) or None)
        except BaseException as exc:  # noqa: BLE001 - raised again on the host by jit (module docstring)
            _Deferred.hold(recorder, exc)

    io_callback(host, None, *leaves, *(params or []), ordered=True)


def _is_traced(*values: Any) -> bool:
    return any(isinstance(v, jax.core.Tracer) for v in values)
