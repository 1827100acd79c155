"""Input-space canaries in a trainer plugin's ``--one-run`` audit (issue 39, item 3): records (a trainer) or
texts (a language-model trainer) that join the audited training by their own fair coins, beside its gradient
canaries, so that what happens outside the DP steps — a non-private warm-up before ``make_private``, a
"polish" pass after it, batches sliced off tensors with no DataLoader to see — is audited in the run the user
already pays for. Sources: docs/references.md, "One-run auditing" and "Canaries and threat models".

The gradient canaries are added to the clipped sum inside each DP step: they see the noise and the steps,
never what the code does with the data elsewhere. An input canary is a record like any other: whatever
reaches the records reaches it, DP step or not.

* **Records** (:func:`record_canaries`): ``x_c = R u_c`` with ``u_c`` a seeded unit direction of the input space
  (orthonormal while ``M`` is at most its dimension, so a linear first layer sees no cross-talk), ``R`` =
  :data:`AMPLIFY` times the largest norm of a training row, and a seeded uniform label. Inside a DP step its
  gradient is clipped to ``C`` like every record's; in an ordinary step its gradient is about ``R`` over the
  data's norm times longer than a record's, so a non-private pass imprints it far beyond what DP allows.
  Score: ``log p(label_c | rho u_c)`` from ``predict_proba`` at the data's median norm ``rho`` (away from the
  saturation of ``R u_c``).
* **Texts** (:func:`text_canaries`): :mod:`audit.dp.plugins.lm_blackbox`'s canary texts (a held-out prefix and
  a new-token secret; a random suffix when the plugin names no canary tokens), scored by ``log p(secret |
  prefix)`` (Panda et al. 2025).

Each included canary joins the dataset, in a seeded random order (:func:`with_canaries`). The guess counts are
fixed before the training by :func:`audit.stats.one_run.leak.choose_leak_design` (the shape that rejects the
claim when the smallest fraction of the canaries leak), and the bound is the one-run f-DP test at the
input canaries' share of alpha (:data:`audit.plugins.accounting.INPUT_CANARY_SHARE`): its own member of the
audit's family, so a claim it rejects is a violation at the confidence the audit prints. Any score, any
canary and any guess count fixed in advance keep the bound valid; they only decide its power. On the zoo's
softmax regression (650 parameters, 64 inputs) that power is low: a linear model holds too little of each
canary (docs/reference/bug-zoo.md).

One caveat of the records' validity: the one-run theorem needs the training DP with respect to each canary's
coin. A loop whose rate or step count follows its dataset's size (Opacus's ``1/len(loader)``) changes them
with the number of included canaries; the accounting check's world-dependence finding says whether one
record moves them at the dataset's own size, not at the audited run's.

Cost: no training of its own; the audited run trains on up to ``M/2`` more rows (:func:`canary_count`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from audit.dp.plugins.lm_blackbox import canary_texts, secret_scores
from audit.plugins.training import predictions
from audit.stats.one_run.design import CanaryMechanism, DesignObjective, OneRunDesign
from audit.stats.one_run.leak import Leak, choose_leak_design
from targets.catalogue import is_language_model
from targets.datasets import Dataset
from targets.plugins.loading import TrainerPlugin

#: How many times the largest training row's norm a record canary is long.
AMPLIFY = 10.0
#: The most input canaries, and the share of the dataset's size they may add to the audited run (in expectation
#: half of them join: a fifth of the records at most, so the audited run costs at most 1.2 trainings).
MAX_INPUT_CANARIES, COST_SHARE = 1000, 0.4
#: Fewer canaries than this cannot reject a claim of epsilon 1 even with every guess right: none are added.
MIN_INPUT_CANARIES = 64
#: Simulated games of the claim for the perfect-attack figure of the design.
DESIGN_GAMES = 10
#: The share of the leaked canaries' top places the design expects other canaries to take
#: (:func:`audit.stats.one_run.leak.choose_leak_design`): a canary imprinted by an ordinary pass can still be
#: outscored (1 of the 40 top scores of the zoo's wide warm-up was an excluded canary); the design then needs no
#: perfect run of right guesses, at the price of missing leaks confined to fewer canaries.
LEAK_ERRORS = 0.02


@dataclass(frozen=True)
class InputCanaries:
    """The input canaries of one audited run: ``kind`` ("records" or "texts"), ``included`` (the fair coins),
    ``X`` / ``y`` (what joins the data when included), ``query`` (records: the inputs scored; texts: the
    prefixes), ``labels`` (records: the labels scored; texts: the secrets), ``design`` (the guess counts)."""

    kind: str
    included: np.ndarray
    X: np.ndarray
    y: np.ndarray
    query: Any
    labels: Any
    design: OneRunDesign

    @property
    def canaries(self) -> int:
        return int(self.included.size)

    def describe(self) -> str:
        return (f"{self.canaries} input canaries ({int(self.included.sum())} in): " +
                (f"records {AMPLIFY:g} times the longest row's norm along seeded orthogonal directions, seeded "
                 "labels, scored by log p(label) at the data's median norm" if self.kind == "records" else
                 "canary texts (held-out prefix + secret), scored by log p(secret | prefix)"))


def canary_count(n: int, requested: int | None) -> int:
    """``requested`` (``--input-canaries``; 0: none), else the most the cost allows (module docstring), none when
    fewer than :data:`MIN_INPUT_CANARIES`."""
    if requested is not None:
        return int(requested)
    m = min(MAX_INPUT_CANARIES, int(COST_SHARE * n))
    return m if m >= MIN_INPUT_CANARIES else 0


def record_canaries(data: Dataset, m: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(training inputs, their labels, scored inputs, scored labels) of ``m`` record canaries (module docstring)."""
    rng = np.random.default_rng([seed, 83])
    flat = np.asarray(data.X, dtype=np.float64).reshape(len(data.X), -1)
    norms = np.linalg.norm(flat, axis=1)
    d = flat.shape[1]
    u = rng.normal(size=(m, d))
    if m <= d:
        u = np.linalg.qr(u.T)[0].T  # orthonormal rows
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    shape = (m, *np.asarray(data.X).shape[1:])
    labels = rng.integers(0, max(int(data.n_classes), 2), m).astype(np.asarray(data.y).dtype)
    dtype = np.asarray(data.X).dtype
    train = (AMPLIFY * float(norms.max()) * u).reshape(shape).astype(dtype)
    query = (float(np.median(norms)) * u).reshape(shape).astype(dtype)
    return train, labels, query, labels


