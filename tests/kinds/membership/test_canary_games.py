"""The membership game's canaries: synthetic out-of-distribution canaries are new rows with random labels
(the data stays whole for the shadows); the model cache: tests/e2e/membership/test_model_cache.py."""

from __future__ import annotations

import numpy as np
import pytest

from audit.choices import CRAFTED_CANARIES
from audit.errors import UserError
from audit.membership.game import (
    SPARSE_PIXELS,
    SYNTHETIC_CANARIES,
    SYNTHETIC_POPULATION,
    build_canary_game,
    quiet_pixels,
    synthetic_canaries,
)
from targets.datasets import load_dataset, load_synthetic


@pytest.mark.parametrize("kind", [k for k in SYNTHETIC_CANARIES if k not in CRAFTED_CANARIES])
def test_synthetic_canaries_are_new_rows_with_random_labels(kind):
    data = load_dataset("digits")
    n, m = len(data), 300
    game = build_canary_game(data, n_train=500, m=m, shadows=2, canary_kind=kind, seed=0, references=1)
    rows = 2 * m + SYNTHETIC_POPULATION
    assert len(game.data) == n + rows and game.appended_rows == rows and game.natural_rows == n
    np.testing.assert_array_equal(game.target_canaries, n + np.arange(m))
    np.testing.assert_array_equal(game.shadow_canaries, n + m + np.arange(m))
    np.testing.assert_array_equal(game.population, n + 2 * m + np.arange(SYNTHETIC_POPULATION))
    np.testing.assert_array_equal(game.data.y[:n], data.y)  # the data is untouched
    # RMIA's population: made like the canaries, trained on by no model
    masks = np.concatenate([game.target_mask[None], game.shadow_masks, game.reference_masks])
    assert not masks[:, game.population].any()
    X = game.data.X[n:n + 2 * m].reshape(2 * m, -1)
    if kind in ("sparse", "quiet"):
        assert ((X == 1.0).sum(axis=1) == SPARSE_PIXELS).all() and ((X == 0) | (X == 1)).all()
        assert len({row.tobytes() for row in X}) == 2 * m
    else:  # distinct constant images
        assert (X == X[:, :1]).all() and len(np.unique(X[:, 0])) == 2 * m
    labels = game.data.y[n:n + 2 * m]
    assert set(np.unique(labels)) == set(range(data.n_classes))
    # no canary is taken from the data: the shadows train on n_train natural rows each, the target too
    assert (game.shadow_masks[:, :n].sum(axis=1) == 500).all() and game.target_mask[:n].sum() == 500
    assert not (game.target_mask[:n] & game.shadow_masks[:, :n].any(axis=0)).any()
    assert not game.reference_in.any()  # one reference model leaves every canary out
    assert 110 < game.target_in.sum() < 190


def test_pool_canaries_population_is_the_test_images_labelled_like_the_canaries():
    data = load_dataset("digits")
    game = build_canary_game(data, n_train=500, m=200, shadows=2, canary_kind="mislabelled", seed=0, references=2)
    n = len(data)
    assert game.natural_rows == n and game.appended_rows == game.test_index.size == game.population.size
    np.testing.assert_array_equal(game.data.X[game.population], data.X[game.test_index])
    assert (game.data.y[game.population] != data.y[game.test_index]).all()
    assert not game.reference_masks[:, game.population].any() and not game.target_mask[game.population].any()


def test_synthetic_canaries_do_not_need_a_large_pool():
    data = load_synthetic(n=700)
    with pytest.raises(UserError, match="synthetic --canary"):
        build_canary_game(data, n_train=400, m=100, shadows=2, canary_kind="mislabelled", seed=0)
    game = build_canary_game(data, n_train=400, m=100, shadows=2, canary_kind="sparse", seed=0)
    assert game.m == 100
    with pytest.raises(UserError, match="unknown synthetic"):
        synthetic_canaries("natural", 3, (4,), 2, np.random.default_rng(0))


def test_quiet_canaries_light_only_the_pixels_the_public_data_leaves_still():
    data = load_dataset("digits")
    game = build_canary_game(data, n_train=500, m=100, shadows=2, canary_kind="quiet", seed=0, references=1)
    n = len(data)
    shadow_pool = np.setdiff1d(np.flatnonzero(~game.target_mask[:n]), game.test_index)
    pixels = quiet_pixels(data.X[shadow_pool])  # chosen on data the target never trains on
    lit = np.flatnonzero(game.data.X[n:].reshape(len(game.data) - n, -1).any(axis=0))
    assert np.isin(lit, pixels).all() and pixels.size == data.X[0].size // 2
    variance = data.X.reshape(n, -1).var(axis=0)
    assert variance[pixels].max() <= np.median(variance)  # the stillest half of the pixels
    with pytest.raises(UserError, match="public data"):
        synthetic_canaries("quiet", 3, (4,), 2, np.random.default_rng(0))
