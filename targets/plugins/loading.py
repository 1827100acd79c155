"""User plugin targets: ``--target some.module:factory`` audits the user's own code.

``factory()`` returns a plain dict — no import of this project needed — in one of four forms:

* trainer: ``{"kind": "trainer", "dataset": "mnist" | "data.npz" | "data.csv" | (X, y), "train": train,
  "claim": {"epsilon": E, "delta": D}}`` with ``train(X, y, seed) -> predict_proba`` and
  ``predict_proba(X) -> ndarray (n, n_classes)``. Audited black-box by ``run dp`` (the audit
  inserts a canary into about half of many trainings and scores it with the model's loss).
* mechanism: ``{"kind": "mechanism", "mechanism": f, "neighbours": (D, D_prime),
  "claim": {"epsilon": E, "delta": D}}`` with ``f(data, rng)`` releasing one output (numbers,
  arrays, tuples/dicts of those, or categories: :mod:`targets.plugins.outputs`). Audited by
  ``run mechanism``; ``D_prime`` is the world "with the target record".
* model: ``{"kind": "model", "predict_proba": f, "members": data, "nonmembers": data, ...}``, a model
  that already exists, audited by ``run membership`` without retraining it (:mod:`targets.trained_model`
  has the contract; here it is a :class:`ModelPlugin`).
* lm: ``{"kind": "lm", "logprobs": f, "members": texts, "nonmembers": texts, ...}``, a trained language
  model given as a per-token log-probability function, audited by ``run membership`` on its texts
  (:mod:`targets.lm.contract` has the contract; here it too is a :class:`ModelPlugin`).
* lm_trainer: ``{"kind": "lm_trainer", "texts": [str, ...], "train": train, "claim": {...}}`` with
  ``train(texts, seed) -> logprobs`` fine-tuning a language model and ``logprobs(texts)`` the per-token
  log-probabilities of each text (:mod:`targets.plugins.lm` has the contract); a :class:`TrainerPlugin` over
  texts (``lm`` set), audited by ``run dp --one-run``.

Randomness: ``rng`` may be a numpy Generator, a RandomState, an int seed or absent (``f(data)``,
``train(X, y)``); the key ``"rng"`` says which, else the signature does (:mod:`targets.plugins.rng`).

Claims (:func:`claim_from_plugin`): ``{"epsilon": E, "delta": D}`` ((E, D)-DP; D = 0, the default, is
pure DP and audited at delta 0), ``{"mu": m}`` (m-Gaussian DP) or ``{"rho": r}`` (r-zCDP), the last
two with an optional ``"delta"`` (default ``PURE_DP_DELTA``) at which epsilon is reported. A DP-SGD
trainer may add its accounting to an (E, D) claim, ``"dpsgd": {"noise_multiplier": s, "sample_rate":
q, "steps": T}``: the audit then compares against the exact DP-SGD tradeoff curve (PLD accountant)
instead of the (eps, delta) curve, and checks the stated epsilon is what that accounting gives.

Optional keys: ``"name"`` (names the target in run directories and results.json for every run kind;
default: the spec ``module:factory``), ``"description"``, ``"neighbouring"`` (text), ``"params"`` (a
JSON-serialisable dict shown in reports), ``"rng"``, and for a trainer ``"mechanism"``: the DP mechanism its
training runs when it is not DP-SGD (:mod:`targets.plugins.declared`: cyclic or truncated Poisson, balls-in-bins,
correlated noise; default DP-SGD). Every problem is a one-line
:class:`audit.errors.UserError` naming the bad field. :func:`imported_packages` records the
versions of the packages a plugin uses (config.json ``plugin.packages``).

Built-in plugin targets (``BUILTIN_PLUGINS``) are named like any target: ``opacus_mnist`` and the
DP-SGD controls of :mod:`targets.dpsgd_controls`.
"""

from __future__ import annotations

import functools
import importlib
import os
import pkgutil
import re
import sys
import types
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from importlib.metadata import PackageNotFoundError, packages_distributions, version
from typing import Any

import numpy as np

