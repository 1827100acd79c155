"""targets.example_gradients: per-example gradient norms equal those of one backward pass per example."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from targets.example_gradients import gradient_norms
from targets.models import get_architecture, init_params


@pytest.mark.parametrize("arch_name, shape", [("logreg", (8, 8)), ("cnn", (1, 16, 16))])
def test_gradient_norms_match_one_backward_pass_each(arch_name, shape):
    arch = get_architecture(arch_name)
    params = init_params(arch, shape, 10, torch.Generator().manual_seed(1))
    rng = np.random.default_rng(0)
    X = rng.random((5, *shape)).astype(np.float32)
    y = rng.integers(0, 10, 5)
    expected = []
    for x, label in zip(X, y, strict=True):
        p = {k: v.clone().requires_grad_(True) for k, v in params.items()}
        loss = F.cross_entropy(arch.forward(p, torch.as_tensor(x)[None]), torch.as_tensor([int(label)]))
        grads = torch.autograd.grad(loss, list(p.values()))
        expected.append(float(torch.sqrt(sum((g.double() ** 2).sum() for g in grads))))
    got = gradient_norms(arch_name, {k: v[None] for k, v in params.items()}, X, y)
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    assert gradient_norms(arch_name, {k: v[None] for k, v in params.items()}, X[:0], y[:0]).shape == (0,)
