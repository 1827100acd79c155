"""Trainer and game units: per-model seeds, masks, DP-SGD clipping."""

import numpy as np
import torch

from audit.games import build_canary_game
from targets.datasets import load_synthetic
from targets.training import TrainConfig, _clipped_sum, train_models


def _config(private):
    return TrainConfig(arch="logreg", epochs=2, sample_rate=0.2, lr=0.5, expected_batch_size=40,
                       clip_norm=1.0 if private else None, noise_multiplier=1.0 if private else 0.0)


def test_models_do_not_depend_on_batchmates():
    data = load_synthetic(n=200)
    masks = np.random.default_rng(0).random((3, 200)) < 0.5
    for private in (False, True):
        together = train_models(data, masks, _config(private), [1, 2, 3], progress=False)
        alone = train_models(data, masks[1:2], _config(private), [2], progress=False)
        for k in together:
            torch.testing.assert_close(together[k][1], alone[k][0], rtol=1e-5, atol=1e-6)


def test_clipped_sum_bounds_each_example():
    g = {"w": torch.randn(2, 5, 3) * 10}
    w = torch.tensor([[1, 1, 0, 0, 1], [1, 0, 0, 0, 0]], dtype=torch.float32)
    out = _clipped_sum(g, w, 1.0)
    assert out["w"][0].norm() <= 3 + 1e-5 and out["w"][1].norm() <= 1 + 1e-5


def test_canary_game_is_disjoint_and_fair():
    data = load_synthetic(n=2000)
    game = build_canary_game(data, n_train=500, m=200, shadows=3, canary_kind="mislabelled", seed=1)
    assert not (game.target_mask & game.shadow_masks.any(axis=0)).any()
    assert not np.isin(game.test_index, np.flatnonzero(game.target_mask)).any()
    assert (data.y[game.target_canaries] != game.data.y[game.target_canaries]).all()
    assert 60 < game.target_in.sum() < 140
