"""User plugin targets: ``--target some.module:factory`` audits the user's own code.

``factory()`` returns a plain dict — no import of this project needed — in one of two forms:

* trainer: ``{"kind": "trainer", "dataset": "mnist" | (X, y), "train": train,
  "claim": {"epsilon": E, "delta": D}}`` with ``train(X, y, seed) -> predict_proba`` and
  ``predict_proba(X) -> ndarray (n, n_classes)``. Audited black-box by ``run dp`` (the audit
  inserts a canary into about half of many trainings and scores it with the model's loss).
* mechanism: ``{"kind": "mechanism", "mechanism": f, "neighbours": (D, D_prime),
  "claim": {"epsilon": E, "delta": D}}`` with ``f(data, rng) -> ndarray`` releasing one output
  (``rng`` a numpy Generator). Audited by ``run mechanism``; ``D_prime`` is the world "with the
  target record".

Optional keys: ``"name"`` and ``"description"`` (for reports), ``"neighbouring"`` (text),
``"params"`` (a JSON-serialisable dict shown in reports). A DP-SGD trainer may add its accounting to
the claim, ``"dpsgd": {"noise_multiplier": s, "sample_rate": q, "steps": T}``: the audit then
compares against the exact DP-SGD tradeoff curve (PLD accountant) instead of the (eps, delta)
curve, and checks the stated epsilon is what that accounting gives. Every problem is a one-line
:class:`audit.errors.UserError` naming the bad field.

Built-in plugin targets (``BUILTIN_PLUGINS``) are named like any target: ``opacus_mnist`` and the
DP-SGD controls of :mod:`targets.dpsgd_controls`.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from audit.errors import TargetCodeError, UserError
from audit.theory.checks import check_delta, check_epsilon
from audit.theory.claims import ApproxDPClaim, PrivacyClaim, PureDPClaim

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
}


def plugin_spec_for(target: str) -> str | None:
    """The plugin spec ``target`` stands for (itself, or a built-in plugin's), or None."""
    if target in BUILTIN_PLUGINS:
        return BUILTIN_PLUGINS[target][0]
    return target if ":" in target else None


def is_plugin_spec(target: str) -> bool:
    """Whether ``target`` names a plugin (``module:factory`` or a built-in plugin name)."""
    return plugin_spec_for(target) is not None


@dataclass(frozen=True)
class TrainerPlugin:
    """A validated trainer plugin."""

    spec: str
    name: str
    description: str
    dataset: str | tuple[np.ndarray, np.ndarray]
    train: Callable[[np.ndarray, np.ndarray, int], Callable[[np.ndarray], np.ndarray]]
    claim: PrivacyClaim
    delta: float
    neighbouring: str
    params: dict


@dataclass(frozen=True)
class MechanismPlugin:
    """A validated mechanism plugin."""

    spec: str
    name: str
    description: str
    mechanism: Callable[[Any, np.random.Generator], Any]
    neighbours: tuple[Any, Any]
    claim: PrivacyClaim
    delta: float
    neighbouring: str
    params: dict


def claim_from_plugin(spec: str, claim: Any) -> tuple[PrivacyClaim, float]:
    """(claim, delta) from a plugin's ``{"epsilon": E, "delta": D}``; D = 0 means pure DP."""
    if not isinstance(claim, dict):
        raise UserError(f"plugin {spec}: field 'claim' must be a dict {{'epsilon': E, 'delta': D}}, "
                        f"got {type(claim).__name__}")
    try:
        epsilon = float(claim["epsilon"])
        delta = float(claim.get("delta", 0.0))
    except KeyError:
        raise UserError(f"plugin {spec}: field 'claim' needs an 'epsilon'") from None
    except (TypeError, ValueError):
        raise UserError(f"plugin {spec}: 'claim' epsilon and delta must be numbers") from None
    check_epsilon(epsilon, f"plugin {spec}: claim epsilon", positive=True)
    check_delta(delta, f"plugin {spec}: claim delta")
    if "dpsgd" in claim:
        return _dpsgd_claim(spec, claim["dpsgd"], epsilon, delta), delta
    if delta == 0:
        return PureDPClaim(epsilon), 0.0
    return ApproxDPClaim(epsilon, delta), delta


def _dpsgd_claim(spec: str, accounting: Any, epsilon: float, delta: float) -> PrivacyClaim:
    """The DP-SGD claim of ``"dpsgd": {...}``, checked against the stated (epsilon, delta)."""
    from audit.theory.dpsgd import DPSGDClaim

    if delta == 0:
        raise UserError(f"plugin {spec}: a 'dpsgd' claim needs delta > 0")
    try:
        claim = DPSGDClaim(float(accounting["noise_multiplier"]), float(accounting["sample_rate"]),
                           int(accounting["steps"]))
    except (KeyError, TypeError, ValueError):
        raise UserError(f"plugin {spec}: claim 'dpsgd' must be {{'noise_multiplier': s, 'sample_rate': q, "
                        f"'steps': T}} with numbers") from None
    actual = claim.epsilon(delta)
    if actual > epsilon * 1.001 + 1e-9:
        raise UserError(f"plugin {spec}: its 'dpsgd' accounting gives epsilon {actual:.4f} at delta {delta:g}, "
                        f"more than the stated {epsilon:g}")
    return claim


def _load_dict(spec: str) -> dict:
    if not _SPEC.match(spec):
        raise UserError(f"plugin target {spec!r} must look like package.module:factory")
    module_name, attr = spec.split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UserError(f"cannot import plugin module {module_name!r} ({exc}); put it on PYTHONPATH or run from "
                        f"its folder") from None
    except Exception as exc:  # the user's module failed while importing: the target's own code raised
        raise TargetCodeError(f"plugin module {module_name!r} raised {type(exc).__name__} on import: {exc}") from exc
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise UserError(f"plugin module {module_name!r} has no callable {attr!r}")
    try:
        made = factory()
    except Exception as exc:
        raise TargetCodeError(f"plugin factory {spec} raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(made, dict):
        raise UserError(f"plugin factory {spec} must return a dict, got {type(made).__name__}")
    return made


def _dataset_field(spec: str, value: Any) -> str | tuple[np.ndarray, np.ndarray]:
    from targets.datasets import DATASETS

    if isinstance(value, str):
        if value not in DATASETS:
            raise UserError(f"plugin {spec}: unknown dataset {value!r} in field 'dataset'; use one of "
                            f"{', '.join(DATASETS)} or a tuple (X, y)")
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


def load_plugin(spec: str) -> TrainerPlugin | MechanismPlugin:
    """Import ``module:factory`` (or a built-in plugin name), call it and validate the dict."""
    resolved = plugin_spec_for(spec) or spec
    return plugin_from_dict(spec, _load_dict(resolved))


def plugin_from_dict(spec: str, made: dict) -> TrainerPlugin | MechanismPlugin:
    """Validate a plugin dict (``spec`` names it in errors and reports)."""
    if not isinstance(made, dict):
        raise UserError(f"plugin {spec} must be a dict, got {type(made).__name__}")
    kind = made.get("kind")
    claim, delta = claim_from_plugin(spec, made.get("claim"))
    name = str(made.get("name", spec))
    params = made.get("params", {})
    if not isinstance(params, dict):
        raise UserError(f"plugin {spec}: field 'params' must be a dict")
    if kind == "trainer":
        if not callable(made.get("train")):
            raise UserError(f"plugin {spec}: field 'train' must be a function train(X, y, seed) -> predict_proba")
        dataset = _dataset_field(spec, made.get("dataset"))
        return TrainerPlugin(spec, name, str(made.get("description", f"user trainer {spec}")), dataset,
                             made["train"], claim, delta, str(made.get("neighbouring", "add/remove one record")),
                             params)
    if kind == "mechanism":
        if not callable(made.get("mechanism")):
            raise UserError(f"plugin {spec}: field 'mechanism' must be a function f(data, rng) -> ndarray")
        pair = made.get("neighbours")
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
            raise UserError(f"plugin {spec}: field 'neighbours' must be a pair (D, D_prime) of datasets")
        return MechanismPlugin(spec, name, str(made.get("description", f"user mechanism {spec}")), made["mechanism"],
                               (pair[0], pair[1]), claim, delta, str(made.get("neighbouring", "as given by the user")),
                               params)
    raise UserError(f"plugin {spec}: field 'kind' must be 'trainer' or 'mechanism', got {kind!r}")
