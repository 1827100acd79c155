"""A model that already exists, audited without retraining it:
``python -m audit run membership --target examples.trained_sklearn:model``.

A scikit-learn logistic regression trained (here, at import: stand-in for "trained elsewhere") on MNIST
records chosen by independent fair coins among ``CANDIDATES`` records of the bundled sample (shuffled);
the coins' losers are the non-members; the rest of the sample is the population reference models train
on. ``AUDIT_SHIFT=1`` makes a split that is not random (members from digits 0-4 mostly), which the blind
split check flags.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression

from targets.datasets import load_dataset

#: Records that each get a fair coin (members vs non-members); the others are the population.
CANDIDATES = int(os.environ.get("AUDIT_CANDIDATES", "2400"))


def train(X: np.ndarray, y: np.ndarray, seed: int) -> LogisticRegression:
    """The training recipe (also what reference models use): weakly regularised multinomial regression."""
    with warnings.catch_warnings():  # a fixed, short budget of iterations is the recipe
        warnings.simplefilter("ignore", ConvergenceWarning)
        return LogisticRegression(C=10.0, max_iter=60, random_state=seed).fit(X.reshape(len(X), -1), y)


def _split(y: np.ndarray, shift: bool) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    if not shift:
        coins = rng.random(len(y)) < 0.5
        return np.flatnonzero(coins), np.flatnonzero(~coins)
    low = y < 5  # members: 80% digits 0-4; non-members: 80% digits 5-9
    coins = rng.random(len(y)) < np.where(low, 0.8, 0.2)
    return np.flatnonzero(coins), np.flatnonzero(~coins)


def model() -> dict:
    data = load_dataset("mnist")
    order = np.random.default_rng(1).permutation(len(data))  # the bundled sample is sorted by digit
    X, y = data.X[order].reshape(len(data), -1), data.y[order]
    shift = os.environ.get("AUDIT_SHIFT") == "1"
    members, nonmembers = _split(y[:CANDIDATES], shift)
    fitted = train(X[members], y[members], 0)
    return {"kind": "model", "name": "sklearn_mnist" + ("_shifted" if shift else ""), "predict_proba": fitted,
            "members": (X[members], y[members]), "nonmembers": (X[nonmembers], y[nonmembers]),
            "population": (X[CANDIDATES:], y[CANDIDATES:]), "train": train,
            "membership": "seeded-split:members by digit-dependent coins" if shift else "independent-coins"}
