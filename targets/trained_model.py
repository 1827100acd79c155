"""A model that already exists: the contract of ``--target module:factory`` for membership audits that
do not retrain it, parsed and validated.

``factory()`` returns a plain dict (no import of this project needed)::

    {"kind": "model",
     "predict_proba": f,             # f(X) -> (n, n_classes) probabilities; or a scikit-learn
                                     # estimator (its predict_proba), or a torch nn.Module (softmax of
                                     # its outputs, eval mode, no grad, batched on CPU/CUDA)
     # or, instead of "predict_proba", a torch model stored as safetensors (never a pickle):
     "architecture": Net,            # an nn.Module, or a callable returning one
     "weights": "model.safetensors",
     "members": data, "nonmembers": data,
     # optional:
     "train": train,                 # train(X, y, seed) -> predict_proba-like, for reference models
     "population": data,             # records drawn like the training set (unusual records too) that are
                                     # in neither set: what reference models train on (and RMIA's
                                     # population samples)
     "training_size": n,             # records the model was trained on, when more than the members given
                                     # (default: the number of members); reference models train on as many
     "claim": {"epsilon": E, "delta": D},  # as for trainer plugins (targets.plugins.loading.claim_from_plugin)
     "membership": "independent-coins" | "seeded-split:<how the split was drawn>",
     "name": ..., "description": ..., "params": {...},
     "device": "auto" | "cpu" | "cuda",   # where a torch module runs: a module you give (or your train
                                     # returns) stays where it is unless you name a device (then it is moved
                                     # there); architecture + weights: "auto" (CUDA when available)
     "outputs": "logits" | "probabilities",  # what an nn.Module returns (default logits)
     "batch_size": 1024, "rng": ...}

``data`` is ``(X, y)``, ``{"X": X, "y": y}``, a ``.npz`` (arrays X, y) or ``.csv`` path (label in the
last column, or ``{"path": p, "label_column": j}``), a built-in dataset with indices
(``{"dataset": "mnist", "indices": [...]}``, :mod:`targets.datasets`) or a
:class:`targets.datasets.Dataset`. Labels are required: membership scores read the model's
probability of each record's label.

``"membership"`` says how members were chosen: ``"independent-coins"`` (each candidate record was
included by its own fair coin: the one-run epsilon lower bounds of docs/references.md, "One-run
auditing", apply), ``"seeded-split:..."`` (a seeded random split: attack AUCs are meaningful when the
blind split check passes, but no epsilon bound), absent (unstated: the blind split check,
:func:`audit.stats.split_check.blind_split_check`, is the only evidence the split is fair;
docs/references.md, "Blind split check").

:func:`load_trained_model` returns a :class:`TrainedModel` after checking, each failure one line
(:class:`audit.errors.UserError`, naming the fix): empty sets, labels, feature shapes that differ
between members, non-members and the model's input, records present in both sets (rows hashed),
and a probe of ``predict_proba`` (shape, NaN, negative values, rows not summing to 1).
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from audit.errors import TargetCodeError, UserError
from audit.theory.claims import PrivacyClaim
from targets.data_files import load_array_file, read_csv_numbers
from targets.datasets import DATA_FILE_SUFFIXES, DATASETS, Dataset, load_dataset
from targets.plugins.loading import ModelPlugin, claim_from_plugin, import_factory, imported_packages
from targets.plugins.rng import rng_kind, trainer_args
from targets.threads import thread_limit
from targets.training import resolve_device

__all__ = ["TrainedSubject", "TrainedModel", "load_trained_model", "model_from_dict", "load_model_data",
           "as_predict_proba", "sklearn_predict_proba", "torch_predict_proba", "load_safetensors_module", "shared_rows",
           "check_probabilities", "MEMBERSHIP_FORMS", "DEFAULT_BATCH", "PROBABILITY_TOLERANCE", "PROBE_RECORDS"]

#: ``"membership"`` values: the statement of how members were chosen.
MEMBERSHIP_FORMS = ("independent-coins", "seeded-split:<description>")
#: Records per ``predict_proba`` call.
DEFAULT_BATCH = 1024
#: Largest allowed |sum of a row - 1| of ``predict_proba``'s output.
PROBABILITY_TOLERANCE = 1e-3
#: Records of each set the model is probed on while loading.
PROBE_RECORDS = 8


def check_probabilities(proba: Any, n: int, what: str, n_classes: int | None = None,
                        tolerance: float = PROBABILITY_TOLERANCE) -> np.ndarray:
    """``proba`` as float64 (n, classes), or a one-line UserError: wrong shape, NaN/inf, negative
    values, or rows whose sum is off 1 by more than ``tolerance`` (the fix: return softmax outputs)."""
    try:
        out = np.asarray(proba, dtype=np.float64)
    except (TypeError, ValueError):
        raise UserError(f"{what} must return an array of probabilities (n, n_classes), got "
                        f"{type(proba).__name__}") from None
    want = f"({n}, {n_classes})" if n_classes else f"({n}, n_classes >= 2)"
    if out.ndim != 2 or out.shape[0] != n or out.shape[1] < 2 or (n_classes and out.shape[1] != n_classes):
        raise UserError(f"{what} must return probabilities of shape {want} for {n} records, got shape {out.shape}")
    if not np.all(np.isfinite(out)):
        raise UserError(f"{what} returned NaN or infinity; return finite probabilities (e.g. softmax of the logits)")
    if out.min() < 0:
        raise UserError(f"{what} returned negative values ({out.min():.3g}); return probabilities, e.g. softmax of "
                        f"the logits")
    sums = out.sum(axis=1)
    worst = int(np.argmax(np.abs(sums - 1))) if n else 0
    if n and abs(sums[worst] - 1) > tolerance:
        raise UserError(f"{what} returned a row summing to {sums[worst]:.6g} (more than {tolerance:g} from 1); return "
                        f"probabilities over all classes, e.g. softmax of the logits")
    return out


@dataclass(frozen=True, eq=False, kw_only=True)
class TrainedSubject:
    """A model that ``run membership`` audits without a game, whatever its records: what a trained classifier
    (:class:`TrainedModel`, labelled records) and a trained language model (:class:`targets.lm.contract.TrainedLM`,
    texts) share. Each supplies its ``members`` and ``nonmembers`` (and, for reference models, ``population``);
    the runner checks the split and queries the model (:mod:`audit.membership.runner`).

    ``records`` names what the subject's records are, ``"records"`` or ``"texts"`` (the contract's answer to "is
    this a language model" once it is loaded). ``train`` (or None) fits reference models (``fit_reference``),
    taking randomness ``rng`` (:mod:`targets.plugins.rng`). ``claim`` (or None) is audited at ``delta``.
    ``membership`` is ``"independent-coins"``, ``"seeded-split"`` or ``"unstated"``, ``membership_note`` its
    description; ``training_size``: how many records the model was trained on (the members, unless the factory
    says more); ``params`` and ``packages`` as config.json records them.
    """

    records: ClassVar[str]
    spec: str
    name: str
    description: str
    claim: PrivacyClaim | None
    delta: float
    membership: str
    membership_note: str
    train: Callable[..., Any] | None = None
    training_size: int | None = None
    params: dict = field(default_factory=dict)
    rng: str = "seed"
    packages: dict = field(default_factory=dict)

    @property
    def allows_epsilon_bound(self) -> bool:
        """Whether membership was decided by independent coins (what an epsilon lower bound needs)."""
        return self.membership == "independent-coins"


@dataclass(frozen=True, eq=False, kw_only=True)
class TrainedModel(TrainedSubject):
    """A validated trained model and its member / non-member records (module docstring; the fields it shares
    with a language model: :class:`TrainedSubject`).

    ``model`` is the raw probability function (one batch in, (batch, n_classes) out); use
    :meth:`predict_proba`, which batches and checks it. ``members``/``nonmembers`` share
    ``input_shape``; ``n_classes`` is the width of the model's output. ``population`` (or None): records
    in neither set, which the model was not trained on, for reference models; ``device`` and ``outputs``
    apply to the torch modules ``train`` returns as to the model (:func:`torch_predict_proba`).
    """

    records: ClassVar[str] = "records"
    model: Callable[[np.ndarray], Any]
    members: Dataset
    nonmembers: Dataset
    n_classes: int
    input_shape: tuple[int, ...]
    model_kind: str
    batch_size: int = DEFAULT_BATCH
    population: Dataset | None = None
    device: str | None = None
    outputs: str = "logits"

    def predict_proba(self, X: np.ndarray, progress: Callable[[int, int], None] | None = None) -> np.ndarray:
        """Probabilities (n, n_classes) of ``model`` on ``X`` in batches of ``batch_size``, each batch checked
        (:func:`check_probabilities`) and run under the plugin thread policy (:func:`targets.threads.thread_limit`);
        ``progress(done, total)`` is called after every batch. The model's own exceptions are
        :class:`audit.errors.TargetCodeError`."""
        return _batched(self.model, np.asarray(X), self.batch_size, f"predict_proba of {self.spec}", self.n_classes,
                        progress)

    def fit_reference(self, X: np.ndarray, y: np.ndarray, seed: int) -> Callable[[np.ndarray], np.ndarray]:
        """A reference model from the user's ``train(X, y, seed)`` (its randomness adapted), as a batched,
        checked probability function; UserError when the target has no ``train``."""
        if self.train is None:
            raise UserError(f"model target {self.spec} has no 'train'; add train(X, y, seed) -> predict_proba to its "
                            f"dict to audit with reference models")
        try:
            with thread_limit(None):
                made = self.train(X, y, *trainer_args(self.rng, int(seed)))
        except Exception as exc:
            raise TargetCodeError(f"train of {self.spec} raised {type(exc).__name__}: {exc}") from exc
        fn, _ = as_predict_proba(made, f"what train of {self.spec} returned", self.device, self.outputs)
        what, width, batch = f"predict_proba of a reference model of {self.spec}", self.n_classes, self.batch_size
        return lambda Z, progress=None: _batched(fn, np.asarray(Z), batch, what, width, progress)

    def to_dict(self) -> dict:
        """What config.json / results.json record about the target (no arrays, no callables)."""
        return {"spec": self.spec, "name": self.name, "description": self.description, "model": self.model_kind,
                "n_members": len(self.members), "n_nonmembers": len(self.nonmembers), "n_classes": self.n_classes,
                "input_shape": list(self.input_shape), "members_source": self.members.source,
                "nonmembers_source": self.nonmembers.source, "membership": self.membership,
                "n_population": 0 if self.population is None else len(self.population),
                "training_size": self.training_size,
                "membership_note": self.membership_note, "reference_training": self.train is not None,
                "claim": None if self.claim is None else self.claim.description, "delta": self.delta,
                "params": self.params, "packages": self.packages}


def _batched(fn: Callable, X: np.ndarray, batch: int, what: str, n_classes: int | None,
             progress: Callable[[int, int], None] | None) -> np.ndarray:
    """``fn`` over ``X`` in batches under the plugin thread policy, each output checked."""
    parts = []
    for start in range(0, len(X), batch):
        chunk = X[start:start + batch]
        try:
            with thread_limit(None):
                out = fn(chunk)
        except Exception as exc:
            raise TargetCodeError(f"{what} raised {type(exc).__name__}: {exc}") from exc
        parts.append(check_probabilities(out, len(chunk), what, n_classes))
        if progress is not None:
            progress(start + len(chunk), len(X))
    if not parts:
        return np.zeros((0, n_classes or 0))
    return np.concatenate(parts)


def sklearn_predict_proba(estimator: Any, what: str) -> Callable[[np.ndarray], np.ndarray]:
    """A fitted scikit-learn classifier's ``predict_proba`` on records flattened to rows, its columns placed at
    the integer labels of ``classes_`` (so column j is label j, missing labels get probability 0)."""
    classes = getattr(estimator, "classes_", None)
    if classes is None:
        raise UserError(f"{what}: the estimator has no classes_; fit it before returning it")
    classes = np.asarray(classes)
    if not np.issubdtype(classes.dtype, np.integer) or classes.min() < 0:
        raise UserError(f"{what}: the estimator's classes_ must be non-negative integer labels, got {classes[:5]}; "
                        f"fit it on integer labels 0..n_classes-1")
    width = int(classes.max()) + 1

    def predict(X: np.ndarray) -> np.ndarray:
        out = np.asarray(estimator.predict_proba(np.asarray(X).reshape(len(X), -1)), dtype=np.float64)
        if width == len(classes) and np.array_equal(classes, np.arange(width)):
            return out
        full = np.zeros((len(out), width))
        full[:, classes] = out
        return full

    predict.n_features_in = getattr(estimator, "n_features_in_", None)  # type: ignore[attr-defined]
    return predict


def torch_predict_proba(module: Any, device: str | None = None,
                        outputs: str = "logits") -> Callable[[np.ndarray], Any]:
    """A torch ``nn.Module`` as a probability function: no grad (``torch.inference_mode``), in eval mode
    during each call (the module's own mode is restored after it), on ``device`` (None: where the module's
    parameters are, so the user's module is never moved; "auto": CUDA when available, "cpu", "cuda": the
    module is moved there); softmax of its outputs (in float64) unless ``outputs`` is ``"probabilities"``;
    results on the CPU as numpy."""
    if outputs not in ("logits", "probabilities"):
        raise UserError(f"field 'outputs' must be 'logits' or 'probabilities', got {outputs!r}")
    first = next(module.parameters(), None)
    if device is None:
        dev = first.device if first is not None else torch.device("cpu")
    else:
        dev = resolve_device(device)
        module = module.to(dev)
    dtype = first.dtype if first is not None and first.is_floating_point() else torch.float32

    def predict(X: np.ndarray) -> np.ndarray:
        was_training = module.training
        module.eval()
        try:
            with torch.inference_mode():
                out = module(torch.as_tensor(np.asarray(X), device=dev).to(dtype)).double()
                if outputs == "logits":
                    out = torch.softmax(out, dim=-1)
                return out.cpu().numpy()
        finally:
            module.train(was_training)

    return predict


def load_safetensors_module(architecture: Any, weights: Any, what: str) -> Any:
    """``architecture`` (an nn.Module, or a callable returning one) with its parameters loaded from the
    safetensors file ``weights`` (``safetensors.torch.load_file``: no pickle), every key matched."""

    if not isinstance(architecture, torch.nn.Module):
        if not callable(architecture):
            raise UserError(f"{what}: field 'architecture' must be a torch nn.Module or a callable returning one")
        try:
            architecture = architecture()
        except Exception as exc:
            raise TargetCodeError(f"{what}: 'architecture' raised {type(exc).__name__}: {exc}") from exc
        if not isinstance(architecture, torch.nn.Module):
            raise UserError(f"{what}: 'architecture' must return a torch nn.Module, got {type(architecture).__name__}")
    path = Path(os.fspath(weights)).expanduser() if isinstance(weights, (str, os.PathLike)) else None
    if path is None or path.suffix != ".safetensors" or not path.is_file():
        raise UserError(f"{what}: field 'weights' must be an existing .safetensors file (safetensors.torch.save_file"
                        f"(model.state_dict(), path)), got {weights!r}")
    try:
        state = load_file(str(path), device="cpu")
    except (SafetensorError, OSError) as exc:
        raise UserError(f"{what}: cannot read {path} as safetensors ({exc}); save it with "
                        f"safetensors.torch.save_file") from None
    try:
        architecture.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        summary = " ".join(str(exc).split())[:300]
        raise UserError(f"{what}: the weights in {path.name} do not fit the architecture ({summary}); give the "
                        f"architecture the weights were saved from") from None
    return architecture


def as_predict_proba(obj: Any, what: str, device: str | None = None,
                     outputs: str = "logits") -> tuple[Callable[[np.ndarray], Any], str]:
    """(probability function, kind) for a torch nn.Module (``device`` and ``outputs`` as in
    :func:`torch_predict_proba`), a scikit-learn estimator (has ``predict_proba``) or a plain callable, in that
    order of checks."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.nn.Module):
        return torch_predict_proba(obj, device, outputs), f"torch {type(obj).__name__}"
    method = getattr(obj, "predict_proba", None)
    if callable(method) and not isinstance(obj, type):
        return sklearn_predict_proba(obj, what), f"scikit-learn {type(obj).__name__}"
    if callable(obj):
        return obj, "predict_proba function"
    raise UserError(f"{what} must be a function X -> probabilities, a fitted scikit-learn classifier or a torch "
                    f"nn.Module, got {type(obj).__name__}")


