"""Gradient-max canaries (``--canary gradmax``, audit.membership.crafted): designed on a public model trained on the
shadow pool only, before the coins, which they leave exactly as they are; the largest gradients kept, labels spread
over the classes other than the public model's prediction. The flagship run with them: docs/science/membership.md."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from audit.errors import UserError
from audit.membership.crafted import CANDIDATES_PER_CANARY, canary_crafter, output_factor_score
from audit.membership.game import SPARSE_PIXELS, SYNTHETIC_POPULATION, build_canary_game, mislabel, synthetic_canaries
from targets.datasets import load_dataset

DATA = load_dataset("digits")
N_TRAIN, M = 500, 150


def stub_subject(gradients: bool = True):
    """A subject whose 'training' is a fixed linear model and which records every training call's rows."""
    d = int(np.prod(DATA.shape))
    W = np.random.default_rng(3).normal(size=(d, DATA.n_classes))
    fits = []

    def fit(paths, data, calls, appended_rows):
        fits.append([np.flatnonzero(mask) for call in calls for mask in call.masks])
        return [W[None]]

    def log_probs(params, X):
        z = X.reshape(len(X), -1) @ params[0]
        z = z - z.max(axis=1, keepdims=True)
        return (z - np.log(np.exp(z).sum(axis=1, keepdims=True)))[None]

    def norms(params, X, y):  # a stand-in gradient norm: the input's norm times the output factor
        return np.linalg.norm(X.reshape(len(X), -1), axis=1) * output_factor_score(log_probs(params, X)[0], y)

    return SimpleNamespace(data=DATA, n_train=N_TRAIN, fit=fit, log_probs=log_probs, fits=fits, params=W[None],
                           gradient_norms=norms if gradients else None)


def gradmax_game(subject, seed=0):
    return build_canary_game(DATA, N_TRAIN, M, 2, "gradmax", seed, references=2,
                             crafter=canary_crafter(subject, None, seed, lambda _: None))


def test_gradmax_needs_a_public_model():
    with pytest.raises(UserError, match="public model"):
        build_canary_game(DATA, N_TRAIN, M, 2, "gradmax", 0)


@pytest.mark.parametrize("gradients", [True, False], ids=["registry target", "plugin (no gradients)"])
def test_gradmax_canaries_are_designed_on_the_shadow_pool_before_the_coins(gradients):
    subject = stub_subject(gradients)
    game = gradmax_game(subject)
    n = len(DATA)
    [[public]] = subject.fits  # one public model, trained once for the canaries and the population
    assert public.size == N_TRAIN and public.max() < n  # natural records only ...
    audited = np.concatenate([np.flatnonzero(game.target_mask[:n]), game.test_index])
    assert not np.isin(public, audited).any()  # ... that the target never trains on (nor tests on)
    # the coins and the split are the sparse game's: the design never touches the game's own stream
    sparse = build_canary_game(DATA, N_TRAIN, M, 2, "sparse", 0, references=2)
    np.testing.assert_array_equal(game.target_in, sparse.target_in)
    np.testing.assert_array_equal(game.shadow_in, sparse.shadow_in)
    np.testing.assert_array_equal(game.target_mask[:n], sparse.target_mask[:n])
    assert game.appended_rows == 2 * M + SYNTHETIC_POPULATION
    X = game.data.X[n:n + 2 * M].reshape(2 * M, -1)
    assert ((X == 1.0).sum(axis=1) == SPARSE_PIXELS).all()
    labels = game.data.y[n:n + 2 * M]
    predicted = subject.log_probs(subject.params, X)[0].argmax(axis=1)
    assert (labels != predicted).all() and len(np.unique(labels)) >= DATA.n_classes - 1


def test_gradmax_keeps_the_largest_gradients_of_its_candidates():
    subject = stub_subject()
    rng_state = np.random.default_rng([0, 9])
    game = gradmax_game(subject)
    n = len(DATA)
    X, y = game.data.X[n:n + 2 * M], game.data.y[n:n + 2 * M]
    params = subject.params
    kept = subject.gradient_norms(params, X, y)
    # the candidates the crafter drew from the same stream: the kept ones are the top half of them by norm
    candidates, _ = synthetic_canaries("sparse", CANDIDATES_PER_CANARY * 2 * M, DATA.shape, DATA.n_classes, rng_state)
    labels = mislabel(subject.log_probs(params, candidates)[0].argmax(axis=1), DATA.n_classes, rng_state)
    all_norms = subject.gradient_norms(params, candidates, labels)
    assert kept.min() >= np.sort(all_norms)[-2 * M] - 1e-12
    assert kept.min() > np.median(all_norms)
