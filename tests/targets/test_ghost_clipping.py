"""Ghost / book-keeping clipping equals clipping materialised vmap(grad) per-example gradients."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.func import grad, vmap

from audit.errors import UserError
from targets.datasets import Dataset
from targets.dpsgd_step import StepOptions, batch_loss, clipped_sum, example_loss
from targets.ghost_clipping import (
    Tap,
    per_example_clipped_sum,
    stacked_forward,
    unfold_patches,
    use_ghost_norm,
    weighted_gradient,
)
from targets.models import Conv2d, get_architecture, init_params
from targets.training import TrainConfig, memory_plan, parse_memory, train_models

SHAPES = {"logreg": (6,), "mlp": (6,), "cnn": (1, 28, 28)}


def _stack(arch, shape, seeds, dtype=torch.float64):
    inits = [init_params(arch, shape, 10, torch.Generator().manual_seed(s)) for s in seeds]
    return {k: torch.stack([p[k] for p in inits]).to(dtype) for k in inits[0]}


def _batch(shape, r=2, b=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn((r, b, *shape), generator=g, dtype=torch.float64) * 3
    y = torch.randint(0, 10, (r, b), generator=g)
    w = (torch.rand((r, b), generator=g) < 0.75).double()
    return x, y, w


def _reference(arch, params, x, y, w, clip):
    per_example = vmap(vmap(grad(example_loss(arch)), in_dims=(None, 0, 0)), in_dims=(0, 0, 0))(params, x, y)
    norms = torch.sqrt(sum(g.flatten(2).pow(2).sum(-1) for g in per_example.values()))
    return clipped_sum(per_example, w, clip), norms


@pytest.mark.parametrize("name", ["logreg", "mlp", "cnn"])
@pytest.mark.parametrize("mode", ["auto", "ghost", "direct"])
def test_clipped_sum_matches_materialised_per_example_gradients(name, mode):
    arch = get_architecture(name)
    params = _stack(arch, SHAPES[name], [1, 2])
    x, y, w = _batch(SHAPES[name])
    _, norms = _reference(arch, params, x, y, w, 1.0)
    clip = float(norms.median())  # about half the examples are clipped, half are not
    assert (norms > clip).any() and (norms < clip).any()
    expected, _ = _reference(arch, params, x, y, w, clip)
    out = per_example_clipped_sum(arch.layers, params, x, y, w, clip, mode)
    assert set(out) == set(params)
    for k in params:
        assert out[k].shape == params[k].shape
        torch.testing.assert_close(out[k], expected[k], rtol=1e-9, atol=1e-11)


def test_padding_rows_contribute_nothing():
    arch = get_architecture("cnn")
    params = _stack(arch, SHAPES["cnn"], [3])
    x, y, w = _batch(SHAPES["cnn"], r=1, b=6)
    w[:] = 1.0
    w[0, 4:] = 0.0
    full = per_example_clipped_sum(arch.layers, params, x, y, w, 0.5)
    short = per_example_clipped_sum(arch.layers, params, x[:, :4], y[:, :4], w[:, :4], 0.5)
    for k in params:
        torch.testing.assert_close(full[k], short[k], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", ["logreg", "cnn"])
def test_weighted_gradient_matches_vmap_grad(name):
    arch = get_architecture(name)
    params = _stack(arch, SHAPES[name], [4, 5])
    x, y, w = _batch(SHAPES[name])
    expected = vmap(grad(batch_loss(arch)))(params, x, y, w)
    out = weighted_gradient(arch.layers, params, x, y, w)
    for k in params:
        torch.testing.assert_close(out[k], expected[k], rtol=1e-9, atol=1e-11)


def test_stacked_forward_matches_per_model_forward():
    arch = get_architecture("cnn")
    params = _stack(arch, SHAPES["cnn"], [1, 2, 3])
    x, _, _ = _batch(SHAPES["cnn"], r=3, b=5)
    taps: list[Tap] = []
    logits = stacked_forward(arch.layers, params, x, taps)
    assert len(taps) == 4 and taps[0].z.requires_grad
    for r in range(3):
        torch.testing.assert_close(logits[r], arch.forward({k: v[r] for k, v in params.items()}, x[r]))


@pytest.mark.parametrize("stride,padding,kernel", [(2, 3, 8), (2, 0, 4), (1, 1, 3)])
def test_unfold_matches_torch_unfold(stride, padding, kernel):
    a = torch.randn(2, 3, 4, 11, 11)
    ours = unfold_patches(Conv2d("w", "b", stride, padding), a, kernel)  # (R, B, T, D), D in (kh, kw, C) order
    ref = F.unfold(a.flatten(0, 1), kernel, padding=padding, stride=stride).unflatten(0, (2, 3))  # (C kh kw, T)
    as_ref = ours.unflatten(-1, (kernel, kernel, 4)).permute(0, 1, 5, 3, 4, 2).flatten(2, 4)
    assert torch.equal(as_ref, ref)
    channels_last = a.flatten(0, 1).contiguous(memory_format=torch.channels_last).unflatten(0, (2, 3))
    assert torch.equal(unfold_patches(Conv2d("w", "b", stride, padding), channels_last, kernel), ours)


def test_layer_choice_cost_model():
    # linear layers (T = 1) always get ghost norms; the CNN's first convolution (T = 196 positions,
    # D = 64, O = 16) is cheaper materialised: 196^2 * 80 > 2 * 16 * 64.
    assert use_ghost_norm(1, 512, 32) and use_ghost_norm(1, 32, 10)
    assert not use_ghost_norm(196, 64, 16)
    assert use_ghost_norm(196, 64, 16, "ghost") and not use_ghost_norm(1, 512, 32, "direct")


def _images(n=60, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 1, 28, 28)).astype(np.float32)
    return Dataset(X, rng.integers(0, 10, n).astype(np.int64), "noise", 10, (1, 28, 28), "test images")


@pytest.mark.parametrize("clipping", ["auto", "ghost"])
def test_training_with_ghost_clipping_equals_vmap_clipping(clipping):
    data = _images()
    masks = np.random.default_rng(1).random((2, len(data))) < 0.7
    config = TrainConfig(arch="cnn", epochs=1, sample_rate=0.25, lr=0.5, expected_batch_size=10, clip_norm=0.3,
                         noise_multiplier=0.5, momentum=0.5)
    ours = train_models(data, masks, config, [7, 8], progress=False, options=StepOptions(clipping=clipping))
    ref = train_models(data, masks, config, [7, 8], progress=False, options=StepOptions(clipping="vmap"))
    for k in ref:
        torch.testing.assert_close(ours[k], ref[k], rtol=1e-4, atol=1e-5)


def test_vmap_clipping_in_example_chunks_equals_unchunked():
    data = _images(n=80)
    masks = np.ones((2, len(data)), dtype=bool)
    config = TrainConfig(arch="cnn", epochs=0.5, sample_rate=0.5, lr=0.5, expected_batch_size=40, clip_norm=0.3)
    arch = get_architecture("cnn")
    one = {k: v[None] for k, v in init_params(arch, (1, 28, 28), 10, torch.Generator()).items()}
    models, examples = memory_plan(arch, one, (1, 28, 28), 60, True, "vmap", parse_memory("16MiB"))
    assert examples < 60  # the budget forces chunks of examples
    whole = train_models(data, masks, config, [1, 2], progress=False, options=StepOptions(clipping="vmap"))
    chunked = train_models(data, masks, config, [1, 2], progress=False,
                           options=StepOptions(clipping="vmap", max_memory="16MiB"))
    for k in whole:
        torch.testing.assert_close(chunked[k], whole[k], rtol=1e-5, atol=1e-6)


def test_parse_memory():
    assert parse_memory("2GiB") == 2 * 1024**3
    assert parse_memory("512 MiB") == 512 * 1024**2
    assert parse_memory("1.5GB") == 1_500_000_000
    assert parse_memory("3000000") == 3_000_000
    for bad in ("lots", "2 parsecs", "10KiB", "-1GiB"):
        with pytest.raises(UserError):
            parse_memory(bad)


def test_unknown_clipping_method_is_user_error():
    data = _images(n=10)
    config = TrainConfig(arch="cnn", epochs=1, sample_rate=0.5, lr=0.1, expected_batch_size=5, clip_norm=1.0)
    with pytest.raises(UserError):
        train_models(data, np.ones((1, 10), bool), config, [0], progress=False, options=StepOptions(clipping="fast"))