def _labelled(X: Any, y: Any, what: str, name: str, source: str) -> Dataset:
    """(X, y) arrays as a Dataset: X (n, ...) numbers, y (n,) non-negative integer labels."""
    try:
        X, y = np.asarray(X), np.asarray(y)
    except (TypeError, ValueError):
        raise UserError(f"{what}: X and y must be arrays") from None
    if X.ndim < 2 or len(X) == 0 or X[0].size == 0:
        raise UserError(f"{what}: X must be a non-empty array (n, features...) with n >= 1, got shape {X.shape}")
    if y.ndim != 1 or len(y) != len(X):
        raise UserError(f"{what}: y must hold one label per record, shape ({len(X)},), got {y.shape}")
    if not (np.issubdtype(X.dtype, np.number) or X.dtype == bool) or not np.all(np.isfinite(X)):
        raise UserError(f"{what}: X must be finite numbers (no NaN or infinity); clean or impute the records")
    if not np.issubdtype(y.dtype, np.number) or not np.all(np.isfinite(y)) or np.any(y < 0) \
            or np.any(y != np.round(y)):
        raise UserError(f"{what}: labels y must be non-negative integers 0..n_classes-1")
    y = y.astype(np.int64)
    return Dataset(X.astype(np.float32), y, name, int(y.max()) + 1, tuple(X.shape[1:]), source)


