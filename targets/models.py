"""Small functional models: parameters are a dict of tensors so that many models can be stacked
and trained at once with :mod:`torch.func` (``vmap`` over the model axis).

Architectures: ``logreg`` (multinomial logistic regression), ``mlp`` (one hidden layer, tanh) and
``cnn`` (the two-convolution tanh network used for DP-SGD on MNIST by Papernot et al. 2021 /
Opacus' example, for square images: 1x28x28 MNIST, 3x32x32 CIFAR-10). Every forward takes a
*batch* ``x`` of shape (B, *shape) and returns logits (B, n_classes).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from audit.errors import UserError

Params = dict[str, torch.Tensor]


@dataclass(frozen=True)
class Linear:
    """Fully connected layer ``z = a W^T + b`` on flat inputs (B, D); parameters ``weight`` (O, D), ``bias`` (O,)."""

    weight: str
    bias: str


@dataclass(frozen=True)
class Conv2d:
    """2-d convolution (square kernel); parameters ``weight`` (O, C, k, k), ``bias`` (O,)."""

    weight: str
    bias: str
    stride: int = 1
    padding: int = 0


@dataclass(frozen=True)
class Tanh:
    """Elementwise tanh."""


@dataclass(frozen=True)
class MaxPool2d:
    """Max pooling with a square window."""

    kernel: int
    stride: int


@dataclass(frozen=True)
class Flatten:
    """Flatten every axis after the batch axis."""


Layer = Linear | Conv2d | Tanh | MaxPool2d | Flatten
#: Layers holding parameters: the ones whose per-example gradients DP-SGD clips.
PARAM_LAYERS = (Linear, Conv2d)


def apply_layer(layer: Layer, params: Params, h: torch.Tensor) -> torch.Tensor:
    """One layer on a batch ``h`` (B, ...) of one model."""
    if isinstance(layer, Linear):
        return F.linear(h, params[layer.weight], params[layer.bias])
    if isinstance(layer, Conv2d):
        return F.conv2d(h, params[layer.weight], params[layer.bias], stride=layer.stride, padding=layer.padding)
    if isinstance(layer, Tanh):
        return torch.tanh(h)
    if isinstance(layer, MaxPool2d):
        return F.max_pool2d(h, layer.kernel, layer.stride)
    if isinstance(layer, Flatten):
        return h.flatten(1)
    raise TypeError(f"unknown layer {layer!r}")


def sequential_forward(layers: tuple[Layer, ...]) -> Callable[[Params, torch.Tensor], torch.Tensor]:
    """The forward function of a sequence of layers: ``forward(params, x (B, ...)) -> logits (B, K)``."""

    def forward(params: Params, x: torch.Tensor) -> torch.Tensor:
        h = x
        for layer in layers:
            h = apply_layer(layer, params, h)
        return h

    return forward


@dataclass(frozen=True)
class Architecture:
    """A model family: parameter shapes for an input shape and class count, and a forward function.

    ``layers`` (optional) describes the model as a sequence of layers; DP-SGD uses it to clip
    per-example gradients without materialising them (:mod:`targets.ghost_clipping`). An
    architecture without ``layers`` is trained with ``vmap(grad)`` per-example gradients.
    """

    name: str
    description: str
    shapes: Callable[[tuple[int, ...], int], dict[str, tuple[int, ...]]]
    forward: Callable[[Params, torch.Tensor], torch.Tensor]
    layers: tuple[Layer, ...] | None = None


def _logreg_shapes(shape: tuple[int, ...], n_classes: int) -> dict[str, tuple[int, ...]]:
    d = math.prod(shape)
    return {"weight": (n_classes, d), "bias": (n_classes,)}


LOGREG_LAYERS: tuple[Layer, ...] = (Flatten(), Linear("weight", "bias"))

MLP_HIDDEN = 64


def _mlp_shapes(shape: tuple[int, ...], n_classes: int) -> dict[str, tuple[int, ...]]:
    d = math.prod(shape)
    return {"fc1.weight": (MLP_HIDDEN, d), "fc1.bias": (MLP_HIDDEN,),
            "fc2.weight": (n_classes, MLP_HIDDEN), "fc2.bias": (n_classes,)}


MLP_LAYERS: tuple[Layer, ...] = (Flatten(), Linear("fc1.weight", "fc1.bias"), Tanh(), Linear("fc2.weight", "fc2.bias"))


def _cnn_shapes(shape: tuple[int, ...], n_classes: int) -> dict[str, tuple[int, ...]]:
    if len(shape) != 3 or shape[1] != shape[2] or shape[1] < 16:
        raise UserError(f"the cnn model needs square images (channels, side, side) with side >= 16, got input shape "
                        f"{shape}; use mlp or logreg")
    side = (shape[1] + 2 * 3 - 8) // 2 + 1 - 1  # conv1 (8x8, stride 2, padding 3), max pool 2/1
    side = (side - 4) // 2 + 1 - 1  # conv2 (4x4, stride 2), max pool 2/1
    return {"conv1.weight": (16, shape[0], 8, 8), "conv1.bias": (16,),
            "conv2.weight": (32, 16, 4, 4), "conv2.bias": (32,),
            "fc1.weight": (32, 32 * side * side), "fc1.bias": (32,),
            "fc2.weight": (n_classes, 32), "fc2.bias": (n_classes,)}


CNN_LAYERS: tuple[Layer, ...] = (
    # MNIST 1x28x28: 16x14x14, 16x13x13, 32x5x5, 32x4x4; CIFAR-10 3x32x32: 16x16x16, 16x15x15, 32x6x6, 32x5x5
    Conv2d("conv1.weight", "conv1.bias", stride=2, padding=3), Tanh(), MaxPool2d(2, 1),
    Conv2d("conv2.weight", "conv2.bias", stride=2), Tanh(), MaxPool2d(2, 1),
    Flatten(), Linear("fc1.weight", "fc1.bias"), Tanh(), Linear("fc2.weight", "fc2.bias"),
)


def _architecture(name: str, description: str, shapes, layers: tuple[Layer, ...]) -> Architecture:
    return Architecture(name, description, shapes, sequential_forward(layers), layers)


ARCHITECTURES: dict[str, Architecture] = {
    "logreg": _architecture("logreg", "multinomial logistic regression", _logreg_shapes, LOGREG_LAYERS),
    "mlp": _architecture("mlp", f"MLP, one tanh hidden layer of {MLP_HIDDEN}", _mlp_shapes, MLP_LAYERS),
    "cnn": _architecture("cnn", "CNN: conv 16@8x8/2, conv 32@4x4/2, fc 32, tanh", _cnn_shapes, CNN_LAYERS),
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


def to_module(arch: Architecture, params: Params) -> torch.nn.Sequential:
    """An equivalent ``torch.nn.Sequential`` holding copies of one model's ``params`` (unstacked).

    For tools that need modules (Opacus, benchmarks); ``to_module(arch, p)(x)`` equals
    ``arch.forward(p, x)``. Needs an architecture described by ``layers``.
    """
    if arch.layers is None:
        raise UserError(f"model {arch.name!r} has no layer description; it cannot be turned into a module")
    modules: list[torch.nn.Module] = []
    for layer in arch.layers:
        if isinstance(layer, Linear):
            out_f, in_f = params[layer.weight].shape
            module = torch.nn.Linear(in_f, out_f)
        elif isinstance(layer, Conv2d):
            out_c, in_c, k, _ = params[layer.weight].shape
            module = torch.nn.Conv2d(in_c, out_c, k, stride=layer.stride, padding=layer.padding)
        elif isinstance(layer, Tanh):
            modules.append(torch.nn.Tanh())
            continue
        elif isinstance(layer, MaxPool2d):
            modules.append(torch.nn.MaxPool2d(layer.kernel, layer.stride))
            continue
        else:
            modules.append(torch.nn.Flatten())
            continue
        with torch.no_grad():
            module.weight.copy_(params[layer.weight])
            module.bias.copy_(params[layer.bias])
        modules.append(module)
    return torch.nn.Sequential(*modules)