from audit.errors import TargetCodeError, UserError, did_you_mean
from audit.theory.checks import check_delta, check_epsilon
from audit.theory.claims import PURE_DP_DELTA, ApproxDPClaim, GaussianClaim, PrivacyClaim, PureDPClaim
from audit.theory.declared_mechanism import DPSGD, DeclaredMechanism
from audit.theory.dpsgd import DPSGDClaim
from audit.theory.rdp import ZCDPClaim
from targets.datasets import DATA_FILE_SUFFIXES, DATASETS
from targets.plugins.declared import declared_mechanism
from targets.plugins.lm import LMTexts, lm_trainer_fields
from targets.plugins.rng import rng_kind
from targets.threads import thread_limit

#: ``package.module:callable``.
_SPEC = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


#: name -> (plugin spec, description) of plugin targets that ship with the project.
BUILTIN_PLUGINS: dict[str, tuple[str, str]] = {
    "opacus_mnist": ("targets.opacus_target:opacus_mnist",
                     "softmax regression on MNIST trained by Opacus (Poisson sampling), (2, 1e-5) by PLD"),
    "dpsgd_control_correct": ("targets.dpsgd_controls:correct", "DP-SGD softmax regression on digits, (1, 1e-5)"),
    "dpsgd_control_no_clipping": ("targets.dpsgd_controls:no_clipping",
                                  "control: DP-SGD without per-example clipping, claims (1, 1e-5)"),
    "dpsgd_control_noise_over_batch": ("targets.dpsgd_controls:noise_over_batch",
                                       "control: DP-SGD noise divided by the batch size, claims (1, 1e-5)"),
    "opacus_control_correct": ("targets.opacus_controls:correct",
                               "Opacus softmax regression on digits accounted correctly, (2, 1e-5)"),
    "opacus_control_extra_epochs": ("targets.opacus_controls:extra_epochs",
                                    "control: Opacus loop trains 10 epochs, accounts 2; claims (2, 1e-5)"),
    "opacus_control_physical_batch_rate": ("targets.opacus_controls:physical_batch_rate",
                                           "control: Opacus accounts the physical batch's rate 0.1, samples at "
                                           "0.5; claims (2, 1e-5)"),
    "opacus_control_noise_for_larger_epsilon": ("targets.opacus_controls:noise_for_larger_epsilon",
                                                "control: Opacus noise calibrated for epsilon 8; claims (2, 1e-5)"),
}


def plugin_spec_for(target: str) -> str | None:
    """The plugin spec ``target`` stands for (itself, or a built-in plugin's), or None."""
    if target in BUILTIN_PLUGINS:
        return BUILTIN_PLUGINS[target][0]
    return target if ":" in target else None


def is_plugin_spec(target: str) -> bool:
    """Whether ``target`` names a plugin (``module:factory`` or a built-in plugin name)."""
    return plugin_spec_for(target) is not None


@dataclass(frozen=True, kw_only=True)
class TrainerPlugin:
    """A validated trainer plugin; ``rng`` is the randomness ``train`` takes (:mod:`targets.plugins.rng`),
    ``packages`` the {distribution: version} of what the plugin imported, ``threads`` the thread limit
    its code runs under (:func:`targets.threads.thread_limit`: None = the plugin policy, 0 = none, for
    the project's own plugins). ``claim`` is None for ``"claim": "opacus"``: the epsilon Opacus's
    accountant reports after training, at ``delta``, read by the audit (:mod:`audit.dp.plugins.updates`)."""

    spec: str
    name: str
    description: str
    dataset: str | tuple[np.ndarray, np.ndarray]
    train: Callable[..., Callable[[np.ndarray], np.ndarray]]
    claim: PrivacyClaim | None
    delta: float
    neighbouring: str
    params: dict
    rng: str = "seed"
    packages: dict = field(default_factory=dict)
    threads: int | None = None
    lm: LMTexts | None = None
    mechanism: DeclaredMechanism = DPSGD


@dataclass(frozen=True, kw_only=True)
class MechanismPlugin:
    """A validated mechanism plugin; ``rng``, ``packages`` and ``threads`` as for :class:`TrainerPlugin`."""

    spec: str
    name: str
    description: str
    mechanism: Callable[..., Any]
    neighbours: tuple[Any, Any]
    claim: PrivacyClaim
    delta: float
    neighbouring: str
    params: dict
    rng: str = "generator"
    packages: dict = field(default_factory=dict)
    threads: int | None = None


