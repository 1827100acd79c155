"""Small functional models: parameters are a dict of tensors so that many models can be stacked
and trained at once with :mod:`torch.func` (``vmap`` over the model axis).

Architectures: ``logreg`` (multinomial logistic regression), ``mlp`` (one hidden layer, tanh) and
``cnn`` (the two-convolution tanh network used for DP-SGD on MNIST by Papernot et al. 2021 /
Opacus' example, for 1x28x28 inputs). Every forward takes a *batch* ``x`` of shape (B, *shape)
and returns logits (B, n_classes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from audit.errors import UserError

Params = dict[str, torch.Tensor]


@dataclass(frozen=True)
class Architecture:
    """A model family: parameter shapes for an input shape and class count, and a forward function."""

    name: str
    description: str
    shapes: Callable[[tuple[int, ...], int], dict[str, tuple[int, ...]]]
    forward: Callable[[Params, torch.Tensor], torch.Tensor]


def _logreg_shapes(shape: tuple[int, ...], n_classes: int) -> dict[str, tuple[int, ...]]:
    d = math.prod(shape)
    return {"weight": (n_classes, d), "bias": (n_classes,)}


def _logreg_forward(params: Params, x: torch.Tensor) -> torch.Tensor:
    return F.linear(x.flatten(1), params["weight"], params["bias"])


MLP_HIDDEN = 64


def _mlp_shapes(shape: tuple[int, ...], n_classes: int) -> dict[str, tuple[int, ...]]:
    d = math.prod(shape)
    return {"fc1.weight": (MLP_HIDDEN, d), "fc1.bias": (MLP_HIDDEN,),
            "fc2.weight": (n_classes, MLP_HIDDEN), "fc2.bias": (n_classes,)}


def _mlp_forward(params: Params, x: torch.Tensor) -> torch.Tensor:
    h = torch.tanh(F.linear(x.flatten(1), params["fc1.weight"], params["fc1.bias"]))
    return F.linear(h, params["fc2.weight"], params["fc2.bias"])


def _cnn_shapes(shape: tuple[int, ...], n_classes: int) -> dict[str, tuple[int, ...]]:
    if tuple(shape) != (1, 28, 28):
        raise UserError(f"the cnn model needs 1x28x28 images, got input shape {shape}; use mlp or logreg")
    return {"conv1.weight": (16, 1, 8, 8), "conv1.bias": (16,),
            "conv2.weight": (32, 16, 4, 4), "conv2.bias": (32,),
            "fc1.weight": (32, 32 * 4 * 4), "fc1.bias": (32,),
            "fc2.weight": (n_classes, 32), "fc2.bias": (n_classes,)}


def _cnn_forward(params: Params, x: torch.Tensor) -> torch.Tensor:
    h = torch.tanh(F.conv2d(x, params["conv1.weight"], params["conv1.bias"], stride=2, padding=3))  # 16x14x14
    h = F.max_pool2d(h, 2, 1)  # 16x13x13
    h = torch.tanh(F.conv2d(h, params["conv2.weight"], params["conv2.bias"], stride=2))  # 32x5x5
    h = F.max_pool2d(h, 2, 1)  # 32x4x4
    h = torch.tanh(F.linear(h.flatten(1), params["fc1.weight"], params["fc1.bias"]))
    return F.linear(h, params["fc2.weight"], params["fc2.bias"])


ARCHITECTURES: dict[str, Architecture] = {
    "logreg": Architecture("logreg", "multinomial logistic regression", _logreg_shapes, _logreg_forward),
    "mlp": Architecture("mlp", f"MLP, one tanh hidden layer of {MLP_HIDDEN}", _mlp_shapes, _mlp_forward),
    "cnn": Architecture("cnn", "CNN: conv 16@8x8/2, conv 32@4x4/2, fc 32, tanh", _cnn_shapes, _cnn_forward),
}


def get_architecture(name: str) -> Architecture:
    """Look up a model family by name."""
    if name not in ARCHITECTURES:
        raise UserError(f"unknown model {name!r}; choose one of {', '.join(ARCHITECTURES)}")
    return ARCHITECTURES[name]


def init_params(arch: Architecture, shape: tuple[int, ...], n_classes: int, generator: torch.Generator) -> Params:
    """PyTorch's default initialisation (uniform in +-1/sqrt(fan_in)) drawn from ``generator``.

    Biases start at zero so that logistic regression starts at the uniform predictor.
    """
    params: Params = {}
    for name, param_shape in arch.shapes(shape, n_classes).items():
        if name.endswith("bias"):
            params[name] = torch.zeros(param_shape)
            continue
        fan_in = math.prod(param_shape[1:])
        bound = 1.0 / math.sqrt(fan_in)
        params[name] = (torch.rand(param_shape, generator=generator) * 2 - 1) * bound
    return params


def n_parameters(params: Params) -> int:
    """Number of scalar parameters of one (unstacked) model."""
    return sum(p.numel() for p in params.values())