def _csv_with_label(path: Path, column: Any, what: str) -> Dataset:
    """A .csv of numbers (a header line skipped) with the label in column ``column`` (negative counts from the end)."""
    if not path.is_file():
        raise UserError(f"{what}: data file {path} not found; give the path of an existing .csv file")
    table = read_csv_numbers(path, what)
    if int(column) != column or not -table.shape[1] <= column < table.shape[1]:
        raise UserError(f"{what}: label_column {column!r} is not a column of {path.name} ({table.shape[1]} columns)")
    column = int(column) % table.shape[1]
    return _labelled(np.delete(table, column, axis=1), table[:, column], what, path.name, f"user file {path}")


def _dataset_indices(spec: dict, what: str, data_dir: str | os.PathLike | None) -> Dataset:
    """``{"dataset": name, "indices": [...]}``: those records of a built-in dataset."""
    name = spec["dataset"]
    if name not in DATASETS:
        raise UserError(f"{what}: unknown dataset {name!r}; use one of {', '.join(DATASETS)}")
    if "indices" not in spec:
        raise UserError(f"{what}: give the records of {name} as {{'dataset': {name!r}, 'indices': [...]}}")
    indices = np.asarray(spec["indices"])
    data = load_dataset(name, data_dir)
    if indices.ndim != 1 or indices.size == 0 or not np.issubdtype(indices.dtype, np.integer):
        raise UserError(f"{what}: 'indices' must be a non-empty list of integer record numbers of {name}")
    if indices.min() < 0 or indices.max() >= len(data):
        raise UserError(f"{what}: 'indices' must lie in 0..{len(data) - 1} ({name} has {len(data)} records)")
    return data.subset(indices)