@dataclass(frozen=True, eq=False)
class ModelPlugin:
    """A factory's ``{"kind": "model", ...}`` or ``{"kind": "lm", ...}`` dict, not yet validated: a model that
    already exists (:mod:`targets.trained_model` validates the first into a ``TrainedModel``,
    :mod:`targets.lm.contract` the second into a ``TrainedLM``; this module cannot import those, which import
    this). ``loaded``/``namespaces``: what the factory's import added and its globals."""

    spec: str
    made: dict
    loaded: frozenset = frozenset()
    namespaces: tuple = ()


def plugin_config(plugin: TrainerPlugin | MechanismPlugin) -> dict:
    """What config.json records about a plugin: spec, name, randomness and package versions."""
    return {"spec": plugin.spec, "name": plugin.name, "rng": plugin.rng, "packages": plugin.packages}


#: ``"claim": "opacus"`` (trainers): the epsilon Opacus's own accountant reports after training, at the
#: plugin's ``"delta"`` (default ``PURE_DP_DELTA``).
OPACUS_CLAIM = "opacus"

#: The forms of a plugin's claim, for error messages.
CLAIM_FORMS = ("{'epsilon': E, 'delta': D}, {'mu': m} (Gaussian DP) or {'rho': r} (zCDP); a trainer may say "
               "'opacus'")


def claim_from_plugin(spec: str, claim: Any) -> tuple[PrivacyClaim, float]:
    """(claim, audit delta) from a plugin's claim dict (module docstring).

    ``{"epsilon": E, "delta": D}``: D = 0 (the default) is pure DP, audited at delta 0. ``{"mu": m}``
    and ``{"rho": r}``: Gaussian DP [Dong, Roth, Su 2019] and zCDP [Bun & Steinke 2016]
    (docs/references.md, "Gaussian DP", "Renyi DP and zCDP"), audited at their ``"delta"`` (default
    ``PURE_DP_DELTA``, must be > 0: both give epsilon = inf at delta 0).
    """
    if not isinstance(claim, dict):
        raise UserError(f"plugin {spec}: field 'claim' must be a dict {CLAIM_FORMS}, got {type(claim).__name__}")
    forms = [k for k in ("epsilon", "mu", "rho") if k in claim]
    if len(forms) != 1:
        raise UserError(f"plugin {spec}: field 'claim' needs exactly one of 'epsilon', 'mu', 'rho': {CLAIM_FORMS}")
    form = forms[0]
    try:
        value = float(claim[form])
        delta = float(claim.get("delta", 0.0 if form == "epsilon" else PURE_DP_DELTA))
    except (TypeError, ValueError):
        raise UserError(f"plugin {spec}: 'claim' {form} and delta must be numbers") from None
    if form != "epsilon":
        check_delta(delta, f"plugin {spec}: claim delta (at which a {form} claim's epsilon is audited)", positive=True)
        if not (value > 0 and np.isfinite(value)):
            raise UserError(f"plugin {spec}: claim {form} must be a positive number (got {claim[form]!r})")
        return (GaussianClaim(value) if form == "mu" else ZCDPClaim(value)), delta
    check_epsilon(value, f"plugin {spec}: claim epsilon", positive=True)
    check_delta(delta, f"plugin {spec}: claim delta")
    if "dpsgd" in claim:
        return _dpsgd_claim(spec, claim["dpsgd"], value, delta), delta
    if delta == 0:
        return PureDPClaim(value), 0.0
    return ApproxDPClaim(value, delta), delta


def _dpsgd_claim(spec: str, accounting: Any, epsilon: float, delta: float) -> PrivacyClaim:
    """The DP-SGD claim of ``"dpsgd": {...}``, checked against the stated (epsilon, delta)."""

    if delta == 0:
        raise UserError(f"plugin {spec}: a 'dpsgd' claim needs delta > 0")
    try:
        sigma, rate, steps = (float(accounting["noise_multiplier"]), float(accounting["sample_rate"]),
                              int(accounting["steps"]))
    except (KeyError, TypeError, ValueError):
        raise UserError(f"plugin {spec}: claim 'dpsgd' must be {{'noise_multiplier': s, 'sample_rate': q, "
                        f"'steps': T}} with numbers") from None
    claim = DPSGDClaim(sigma, rate, steps)  # outside the try: its own range errors name the bad value
    actual = claim.epsilon(delta)
    if actual > epsilon * 1.001 + 1e-9:
        raise UserError(f"plugin {spec}: its 'dpsgd' accounting gives epsilon {actual:.4f} at delta {delta:g}, "
                        f"more than the stated {epsilon:g}")
    return claim


