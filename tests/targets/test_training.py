"""Trainer and game units: per-model seeds, masks, DP-SGD clipping."""

import numpy as np
import torch

from audit.membership.game import build_canary_game
from targets.datasets import load_synthetic
from targets.dpsgd_step import StepOptions, clipped_sum
from targets.training import TrainConfig, train_models


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
    out = clipped_sum(g, w, 1.0)
    assert out["w"][0].norm() <= 3 + 1e-5 and out["w"][1].norm() <= 1 + 1e-5


def test_canary_game_is_disjoint_and_fair():
    data = load_synthetic(n=2000)
    game = build_canary_game(data, n_train=500, m=200, shadows=3, canary_kind="mislabelled", seed=1)
    assert not (game.target_mask & game.shadow_masks.any(axis=0)).any()
    assert not np.isin(game.test_index, np.flatnonzero(game.target_mask)).any()
    assert (data.y[game.target_canaries] != game.data.y[game.target_canaries]).all()
    assert 60 < game.target_in.sum() < 140


def test_models_in_memory_chunks_equal_one_by_one():
    """A budget that fits fewer models than asked for splits them into chunks; every model still
    equals the same model trained alone with its seed."""
    from targets.datasets import Dataset
    from targets.models import get_architecture, init_params
    from targets.sampling import batch_width_bound
    from targets.training import memory_plan, parse_memory

    rng = np.random.default_rng(3)
    data = Dataset(rng.normal(size=(48, 1, 28, 28)).astype(np.float32), rng.integers(0, 10, 48).astype(np.int64),
                   "noise", 10, (1, 28, 28), "test images")
    masks = rng.random((3, 48)) < 0.6
    seeds = [11, 12, 13]
    arch = get_architecture("cnn")
    one = {k: v[None] for k, v in init_params(arch, data.shape, 10, torch.Generator()).items()}
    budget = parse_memory("12MiB")
    for private in (False, True):
        config = TrainConfig(arch="cnn", epochs=0.5, sample_rate=0.25, lr=0.5, expected_batch_size=8,
                             clip_norm=0.5 if private else None, noise_multiplier=0.7 if private else 0.0)
        width = batch_width_bound([np.flatnonzero(m) for m in masks], config.sample_rate)
        models, _ = memory_plan(arch, one, data.shape, width, private, "auto", budget)
        assert models < len(seeds)  # the budget really splits the models into chunks
        chunked = train_models(data, masks, config, seeds, progress=False, options=StepOptions(max_memory=budget))
        for r, seed in enumerate(seeds):
            alone = train_models(data, masks[r:r + 1], config, [seed], progress=False)
            for k in chunked:
                torch.testing.assert_close(chunked[k][r], alone[k][0], rtol=1e-5, atol=1e-6)
