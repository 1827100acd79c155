"""The randomness a plugin takes, and the workbench's seeded randomness adapted to it.

Third-party DP libraries differ: a numpy ``Generator`` (numpy's recommended API), a legacy
``RandomState`` (scikit-learn, diffprivlib: ``random_state=``), an integer seed, or nothing at all
(OpenDP measurements and diffprivlib's default draw from their own secure generators). A plugin
says which with the key ``"rng"`` of its dict (``RNG_KINDS``); without it, :func:`rng_kind` reads
the function's signature:

1. a function that takes only its data (mechanism ``f(data)``, trainer ``train(X, y)``): ``"none"``;
2. otherwise the randomness parameter (2nd of a mechanism, 3rd of a trainer): its annotation
   (``np.random.Generator``, ``np.random.RandomState``, ``int``), else its name (``random_state``,
   ``seed``, ``rng``/``generator``), names the kind;
3. otherwise the default: ``"generator"`` for mechanisms, ``"seed"`` for trainers.

The workbench keeps one seeded numpy Generator per purpose and derives what the plugin takes from
it (:func:`mechanism_args`, :func:`trainer_args`): the Generator itself, a ``RandomState`` on the
same bit generator (``np.random.RandomState(rng.bit_generator)``, so both advance one stream), or
a fresh integer seed per call. A plugin that ignores what it is given draws from its own generator:
its audit is still valid (every output is a genuine draw of the mechanism), only not reproducible,
which :func:`reproducibility` states in results.json.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from audit.errors import UserError
from audit.stats.outcome import Table

#: What a plugin may take as randomness (the value of its dict's ``"rng"`` key).
RNG_KINDS = ("generator", "random_state", "seed", "none")
_BY_ANNOTATION = {"Generator": "generator", "RandomState": "random_state", "int": "seed"}
_BY_NAME = {"rng": "generator", "generator": "generator", "random_state": "random_state", "seed": "seed"}

__all__ = ["RNG_KINDS", "rng_kind", "mechanism_args", "trainer_args", "Reproducibility", "reproducibility",
           "reproducibility_lines"]


def _positional(func: Callable) -> list[inspect.Parameter] | None:
    """The positional parameters of ``func`` (None when its signature cannot be read, or it takes *args)."""
    try:
        params = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return None
    return [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def rng_kind(func: Callable, declared: Any, data_args: int, default: str, what: str) -> str:
    """The randomness ``func`` takes after its ``data_args`` data arguments (module docstring):
    ``declared`` (the dict's ``"rng"``) when given, else read from the signature, else ``default``."""
    if declared is not None:
        if declared not in RNG_KINDS:
            raise UserError(f"{what}: field 'rng' must be one of {', '.join(map(repr, RNG_KINDS))}, got {declared!r}")
        return str(declared)
    params = _positional(func)
    if params is None:
        return default
    if len(params) <= data_args:
        return "none"
    param = params[data_args]
    annotation = param.annotation
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    return _BY_ANNOTATION.get(text.rsplit(".", 1)[-1]) or _BY_NAME.get(param.name, default)


def mechanism_args(kind: str, rng: np.random.Generator) -> tuple:
    """The randomness argument(s) of one mechanism call, drawn from the workbench's ``rng``."""
    if kind == "generator":
        return (rng,)
    if kind == "random_state":
        return (np.random.RandomState(rng.bit_generator),)
    if kind == "seed":
        return (int(rng.integers(2 ** 32)),)
    return ()


def trainer_args(kind: str, seed: int) -> tuple:
    """The randomness argument(s) of one training run with the workbench's per-run ``seed``."""
    if kind == "generator":
        return (np.random.default_rng(seed),)
    if kind == "random_state":
        return (np.random.RandomState(seed),)
    if kind == "seed":
        return (int(seed),)
    return ()


@dataclass(frozen=True, kw_only=True)
class Reproducibility:
    """Whether a plugin gave the same first outputs twice from one seed (:func:`reproducibility`): what
    ``results.json`` writes as ``reproducible`` and ``reproducibility_note``
    (:class:`audit.stats.outcome.Audited`).

    Attributes:
        reproducible: whether the outputs were identical.
        note: the check in words.
    """

    reproducible: bool
    note: str

    def table(self) -> Table:
        """The report table (one of ``tables``) showing the outcome of the check.

        Returns:
            The table.
        """
        return Table(title="Reproducibility of the plugin", columns=["reproducible", "note"],
                     rows=[[self.reproducible, self.note]],
                     caption="the same seed must give the same first draws; a plugin drawing from its own (e.g. "
                             "secure) generator is audited all the same, but its run cannot be repeated exactly")


def reproducibility(reproducible: bool, kind: str, checked: str) -> Reproducibility:
    """The outcome of the check ``checked`` (e.g. "5 outputs drawn twice from the same seed") of a plugin given
    randomness of ``kind``.

    Args:
        reproducible: whether the outputs were identical.
        kind: the randomness the plugin takes (:data:`RNG_KINDS`).
        checked: what was compared, in words.

    Returns:
        The check.
    """
    if reproducible:
        return Reproducibility(reproducible=True, note=f"{checked}: identical; the run repeats with its seed")
    given = "no randomness argument" if kind == "none" else f"a {kind.replace('_', ' ')} from the workbench"
    return Reproducibility(reproducible=False, note=(
        f"{checked}: they differ, so the plugin ignores its seed (it gets {given} and draws from its own "
        f"generator); the bound is still valid, but this run cannot be repeated exactly with --seed"))


def reproducibility_lines(reproducible: bool | None, note: str | None) -> list[str]:
    """The summary line of a plugin run that is not reproducible (none otherwise): ``reproducible`` and
    ``note`` are the run's ``reproducible`` and ``reproducibility_note`` (None: no plugin, no check)."""
    if reproducible is None or reproducible:
        return []
    return [f"warning:   not reproducible: {note}"]