#: The project's own packages (recorded in config.json as privacy-audit).
_PROJECT = {"audit", "targets", "attacks", "reports"}
#: The project's plugins written as a user writes them (one training per call): the plugin thread policy.
_USER_STYLE = {"targets.opacus_controls"}


@functools.lru_cache(maxsize=1)
def installed_distributions() -> dict[str, list[str]]:
    """Top-level module -> distributions (scans every installed distribution once per process; the fork server of
    :func:`audit.supervisor.call_in_child` scans them once for all its children)."""

    return packages_distributions()


def imported_packages(namespaces: Iterable[dict], new_modules: Iterable[str] = ()) -> dict[str, str]:
    """{distribution: version} of the installed top-level packages a plugin imported: those of the
    modules ``new_modules`` (what appeared in ``sys.modules`` while it loaded), and those the values
    in ``namespaces`` (its module's globals, its dict) are or come from — which also catches what was
    imported before the plugin. The standard library and this project are left out."""

    tops = {m.split(".")[0] for m in new_modules}
    for namespace in namespaces:
        for value in namespace.values():
            try:
                name = value.__name__ if isinstance(value, types.ModuleType) else getattr(value, "__module__", None)
            except Exception:  # a lazy proxy that fails on attribute access names nothing
                continue
            if isinstance(name, str):
                tops.add(name.split(".")[0])
    distributions = installed_distributions()
    found = {}
    for top in sorted(tops - set(sys.stdlib_module_names) - _PROJECT - {"builtins", "__main__"}):
        for dist in distributions.get(top, ()):
            try:
                found[dist] = version(dist)
            except PackageNotFoundError:
                continue
    return dict(sorted(found.items()))


