"""One catalogue of every target, whatever its family, and the one resolver of target names.

Each family keeps its own registry (trained models :data:`targets.registry.TARGETS`, textbook
mechanisms :data:`targets.mechanisms.MECHANISMS`, language models
:data:`targets.lm.recipes.LM_TARGETS`, DP-ERM :data:`targets.dperm.DPERM_TARGETS` and its
``run dp`` variants :data:`targets.dperm.DPERM_AUDIT_TARGETS`, broken controls
:data:`targets.broken_mechanisms.BROKEN_MECHANISMS`, built-in plugins
:data:`targets.plugins.loading.BUILTIN_PLUGINS`); this module presents them in one shape, a
:class:`TargetEntry`, and resolves any name — a built-in one or a ``module:factory`` plugin spec —
to one (:func:`resolve`). It is the only place that tells a plugin spec from a built-in name.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from audit.errors import unknown_target
from targets.broken_mechanisms import BROKEN_MECHANISMS, make_broken
from targets.dperm import DPERM_AUDIT_TARGETS, DPERM_TARGETS, make_dperm
from targets.lm.recipes import LM_DESCRIPTIONS, LM_TARGETS, lm_recipe
from targets.mechanisms import MECHANISMS, make_mechanism
from targets.plugins.loading import BUILTIN_PLUGINS, ModelPlugin, TrainerPlugin, is_plugin_spec, load_plugin
from targets.registry import TARGETS, TrainedTarget, get_target

__all__ = ["FAMILIES", "TargetEntry", "entries", "lookup", "resolve", "trained_target", "trained_targets",
           "dperm_release", "is_language_model", "record_word"]

#: Families, in the order ``python -m audit list`` shows them.
FAMILIES = ("trained", "lm", "mechanism", "dp-erm", "control", "plugin")


@dataclass(frozen=True)
class TargetEntry:
    """A named target: its ``family`` (one of :data:`FAMILIES`), a one-line ``description`` and the
    ``factory`` that builds it, by family:

    * ``trained``: ``factory()`` -> :class:`targets.registry.TrainedTarget`;
    * ``lm``: ``factory(seed=0)`` -> :class:`targets.lm.recipes.LMRecipe` (``run membership`` builds the
      target from it, :func:`targets.lm.builtin.builtin_lm`);
    * ``mechanism``: ``factory(epsilon=None, delta=None)`` -> :class:`targets.mechanisms.Mechanism`;
    * ``dp-erm``: ``factory(epsilon=None, delta=None, l2_reg=None, pair="label-flip")`` ->
      :class:`targets.dperm.DPERMMechanism`;
    * ``control``: ``factory()`` -> the broken :class:`targets.mechanisms.Mechanism`;
    * ``plugin``: ``factory()`` -> :class:`targets.plugins.loading.TrainerPlugin` or ``MechanismPlugin``
      (imports the user's module and calls its factory).
    """

    name: str
    family: str
    description: str
    factory: Callable[..., Any]


def _builtin() -> Iterator[TargetEntry]:
    for name, target in TARGETS.items():
        yield TargetEntry(name, "trained", target.description, functools.partial(get_target, name))
    for name in LM_TARGETS:
        yield TargetEntry(name, "lm", LM_DESCRIPTIONS[name], functools.partial(lm_recipe, name))
    for name, (description, _factory) in MECHANISMS.items():
        yield TargetEntry(name, "mechanism", description, functools.partial(make_mechanism, name))
    for name, spec in (DPERM_TARGETS | DPERM_AUDIT_TARGETS).items():
        yield TargetEntry(name, "dp-erm", spec["description"], functools.partial(make_dperm, name))
    for name, (description, _factory) in BROKEN_MECHANISMS.items():
        yield TargetEntry(name, "control", description, functools.partial(make_broken, name))
    for name, (_spec, description) in BUILTIN_PLUGINS.items():
        yield TargetEntry(name, "plugin", description, functools.partial(load_plugin, name))


@functools.cache
def _entries() -> dict[str, TargetEntry]:
    return {entry.name: entry for entry in _builtin()}


def entries() -> list[TargetEntry]:
    """Every built-in target, family by family in :data:`FAMILIES` order."""
    return list(_entries().values())


def lookup(name: str) -> TargetEntry | None:
    """The built-in target ``name``, or None (a plugin spec is not built in: see :func:`resolve`)."""
    return _entries().get(name)


def is_plugin(name: str) -> bool:
    """Whether ``name`` names a plugin: a built-in plugin or ``module:factory`` (the one place that asks
    :func:`targets.plugins.loading.is_plugin_spec`)."""
    return is_plugin_spec(name)


def resolve(name: str) -> TargetEntry:
    """The target ``name`` names: a built-in one, or a ``module:factory`` plugin (family ``plugin``; its
    factory imports the module). Anything else is a one-line :class:`audit.errors.UserError`."""
    entry = lookup(name)
    if entry is not None:
        return entry
    if is_plugin(name):
        return TargetEntry(name, "plugin", f"user plugin {name}", functools.partial(load_plugin, name))
    raise unknown_target(name, _entries())


def is_language_model(target: str | TargetEntry | object) -> bool:
    """Whether a target is a language model, the one place that asks: a built-in target of the ``lm``
    family (:data:`targets.lm.recipes.LM_TARGETS`), a trained model whose factory made one (a
    :class:`targets.plugins.loading.ModelPlugin` whose dict's ``kind`` is ``"lm"``), or a trainer plugin over
    texts (a :class:`targets.plugins.loading.TrainerPlugin` of ``{"kind": "lm_trainer"}``, its ``lm`` set).

    Args:
        target: a target name (a plugin spec is none of the built-in ones), its entry, or a loaded plugin (any
            other plugin, a mechanism's, is no language model).

    Returns:
        True for a language model.
    """
    if isinstance(target, TrainerPlugin):
        return target.lm is not None
    if isinstance(target, ModelPlugin):
        return target.made.get("kind") == "lm"
    entry = lookup(target) if isinstance(target, str) else target
    return isinstance(entry, TargetEntry) and entry.family == "lm"


def record_word(target: str | TrainerPlugin) -> str:
    """What a target's training takes, in the words of progress lines and errors: ``"texts"`` for a language
    model (:func:`is_language_model`), ``"rows"`` otherwise."""
    return "texts" if is_language_model(target) else "rows"


def trained_target(name: str) -> TrainedTarget:
    """The built-in trained model ``name`` (family ``trained``); any other name is the one-line
    :class:`audit.errors.UserError` of an unknown target."""
    entry = lookup(name)
    if entry is None or entry.family != "trained":
        raise unknown_target(name, {n: e for n, e in _entries().items() if e.family == "trained"})
    return entry.factory()


def trained_targets() -> list[TrainedTarget]:
    """Every built-in trained model, in listing order."""
    return [entry.factory() for entry in entries() if entry.family == "trained"]


def dperm_release(name: str) -> dict[str, Any] | None:
    """The specification of the DP-ERM release ``name`` (:data:`targets.dperm.DPERM_TARGETS`: its dataset,
    claimed epsilon and delta, ``l2_reg``, description), or None for any other name, the ``run dp`` variants
    without intercept (:data:`targets.dperm.DPERM_AUDIT_TARGETS`) included.

    Args:
        name: A target name.

    Returns:
        The release's specification (the registry's own dict), or None.
    """
    return DPERM_TARGETS.get(name)