def load_model_data(value: Any, what: str, data_dir: str | os.PathLike | None = None) -> Dataset:
    """Members or non-members in any of the forms of the module docstring, as a :class:`Dataset`."""
    if isinstance(value, Dataset):
        return _labelled(value.X, value.y, what, value.name, value.source)
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if isinstance(value, str):
        if value in DATASETS:
            raise UserError(f"{what}: a built-in dataset needs its record numbers: {{'dataset': {value!r}, "
                            f"'indices': [...]}}")
        if not value.endswith(DATA_FILE_SUFFIXES):
            raise UserError(f"{what}: {value!r} is not a .npz or .csv file; give (X, y), {{'X': X, 'y': y}}, a file "
                            f"or {{'dataset': name, 'indices': [...]}}")

        data = load_array_file(value)
        return _labelled(data.X, data.y, what, data.name, data.source)
    if isinstance(value, dict):
        if "dataset" in value:
            return _dataset_indices(value, what, data_dir)
        if "path" in value:
            path = Path(os.fspath(value["path"])).expanduser()
            if path.suffix != ".csv":
                return load_model_data(path, what, data_dir)
            return _csv_with_label(path, value.get("label_column", -1), what)
        if "X" in value and "y" in value:
            return _labelled(value["X"], value["y"], what, what, "arrays from the factory")
        raise UserError(f"{what}: a dict must be {{'X': X, 'y': y}}, {{'path': file}} or {{'dataset': name, "
                        f"'indices': [...]}}; got keys {sorted(value)}")
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return _labelled(value[0], value[1], what, what, "arrays from the factory")
    raise UserError(f"{what}: give (X, y), {{'X': X, 'y': y}}, a .npz/.csv path or {{'dataset': name, "
                    f"'indices': [...]}}; got {type(value).__name__}")