def plugin_from_factory(spec: str, factory: Callable[[], Any],
                        loaded: Iterable[str] = ()) -> TrainerPlugin | MechanismPlugin | ModelPlugin:
    """Call a plugin factory (under the thread policy, :mod:`targets.threads`, unless it is one of the
    project's own: they follow the project's, but for the Opacus controls, written as user code), validate
    its dict and record the packages it imported (``loaded``: modules its import added to ``sys.modules``)."""
    module = str(getattr(factory, "__module__", ""))
    threads = 0 if module.split(".")[0] in _PROJECT and module not in _USER_STYLE else None
    before = set(sys.modules)
    try:
        with thread_limit(threads):
            made = factory()
    except Exception as exc:
        raise TargetCodeError(f"plugin factory {spec} raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(made, dict):
        raise UserError(f"plugin factory {spec} must return a dict, got {type(made).__name__}")
    plugin = plugin_from_dict(spec, made, set(loaded) | (set(sys.modules) - before),
                              [getattr(factory, "__globals__", {})])
    return plugin if isinstance(plugin, ModelPlugin) else replace(plugin, threads=threads)


def _close_modules(module_name: str, exc: ImportError) -> str:
    """``"; did you mean 'x'?"`` when the module that was not found has close siblings on the path."""
    missing = getattr(exc, "name", None)
    if not missing or not module_name.startswith(missing):
        return ""
    parent = missing.rpartition(".")[0]
    try:
        path = importlib.import_module(parent).__path__ if parent else None
    except (ImportError, AttributeError):
        return ""
    return did_you_mean(missing, (f"{parent}.{m.name}" if parent else m.name for m in pkgutil.iter_modules(path)))


def import_factory(spec: str, noun: str = "plugin") -> tuple[Callable[[], Any], set[str]]:
    """Import ``module:factory`` (or a built-in plugin name): the factory and the modules its import
    added; bad specs and import failures are one-line errors naming the ``noun`` (plugin, model)."""
    resolved = plugin_spec_for(spec) or spec
    if not _SPEC.match(resolved):
        raise UserError(f"{noun} target {spec!r} must look like package.module:factory")
    module_name, attr = resolved.split(":")
    before = set(sys.modules)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UserError(f"cannot import {noun} module {module_name!r} ({exc}); put it on PYTHONPATH or run from "
                        f"its folder{_close_modules(module_name, exc)}") from None
    except Exception as exc:  # the user's module failed while importing: the target's own code raised
        raise TargetCodeError(f"{noun} module {module_name!r} raised {type(exc).__name__} on import: {exc}") from exc
    factory = getattr(module, attr, None)
    if not callable(factory):
        functions = [k for k, v in vars(module).items() if callable(v) and not k.startswith("_")]
        raise UserError(f"{noun} module {module_name!r} has no callable {attr!r}{did_you_mean(attr, functions)}")
    return factory, set(sys.modules) - before


def load_plugin(spec: str) -> TrainerPlugin | MechanismPlugin | ModelPlugin:
    """Import ``module:factory`` (or a built-in plugin name), call it and validate the dict."""
    factory, loaded = import_factory(spec)
    return plugin_from_factory(spec, factory, loaded)


def _dataset_field(spec: str, value: Any) -> str | tuple[np.ndarray, np.ndarray]:

    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if isinstance(value, str):
        if value not in DATASETS and not value.endswith(DATA_FILE_SUFFIXES):
            raise UserError(f"plugin {spec}: unknown dataset {value!r} in field 'dataset'; use one of "
                            f"{', '.join(DATASETS)}, a .npz or .csv path, or a tuple (X, y)")
        return value
    if not (isinstance(value, (tuple, list)) and len(value) == 2):
        raise UserError(f"plugin {spec}: field 'dataset' must be a dataset name or a tuple (X, y)")
    X, y = np.asarray(value[0]), np.asarray(value[1])
    if X.ndim < 2 or y.ndim != 1 or len(X) != len(y) or len(y) < 10:
        raise UserError(f"plugin {spec}: field 'dataset' must be (X (n, d...), y (n,)) with n >= 10, got shapes "
                        f"{X.shape} and {y.shape}")
    if not np.issubdtype(y.dtype, np.integer) or y.min() < 0:
        raise UserError(f"plugin {spec}: labels y in field 'dataset' must be non-negative integers")
    return X.astype(np.float32), y.astype(np.int64)


_COMMON_KEYS = ("kind", "name", "description", "params", "claim", "rng")
#: The keys a plugin dict of each kind may hold (module docstring; :mod:`targets.trained_model` for models).
PLUGIN_KEYS = {
    "trainer": frozenset(_COMMON_KEYS + ("dataset", "train", "delta", "neighbouring", "mechanism")),
    "mechanism": frozenset(_COMMON_KEYS + ("mechanism", "neighbours", "delta", "neighbouring")),
    "model": frozenset(_COMMON_KEYS + ("predict_proba", "architecture", "weights", "members", "nonmembers", "train",
                                       "population", "training_size", "membership", "device", "outputs",
                                       "batch_size")),
    "lm": frozenset(_COMMON_KEYS + ("logprobs", "members", "nonmembers", "moments", "base_logprobs", "train",
                                    "population", "training_size", "membership", "batch_size")),
}


def check_plugin_keys(spec: str, made: dict, kind: str) -> None:
    """A one-line :class:`audit.errors.UserError` naming the first key of ``made`` a ``kind`` plugin does not
    take, with the closest known keys (a mistyped ``'claims'`` would otherwise read as no claim at all)."""
    unknown = sorted(str(k) for k in made if k not in PLUGIN_KEYS[kind])
    if unknown:
        raise UserError(f"plugin {spec}: unknown key {unknown[0]!r}{did_you_mean(unknown[0], PLUGIN_KEYS[kind])} "
                        f"({'an' if kind == 'lm' else 'a'} {kind} plugin takes {', '.join(sorted(PLUGIN_KEYS[kind]))})")


def plugin_from_dict(spec: str, made: dict, loaded: Iterable[str] = (),
                     namespaces: Iterable[dict] = ()) -> TrainerPlugin | MechanismPlugin | ModelPlugin:
    """Validate a plugin dict (``spec`` names it in errors, and in reports unless it has a ``name``);
    ``loaded`` and ``namespaces`` add to what :func:`imported_packages` looks at (the callables' own
    module globals are always looked at). A ``"kind": "model"`` dict is returned as a :class:`ModelPlugin`
    for :func:`targets.trained_model.load_trained_model` to validate."""
    if not isinstance(made, dict):
        raise UserError(f"plugin {spec} must be a dict, got {type(made).__name__}")
    kind = made.get("kind")
    if kind in PLUGIN_KEYS:
        check_plugin_keys(spec, made, kind)
    if kind in ("model", "lm"):
        return ModelPlugin(spec, made, frozenset(loaded), tuple(namespaces))
    if kind == "lm_trainer":
        return _lm_trainer(spec, made, loaded, namespaces)
    if kind == "trainer" and made.get("claim") == OPACUS_CLAIM:
        claim, delta = None, check_delta(made.get("delta", PURE_DP_DELTA), f"plugin {spec}: delta of the Opacus claim",
                                         positive=True)
    else:
        claim, delta = claim_from_plugin(spec, made.get("claim"))
    name = str(made.get("name", spec))
    params = made.get("params", {})
    if not isinstance(params, dict):
        raise UserError(f"plugin {spec}: field 'params' must be a dict")
    code = made.get("train" if kind == "trainer" else "mechanism")
    spaces = [made, *namespaces, getattr(code, "__globals__", {})]
    if kind == "trainer":
        if not callable(code):
            raise UserError(f"plugin {spec}: field 'train' must be a function train(X, y, seed) -> predict_proba")
        dataset = _dataset_field(spec, made.get("dataset"))
        return TrainerPlugin(spec=spec, name=name, description=str(made.get("description", f"user trainer {spec}")),
                             dataset=dataset, train=code, claim=claim, delta=delta,
                             neighbouring=str(made.get("neighbouring", "add/remove one record")), params=params,
                             rng=rng_kind(code, made.get("rng"), 2, "seed", f"plugin {spec}"),
                             packages=imported_packages(spaces, loaded),
                             mechanism=declared_mechanism(spec, made.get("mechanism")))
    if kind == "mechanism":
        if not callable(code):
            raise UserError(f"plugin {spec}: field 'mechanism' must be a function f(data, rng) returning one output")
        pair = made.get("neighbours")
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
            raise UserError(f"plugin {spec}: field 'neighbours' must be a pair (D, D_prime) of datasets")
        return MechanismPlugin(spec=spec, name=name,
                               description=str(made.get("description", f"user mechanism {spec}")), mechanism=code,
                               neighbours=(pair[0], pair[1]), claim=claim, delta=delta,
                               neighbouring=str(made.get("neighbouring", "as given by the user")), params=params,
                               rng=rng_kind(code, made.get("rng"), 1, "generator", f"plugin {spec}"),
                               packages=imported_packages(spaces, loaded))
    raise UserError(f"plugin {spec}: field 'kind' must be 'trainer', 'mechanism', 'model' or 'lm', got {kind!r}")
    raise UserError(f"plugin {spec}: field 'kind' must be 'trainer', 'lm_trainer', 'mechanism' or 'model', got "
                    f"{kind!r}")


def _lm_trainer(spec: str, made: dict, loaded: Iterable[str], namespaces: Iterable[dict]) -> TrainerPlugin:
    """A ``{"kind": "lm_trainer", ...}`` dict as a trainer plugin over texts (:mod:`targets.plugins.lm`); no
    ``"claim"``: non-private training, audited black-box against ``--epsilon``/``--delta``."""
    fields = lm_trainer_fields(spec, made)
    if "claim" not in made:
        claim, delta = None, check_delta(made.get("delta", PURE_DP_DELTA), f"plugin {spec}: delta", positive=True)
    elif made["claim"] == OPACUS_CLAIM:
        claim, delta = None, check_delta(made.get("delta", PURE_DP_DELTA), f"plugin {spec}: delta of the Opacus claim",
                                         positive=True)
    else:
        claim, delta = claim_from_plugin(spec, made["claim"])
    params = made.get("params", {})
    if not isinstance(params, dict):
        raise UserError(f"plugin {spec}: field 'params' must be a dict")
    return TrainerPlugin(spec=spec, name=str(made.get("name", spec)), claim=claim, delta=delta, params=params,
                         packages=imported_packages([made, *namespaces, getattr(made["train"], "__globals__", {})],
                                                    loaded), **fields)
