"""Our per-example gradients and clipped sums agree with Opacus on the same CNN batch."""

import pytest
import torch
import torch.nn.functional as F
from torch.func import grad, vmap

from targets.dpsgd_step import example_loss
from targets.ghost_clipping import per_example_clipped_sum
from targets.models import PARAM_LAYERS, get_architecture, init_params, to_module

opacus = pytest.importorskip("opacus")


def _setup(batch=24, seed=0):
    arch = get_architecture("cnn")
    params = init_params(arch, (1, 28, 28), 10, torch.Generator().manual_seed(seed))
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randn((batch, 1, 28, 28), generator=g)
    y = torch.randint(0, 10, (batch,), generator=g)
    names = {}
    for i, layer in enumerate(arch.layers):
        if isinstance(layer, PARAM_LAYERS):
            names[f"{i}.weight"], names[f"{i}.bias"] = layer.weight, layer.bias
    return arch, params, x, y, names


def test_module_forward_equals_functional_forward():
    arch, params, x, _, _ = _setup()
    torch.testing.assert_close(to_module(arch, params)(x), arch.forward(params, x))


def test_per_sample_gradients_match_opacus_grad_sample_module():
    arch, params, x, y, names = _setup()
    module = opacus.GradSampleModule(to_module(arch, params), loss_reduction="sum")
    F.cross_entropy(module(x), y, reduction="sum").backward()
    ours = vmap(grad(example_loss(arch)), in_dims=(None, 0, 0))(params, x, y)
    for name, p in module._module.named_parameters():
        assert p.grad_sample.shape == (x.shape[0], *params[names[name]].shape)
        torch.testing.assert_close(p.grad_sample, ours[names[name]], rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("clip", [0.05, 1.0, 100.0])
def test_clipped_update_matches_opacus_dp_optimizer(clip):
    """Opacus' DPOptimizer (mean loss reduction, zero noise) sets grad = (sum of clipped per-sample
    gradients) / expected batch size — our ghost-clipped sum divided by the batch size."""
    arch, params, x, y, names = _setup()
    module = opacus.GradSampleModule(to_module(arch, params), loss_reduction="mean")
    optimizer = opacus.optimizers.DPOptimizer(torch.optim.SGD(module.parameters(), lr=1.0), noise_multiplier=0.0,
                                              max_grad_norm=clip, expected_batch_size=x.shape[0],
                                              loss_reduction="mean")
    F.cross_entropy(module(x), y).backward()
    optimizer.step()
    stacked = {k: v[None] for k, v in params.items()}
    ours = per_example_clipped_sum(arch.layers, stacked, x[None], y[None], torch.ones(1, x.shape[0]), clip)
    for name, p in module._module.named_parameters():
        expected_update = ours[names[name]][0] / x.shape[0]
        # Opacus divides by (norm + 1e-6), we by (norm + 1e-12): relative difference below 1e-5.
        torch.testing.assert_close(params[names[name]] - p.detach(), expected_update, rtol=1e-4, atol=1e-6)
