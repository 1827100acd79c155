"""Auditing a diffprivlib model: IBM's differentially private logistic regression on digits.

diffprivlib's models take scikit-learn's ``random_state`` (an int or a numpy ``RandomState``): the
plugin says so (``"rng": "random_state"``, or name the parameter ``random_state``) and the
workbench passes one seeded per training run, so the audit is reproducible with ``--seed``. With
``random_state=None`` diffprivlib would draw from a secure generator the seed cannot reach (the
audit then says the run is not reproducible). Docs: https://diffprivlib.readthedocs.io

Records are scaled into the unit ball (``data_norm=1``), a per-record map that needs no privacy
budget. Each fit uses a fresh ``BudgetAccountant`` so that many trainings in one process do not
pile up on diffprivlib's global one.

    pip install -e '.[diffprivlib]'
    PYTHONPATH=examples python -m audit run dp --target diffprivlib_model:trainer --threat black-box --canary crafted

or in pytest: ``assert_private(diffprivlib_model.trainer, attack="black-box/crafted")`` (tests/e2e/test_examples.py).
diffprivlib 0.6.6 does not import with scikit-learn >= 1.8; install ``scikit-learn<1.8`` alongside it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from diffprivlib.accountant import BudgetAccountant
from diffprivlib.models import LogisticRegression

#: The model's pure-DP epsilon (diffprivlib splits it over the one-vs-rest classes).
EPSILON = 1.0


def unit_rows(X: np.ndarray) -> np.ndarray:
    """Digits pixels (0..16) scaled to [0, 1], each row then shrunk into the unit ball."""
    X = np.asarray(X, dtype=np.float64).reshape(len(X), -1) / 16.0
    return X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1.0)


def train(X: np.ndarray, y: np.ndarray, random_state: np.random.RandomState) -> Callable[[np.ndarray], np.ndarray]:
    """Fit the DP logistic regression; returns its ``predict_proba``."""
    model = LogisticRegression(epsilon=EPSILON, data_norm=1.0, random_state=random_state,
                               accountant=BudgetAccountant()).fit(unit_rows(X), y)
    return lambda Z: model.predict_proba(unit_rows(Z))


def trainer() -> dict:
    """The plugin dict."""
    return {"kind": "trainer", "name": "diffprivlib_logreg", "dataset": "digits", "train": train,
            "rng": "random_state", "claim": {"epsilon": EPSILON, "delta": 0},
            "description": f"diffprivlib LogisticRegression, epsilon {EPSILON:g}, digits"}