def text_canaries(plugin: TrainerPlugin, m: int, seed: int) -> tuple[np.ndarray, np.ndarray, list, list]:
    """(texts, zero labels, prefixes, secrets) of ``m`` canary texts (new-token while the plugin has enough)."""
    kind = "new-token" if len(plugin.lm.canary_tokens) >= m else "random-suffix"
    prefixes, secrets = canary_texts(plugin, kind, m, seed)
    texts = np.empty(m, dtype=object)
    texts[:] = [p + s for p, s in zip(prefixes, secrets, strict=True)]
    return texts, np.zeros(m, dtype=np.int64), prefixes, secrets


def input_canaries(plugin: TrainerPlugin, data: Dataset, requested: int | None, seed: int,
                   design: tuple[CanaryMechanism, float, DesignObjective]) -> InputCanaries | None:
    """The input canaries of a plugin's audited run; ``design``: the mechanism the probe read, the claimed epsilon
    and the objective (delta, the input canaries' confidence). None: none (:func:`canary_count`), or so few
    that no guess shape could reject the claim (:func:`audit.stats.one_run.leak.choose_leak_design` with
    :data:`LEAK_ERRORS`, else with none)."""
    m = canary_count(len(data.X), requested)
    if m < 2:
        return None
    if is_language_model(plugin):
        X, y, query, labels = text_canaries(plugin, m, seed)
        kind = "texts"
    else:
        X, y, query, labels = record_canaries(data, m, seed)
        kind = "records"
    mech, claimed, objective = design
    chosen = None
    for errors in (LEAK_ERRORS, 0.0):  # no tolerance where a tolerant run cannot reject the claim (large epsilon)
        chosen = choose_leak_design(mech, m, Leak(claimed, errors), objective, np.random.default_rng([seed, 89]),
                                    simulations=DESIGN_GAMES)
        if np.isfinite(min(chosen.grid_value)):
            break
    else:
        return None  # even every guess right would not reject the claim: their alpha goes to the gradient canaries
    included = np.random.default_rng([seed, 13]).random(m) < 0.5
    return InputCanaries(kind, included, X, y, query, labels, chosen)


def with_canaries(X: np.ndarray, y: np.ndarray, canaries: InputCanaries | None,
                  seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The audited run's data: the records and the included canaries, in a seeded random order."""
    if canaries is None or not canaries.included.any():
        return X, y
    inc = canaries.included
    if canaries.kind == "texts":
        rows = np.empty(len(X) + int(inc.sum()), dtype=object)
        rows[:] = [*list(X), *list(canaries.X[inc])]
    else:
        rows = np.concatenate([np.asarray(X), canaries.X[inc]])
    labels = np.concatenate([np.asarray(y), canaries.y[inc]])
    order = np.random.default_rng([seed, 97]).permutation(len(rows))
    return rows[order], labels[order]


def canary_scores(plugin: TrainerPlugin, trained: Any, canaries: InputCanaries) -> np.ndarray:
    """One score per input canary from what ``train`` returned (module docstring)."""
    if canaries.kind == "texts":
        return secret_scores(plugin, trained, list(canaries.query), list(canaries.labels))
    proba = predictions(plugin, trained, canaries.query)
    picked = proba[np.arange(canaries.canaries), canaries.labels.astype(np.int64)]
    return np.log(np.maximum(picked, np.finfo(float).tiny))