def _row_digests(X: np.ndarray) -> list[bytes]:
    """A 16-byte BLAKE2b digest of each record's float32 bytes (-0.0 counted as 0.0)."""
    rows = np.ascontiguousarray(X.reshape(len(X), -1).astype(np.float32) + np.float32(0.0))
    return [hashlib.blake2b(row.tobytes(), digest_size=16).digest() for row in rows]


def shared_rows(members: np.ndarray, nonmembers: np.ndarray) -> list[tuple[int, int]]:
    """(member index, non-member index) of every member whose record also appears, byte for byte as float32,
    among the non-members (rows hashed, :func:`_row_digests`)."""
    where = {digest: j for j, digest in enumerate(_row_digests(nonmembers))}
    return [(i, where[d]) for i, d in enumerate(_row_digests(members)) if d in where]


def membership_statement(value: Any, spec: str) -> tuple[str, str]:
    """(kind, note) of a model plugin's ``"membership"`` statement (``spec`` names the plugin in errors).

    Args:
        value: the statement: None, ``"independent-coins"`` or ``"seeded-split:<how>"``.
        spec: the plugin, for the error message.

    Returns:
        The kind of membership and a note saying how members were chosen.

    Raises:
        UserError: for any other statement.
    """
    if value is None:
        return "unstated", "how members were chosen is not stated; only the blind split check speaks to the split"
    if value == "independent-coins":
        return "independent-coins", "each candidate record was included by an independent fair coin"
    if isinstance(value, str) and value.startswith("seeded-split:") and value.split(":", 1)[1].strip():
        return "seeded-split", value.split(":", 1)[1].strip()
    raise UserError(f"model target {spec}: field 'membership' must be 'independent-coins' or 'seeded-split:<how the "
                    f"split was drawn>' (or absent), got {value!r}")


