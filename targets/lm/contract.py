"""A trained language model as a plugin: the contract of ``--target module:factory`` returning
``{"kind": "lm", ...}`` for ``run membership``, parsed and validated.

``factory()`` returns a plain dict (no import of this project needed)::

    {"kind": "lm",
     "logprobs": f,                  # f(texts: list[str]) -> one 1-D array per text: log p(token_t | tokens_<t)
                                     # of each token the model scores (natural log, <= 0)
     "members": [str, ...],          # texts the model was trained (fine-tuned) on
     "nonmembers": [str, ...],       # texts it was not trained on, drawn like the members
     # optional:
     "moments": g,                   # g(texts) -> one (T, 2) array per text, T as f's: the mean and standard
                                     # deviation of log p(z | tokens_<t) over z ~ p(. | tokens_<t) (Min-K%++)
     "base_logprobs": h,             # the model before fine-tuning, as f (reference-calibrated loss)
     "train": train,                 # train(texts, seed) -> a function like f: reference models, trained as
                                     # the model was, on "population" texts
     "population": [str, ...],       # texts drawn like the members, in neither set, never trained on
     "training_size": n,             # texts the model was trained on (default: the members); as many per reference
     "claim": {"epsilon": E, "delta": D},  # as for trainer plugins (targets.plugins.loading.claim_from_plugin)
     "membership": "independent-coins" | "seeded-split:<how the split was drawn>",
     "name": ..., "description": ..., "params": {...}, "batch_size": 64, "rng": ...}

``"membership"`` means what it means for a trained classifier (:mod:`targets.trained_model`): with
``"independent-coins"`` and a passed text blind split check (:func:`audit.stats.text_split_check.text_split_check`)
the one-run epsilon lower bound applies. The attacks are those of :mod:`attacks.lm_membership`: loss, zlib and
Min-K% need only ``logprobs``; Min-K%++ needs ``moments``; the reference-calibrated losses need ``base_logprobs``
(``reference_base``) or ``train`` and ``population`` (``reference``). Sources: docs/references.md, "Language
model membership" and "Blind split check".

:func:`lm_from_dict` returns a :class:`TrainedLM`; each failure is one line (:class:`audit.errors.UserError`)
naming the field and the fix: a field of the wrong type, too few texts for the blind check, texts in both sets,
and a probe of every function on a few texts (one array per text, finite log-probabilities <= 0, moments of
the right shape). The user's own exceptions are :class:`audit.errors.TargetCodeError`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from audit.errors import TargetCodeError, UserError
from audit.stats.split_check import DEFAULT_FOLDS, MIN_PER_FOLD
from targets.plugins.loading import PLUGIN_KEYS, check_plugin_keys, claim_from_plugin, imported_packages
from targets.plugins.rng import rng_kind, trainer_args
from targets.threads import thread_limit
from targets.trained_model import TrainedSubject, membership_statement

__all__ = ["TrainedLM", "lm_from_dict", "check_logprobs", "LM_KEYS", "MIN_TEXTS", "DEFAULT_LM_BATCH", "PROBE_TEXTS"]

#: Keys of an ``{"kind": "lm"}`` dict (module docstring).
LM_KEYS = PLUGIN_KEYS["lm"]
#: Fewest members (and non-members) the text blind split check can fold.
MIN_TEXTS = MIN_PER_FOLD * DEFAULT_FOLDS
#: Texts per call of the user's functions.
DEFAULT_LM_BATCH = 64
#: Texts of each set the functions are probed on while loading.
PROBE_TEXTS = 4


def check_logprobs(out: Any, texts: Sequence[str], what: str, moments: bool = False) -> list[np.ndarray]:
    """``out`` as one float64 array per text, or a one-line UserError: not one array per text, an empty array,
    NaN/inf, a log-probability above 0 (``moments``: (T, 2) arrays instead, a negative standard deviation)."""
    want = "one (T, 2) array per text" if moments else "one 1-D array of token log-probabilities per text"
    if isinstance(out, np.ndarray) and out.dtype != object and out.ndim == (3 if moments else 2):
        out = list(out)  # texts of equal length, stacked
    if not isinstance(out, (list, tuple)) or len(out) != len(texts):
        size = len(out) if isinstance(out, (list, tuple)) else type(out).__name__
        raise UserError(f"{what} must return {want} ({len(texts)} texts), got {size}")
    arrays = []
    for i, values in enumerate(out):
        try:
            a = np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError):
            raise UserError(f"{what} returned {type(values).__name__} for text {i}; return {want}") from None
        if (a.ndim != 2 or a.shape[1] != 2) if moments else a.ndim != 1:
            raise UserError(f"{what} returned shape {a.shape} for text {i}; return {want}")
        if len(a) == 0:
            raise UserError(f"{what} returned no token for text {i}; score at least one token of every text")
        if not np.all(np.isfinite(a)):
            raise UserError(f"{what} returned NaN or infinity for text {i}; return finite log-probabilities")
        if not moments and a.max() > 1e-9:
            raise UserError(f"{what} returned {a.max():.3g} > 0 for text {i}: return log-probabilities (log p), not "
                            f"probabilities or logits")
        if moments and a[:, 1].min() < 0:
            raise UserError(f"{what} returned a negative standard deviation for text {i}; column 1 is the std")
        arrays.append(a)
    return arrays


def _batched(fn: Callable, texts: Sequence[str], batch: int, what: str, moments: bool = False,
             progress: Callable[[int, int], None] | None = None) -> list[np.ndarray]:
    """``fn`` over ``texts`` in batches under the plugin thread policy, each output checked."""
    out: list[np.ndarray] = []
    for start in range(0, len(texts), batch):
        chunk = list(texts[start: start + batch])
        try:
            with thread_limit(None):
                made = fn(chunk)
        except Exception as exc:
            raise TargetCodeError(f"{what} raised {type(exc).__name__}: {exc}") from exc
        out.extend(check_logprobs(made, chunk, what, moments))
        if progress is not None:
            progress(start + len(chunk), len(texts))
    return out


@dataclass(frozen=True, eq=False, kw_only=True)
class TrainedLM(TrainedSubject):
    """A validated trained language model and its member / non-member texts (module docstring; the fields it
    shares with a trained classifier: :class:`targets.trained_model.TrainedSubject`).

    ``logprobs``, ``moments``, ``base_logprobs`` are the raw functions (None when not given); call them through
    :meth:`token_logprobs` and friends, which batch and check them. ``train(texts, *rng)`` (or None) fits
    reference models (:meth:`fit_reference`) on ``population`` texts. ``prepare`` (None for a plugin, whose
    model exists) trains a built-in target before it is queried and returns the seconds one training like
    those of the reference models took (for progress estimates).
    """

    records: ClassVar[str] = "texts"
    logprobs: Callable[[list[str]], Any]
    members: list[str]
    nonmembers: list[str]
    moments: Callable[[list[str]], Any] | None = None
    base_logprobs: Callable[[list[str]], Any] | None = None
    population: list[str] | None = None
    batch_size: int = DEFAULT_LM_BATCH
    model_kind: str = "language model (per-token log-probabilities)"
    source: str = "texts given by the plugin"
    prepare: Callable[[], float] | None = None

    def token_logprobs(self, texts: Sequence[str], progress: Callable[[int, int], None] | None = None,
                       base: bool = False) -> list[np.ndarray]:
        """The model's (``base``: the base model's) checked per-token log-probabilities of ``texts``."""
        fn = self.base_logprobs if base else self.logprobs
        what = f"{'base_logprobs' if base else 'logprobs'} of {self.spec}"
        return _batched(fn, texts, self.batch_size, what, progress=progress)

    def token_moments(self, texts: Sequence[str], progress: Callable[[int, int], None] | None = None
                      ) -> list[np.ndarray]:
        """The checked (mean, std) of the next-token log-probability at every scored token of ``texts``."""
        return _batched(self.moments, texts, self.batch_size, f"moments of {self.spec}", True, progress)

    def fit_reference(self, texts: list[str], seed: int) -> Callable[..., list[np.ndarray]]:
        """A reference model from ``train(texts, seed)`` as a batched, checked log-probability function."""
        if self.train is None:
            raise UserError(f"LM target {self.spec} has no 'train'; add train(texts, seed) -> logprobs to its dict")
        try:
            with thread_limit(None):
                made = self.train(list(texts), *trainer_args(self.rng, int(seed)))
        except Exception as exc:
            raise TargetCodeError(f"train of {self.spec} raised {type(exc).__name__}: {exc}") from exc
        if not callable(made):
            raise UserError(f"train of {self.spec} must return a function texts -> token log-probabilities, got "
                            f"{type(made).__name__}")
        what, batch = f"a reference model of {self.spec}", self.batch_size
        return lambda t, progress=None: _batched(made, t, batch, what, progress=progress)

    def to_dict(self) -> dict:
        """What config.json / results.json record about the target (no texts, no callables)."""
        return {"spec": self.spec, "name": self.name, "description": self.description, "model": self.model_kind,
                "n_members": len(self.members), "n_nonmembers": len(self.nonmembers), "source": self.source,
                "membership": self.membership, "membership_note": self.membership_note,
                "n_population": 0 if self.population is None else len(self.population),
                "training_size": self.training_size, "moments": self.moments is not None,
                "base_model": self.base_logprobs is not None, "reference_training": self.train is not None,
                "claim": None if self.claim is None else self.claim.description, "delta": self.delta,
                "params": self.params, "packages": self.packages}


def _texts(spec: str, made: dict, key: str, required: bool, least: int = 1) -> list[str] | None:
    value = made.get(key)
    if value is None:
        if required:
            raise UserError(f"LM target {spec}: field {key!r} is missing; give a list of texts")
        return None
    if isinstance(value, str) or not isinstance(value, Sequence) or not all(isinstance(t, str) for t in value):
        raise UserError(f"LM target {spec}: field {key!r} must be a list of strings (one text each)")
    if len(value) < least or any(not t for t in value):
        raise UserError(f"LM target {spec}: field {key!r} needs at least {least} non-empty texts, got {len(value)}")
    return list(value)


def _function(spec: str, made: dict, key: str, form: str) -> Callable | None:
    value = made.get(key)
    if value is not None and not callable(value):
        raise UserError(f"LM target {spec}: field {key!r} must be a function {form}, got {type(value).__name__}")
    return value


def _check_sets(spec: str, members: list[str], nonmembers: list[str], population: list[str] | None) -> None:
    shared = set(members) & set(nonmembers)
    if shared:
        raise UserError(f"LM target {spec}: {len(shared)} text(s) are both members and non-members (first: "
                        f"{next(iter(shared))[:40]!r}); each text belongs to one set")
    if population is not None:
        shared = set(population) & (set(members) | set(nonmembers))
        if shared:
            raise UserError(f"LM target {spec}: {len(shared)} population text(s) are also members or non-members "
                            f"(first: {next(iter(shared))[:40]!r}); the population holds texts in neither set")


def _whole(spec: str, made: dict, key: str, default: int, least: int) -> int:
    value = made.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise UserError(f"LM target {spec}: field {key!r} must be a whole number >= {least}, got {value!r}")
    return value


def lm_from_dict(spec: str, made: dict, loaded: Sequence[str] = (), namespaces: Sequence[dict] = ()) -> TrainedLM:
    """Validate a factory's ``{"kind": "lm"}`` dict (module docstring) into a :class:`TrainedLM`; ``spec`` names
    it in errors; ``loaded``/``namespaces`` add to what :func:`targets.plugins.loading.imported_packages` reads."""
    if not isinstance(made, dict) or made.get("kind") != "lm":
        raise UserError(f"LM target {spec} must be a dict with 'kind': 'lm'")
    check_plugin_keys(spec, made, "lm")
    members = _texts(spec, made, "members", True, MIN_TEXTS)
    nonmembers = _texts(spec, made, "nonmembers", True, MIN_TEXTS)
    population = _texts(spec, made, "population", False)
    _check_sets(spec, members, nonmembers, population)
    if "logprobs" not in made:
        raise UserError(f"LM target {spec}: field 'logprobs' is missing; give f(texts) -> per text the array of its "
                        f"token log-probabilities")
    fns = {key: _function(spec, made, key, "texts -> per text its token log-probabilities")
           for key in ("logprobs", "base_logprobs")}
    moments = _function(spec, made, "moments", "texts -> per text a (T, 2) array of (mean, std)")
    train = _function(spec, made, "train", "train(texts, seed) -> logprobs function")
    if train is not None and population is None:
        raise UserError(f"LM target {spec}: field 'train' needs 'population' (texts drawn like the members, in "
                        f"neither set) to train reference models on")
    claim, delta = claim_from_plugin(spec, made["claim"]) if made.get("claim") is not None else (None, 0.0)
    membership, note = membership_statement(made.get("membership"), spec)
    params = made.get("params", {})
    if not isinstance(params, dict):
        raise UserError(f"LM target {spec}: field 'params' must be a dict")
    spaces = [made, *namespaces, *(getattr(f, "__globals__", {}) for f in (*fns.values(), moments, train) if f)]
    lm = TrainedLM(spec=spec, name=str(made.get("name", spec)), description=str(made.get("description",
                   f"trained language model {spec}")), logprobs=fns["logprobs"], members=members,
                   nonmembers=nonmembers, claim=claim, delta=delta, membership=membership, membership_note=note,
                   moments=moments, base_logprobs=fns["base_logprobs"], train=train, population=population,
                   training_size=_whole(spec, made, "training_size", len(members), len(members)), params=params,
                   rng=rng_kind(train, made.get("rng"), 1, "seed", f"LM target {spec}") if train else "seed",
                   batch_size=_whole(spec, made, "batch_size", DEFAULT_LM_BATCH, 1),
                   packages=imported_packages(spaces, loaded))
    _probe(lm)
    return lm


def _probe(lm: TrainedLM) -> None:
    """Call every function of ``lm`` on a few members and non-members (one-line errors, module docstring)."""
    texts = lm.members[:PROBE_TEXTS] + lm.nonmembers[:PROBE_TEXTS]
    lengths = [len(a) for a in lm.token_logprobs(texts)]
    if lm.base_logprobs is not None:
        lm.token_logprobs(texts, base=True)
    if lm.moments is not None:
        got = [len(a) for a in lm.token_moments(texts)]
        if got != lengths:
            raise UserError(f"LM target {lm.spec}: 'moments' gave {got} tokens where 'logprobs' gave {lengths}; give "
                            f"one (mean, std) row per scored token")