def _model_callable(spec: str, made: dict) -> tuple[Callable[[np.ndarray], Any], str]:
    """The probability function of ``"predict_proba"`` or of ``"architecture"`` + ``"weights"`` (exactly one)."""
    what = f"model target {spec}"
    device, outputs = made.get("device"), made.get("outputs", "logits")
    if device is not None and not isinstance(device, str):
        raise UserError(f"{what}: field 'device' must be 'auto', 'cpu' or 'cuda', got {device!r}")
    if outputs not in ("logits", "probabilities"):
        raise UserError(f"{what}: field 'outputs' (what a torch module returns) must be 'logits' or 'probabilities', "
                        f"got {outputs!r}")
    if "predict_proba" in made and "architecture" not in made:
        return as_predict_proba(made["predict_proba"], f"{what}: field 'predict_proba'", device, outputs)
    if "architecture" in made and "predict_proba" not in made:
        if "weights" not in made:
            raise UserError(f"{what}: 'architecture' needs 'weights', the path of its .safetensors file")
        module = load_safetensors_module(made["architecture"], made["weights"], what)
        return (torch_predict_proba(module, device or "auto", outputs),
                f"torch {type(module).__name__} from safetensors")
    raise UserError(f"{what}: give exactly one of 'predict_proba' (a function, scikit-learn classifier or torch "
                    f"module) or 'architecture' with 'weights' (a .safetensors file)")


def _probe(spec: str, fn: Callable, members: Dataset, nonmembers: Dataset) -> int:
    """The model's number of classes, from its output on a few records of each set (module docstring checks)."""
    what = f"predict_proba of model target {spec}"
    features = int(np.prod(members.shape))
    expected = getattr(fn, "n_features_in", None)
    if expected is not None and int(expected) != features:
        raise UserError(f"model target {spec}: the model takes {expected} features per record but members and "
                        f"non-members have {features} (shape {members.shape}); give records in the model's input "
                        f"shape")
    X = np.concatenate([members.X[:PROBE_RECORDS], nonmembers.X[:PROBE_RECORDS]])
    try:
        with thread_limit(None):
            out = fn(X)
    except Exception as exc:
        message = " ".join(str(exc).split())[:200]
        raise UserError(f"model target {spec}: predict_proba fails on records of shape {members.shape} "
                        f"({type(exc).__name__}: {message}); give members and non-members in the input shape the "
                        f"model takes") from None
    n_classes = check_probabilities(out, len(X), what).shape[1]
    top = max(int(members.y.max()), int(nonmembers.y.max()))
    if top >= n_classes:
        raise UserError(f"model target {spec}: labels go up to {top} but predict_proba returns {n_classes} columns; "
                        f"labels must be 0..{n_classes - 1}, one column per class")
    return n_classes


def _sets(spec: str, made: dict, data_dir: str | os.PathLike | None) -> tuple[Dataset, Dataset]:
    """Members and non-members, loaded and checked against each other (shapes, shared records)."""
    for key in ("members", "nonmembers"):
        if made.get(key) is None:
            raise UserError(f"model target {spec}: field {key!r} is missing; give the records as (X, y), a .npz/.csv "
                            f"path or {{'dataset': name, 'indices': [...]}}")
    members = load_model_data(made["members"], f"model target {spec}: members", data_dir)
    nonmembers = load_model_data(made["nonmembers"], f"model target {spec}: nonmembers", data_dir)
    if members.shape != nonmembers.shape:
        raise UserError(f"model target {spec}: members have records of shape {members.shape} and non-members "
                        f"{nonmembers.shape}; give both sets in the model's input shape")
    shared = shared_rows(members.X, nonmembers.X)
    if shared:
        i, j = shared[0]
        raise UserError(f"model target {spec}: {len(shared)} record(s) are both members and non-members (first: "
                        f"member {i} = non-member {j}); remove them from one of the sets")
    return members, nonmembers


def _population(spec: str, made: dict, members: Dataset, nonmembers: Dataset,
                data_dir: str | os.PathLike | None) -> Dataset | None:
    """The optional ``"population"`` records: members' shape, none of them a member or a non-member."""
    if made.get("population") is None:
        return None
    population = load_model_data(made["population"], f"model target {spec}: population", data_dir)
    if population.shape != members.shape:
        raise UserError(f"model target {spec}: population records have shape {population.shape}, members "
                        f"{members.shape}; give the population in the model's input shape")
    for name, other in (("members", members), ("non-members", nonmembers)):
        shared = shared_rows(population.X, other.X)
        if shared:
            raise UserError(f"model target {spec}: {len(shared)} population record(s) are also {name} (first: "
                            f"population {shared[0][0]}); the population must hold records in neither set")
    return population


def model_from_dict(spec: str, made: Any, data_dir: str | os.PathLike | None = None,
                    namespaces: list[dict] | None = None, loaded: set[str] | None = None) -> TrainedModel:
    """Validate a factory's dict (module docstring) into a :class:`TrainedModel`; ``spec`` names it in
    errors. ``namespaces``/``loaded`` add to what :func:`targets.plugins.loading.imported_packages` reads."""
    if not isinstance(made, dict):
        raise UserError(f"model target {spec} must be a dict, got {type(made).__name__}")
    if made.get("kind") != "model":
        raise UserError(f"model target {spec}: field 'kind' must be 'model', got {made.get('kind')!r}")
    members, nonmembers = _sets(spec, made, data_dir)
    fn, kind = _model_callable(spec, made)
    n_classes = _probe(spec, fn, members, nonmembers)
    train = made.get("train")
    if train is not None and not callable(train):
        raise UserError(f"model target {spec}: field 'train' must be a function train(X, y, seed) -> predict_proba")
    rng = rng_kind(train, made.get("rng"), 2, "seed", f"model target {spec}") if train is not None else "seed"
    claim, delta = claim_from_plugin(spec, made["claim"]) if made.get("claim") is not None else (None, 0.0)
    membership, note = membership_statement(made.get("membership"), spec)
    params = made.get("params", {})
    if not isinstance(params, dict):
        raise UserError(f"model target {spec}: field 'params' must be a dict")
    batch = made.get("batch_size", DEFAULT_BATCH)
    if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
        raise UserError(f"model target {spec}: field 'batch_size' must be a whole number >= 1, got {batch!r}")
    spaces = [made, *(namespaces or []), *(getattr(f, "__globals__", {}) for f in (made.get("predict_proba"), train))]
    population = _population(spec, made, members, nonmembers, data_dir)
    if population is not None and int(population.y.max()) >= n_classes:
        raise UserError(f"model target {spec}: population labels go up to {int(population.y.max())} but the model has "
                        f"{n_classes} classes")
    members, nonmembers = replace(members, n_classes=n_classes), replace(nonmembers, n_classes=n_classes)
    population = None if population is None else replace(population, n_classes=n_classes)
    training_size = made.get("training_size", len(members))
    if not isinstance(training_size, int) or isinstance(training_size, bool) or training_size < len(members):
        raise UserError(f"model target {spec}: field 'training_size' (records the model was trained on) must be a "
                        f"whole number >= the {len(members)} members, got {training_size!r}")
    return TrainedModel(spec=spec, name=str(made.get("name", spec)),
                        description=str(made.get("description", f"trained model {spec}")), model=fn, members=members,
                        nonmembers=nonmembers, n_classes=n_classes, input_shape=members.shape, train=train,
                        claim=claim, delta=delta, membership=membership, membership_note=note, model_kind=kind,
                        params=params, rng=rng, batch_size=batch, packages=imported_packages(spaces, loaded or ()),
                        population=population, training_size=training_size, device=made.get("device"),
                        outputs=made.get("outputs", "logits"))


def load_trained_model(obj: Any, data_dir: str | os.PathLike | None = None, spec: str | None = None) -> TrainedModel:
    """A :class:`TrainedModel` from ``"module:factory"``, a factory (zero-argument callable) or the dict a factory
    returns (module docstring). The factory runs under the plugin thread policy (:mod:`targets.threads`); its
    exceptions are :class:`audit.errors.TargetCodeError`, every invalid field a one-line UserError."""
    loaded: set[str] = set()
    if isinstance(obj, ModelPlugin):  # a factory already called by targets.plugins.loading.load_plugin
        return model_from_dict(obj.spec, obj.made, data_dir, list(obj.namespaces), set(obj.loaded))
    if isinstance(obj, str):
        spec = spec or obj
        obj, loaded = import_factory(obj, "model")
    if callable(obj) and not isinstance(obj, dict):
        spec = spec or f"{getattr(obj, '__module__', '?')}:{getattr(obj, '__name__', 'factory')}"
        namespaces = [getattr(obj, "__globals__", {})]
        before = set(sys.modules)
        try:
            with thread_limit(None):
                made = obj()
        except Exception as exc:
            raise TargetCodeError(f"model factory {spec} raised {type(exc).__name__}: {exc}") from exc
        return model_from_dict(spec, made, data_dir, namespaces, loaded | (set(sys.modules) - before))
    return model_from_dict(spec or "<dict>", obj, data_dir)
