"""Per-example gradient clipping without a per-example backward pass, for many models at once.

DP-SGD [Abadi et al. 2016, Algorithm 1] needs, for every example ``i`` of a batch, the norm of its
gradient ``||g_i||`` and then the clipped sum ``sum_i min(1, C/||g_i||) g_i``. For a layer
``z = W a + b`` the gradient of example ``i`` is the outer product of the layer's backprop signal
``dL_i/dz_i`` and its input ``a_i``, so both quantities come from the activations of one ordinary
forward pass and the backprop signals of one backward pass to the layer outputs (no weight
gradients), as in the book-keeping (BK) algorithm of Bu, Wang, Zha, Karypis 2023 ("Differentially
private optimization on large model at small cost", ICML 2023):

* Linear layer on flat inputs (no sequence axis): ``||dW_i||_F^2 = ||a_i||^2 ||g_i||^2`` [Goodfellow
  2015, "Efficient per-example gradient computations"], bias ``||g_i||^2``.
* Convolution, with ``U_i`` (D x T) the unfolded input patches (D = C k^2, T output positions) and
  ``G_i`` (O x T) the backprop signal: ``dW_i = G_i U_i^T``. Either the ghost norm
  ``||dW_i||_F^2 = <U_i^T U_i, G_i^T G_i>`` (the "ghost norm" of Li, Tramer, Liang, Hashimoto 2022,
  "Large language models can be strong differentially private learners", for sequences; applied to
  convolutions through the unfolded input by Bu et al. 2023), costing O(T^2 (D + O)) per example, or the
  materialised per-example gradient ``G_i U_i^T``, costing O(T O D). ``mode="auto"`` picks the
  cheaper per layer (the mixed ghost clipping of Bu et al. 2023, with our cost model below);
  ``"ghost"`` forces ghost norms, ``"direct"`` materialises every per-example gradient (all three
  are tested against clipping ``vmap(grad)`` per-example gradients).
* The clipped sum is the weight gradient of the loss re-weighted by ``c_i = min(1, C/||g_i||)``:
  ``sum_i c_i G_i U_i^T`` (Bu et al. 2023, book-keeping: no second backward pass), or
  ``sum_i c_i dW_i`` when ``dW_i`` was materialised.

Everything carries a leading model axis R: parameters are stacked (R, ...) and batches (R, B, ...);
convolutions of R models run as one grouped convolution.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from targets.models import PARAM_LAYERS, Conv2d, Flatten, Layer, Linear, MaxPool2d, Params, Tanh
from targets.threads import torch_threads

MODES = ("auto", "ghost", "direct")


@dataclass
class Tap:
    """A parameter layer's input ``a`` (R, B, ...) and output ``z`` (R, B, ...) from one forward pass."""

    layer: Linear | Conv2d
    a: torch.Tensor
    z: torch.Tensor


def _channels_last(w: torch.Tensor) -> torch.Tensor:
    """A convolution weight (O, C, kh, kw) with channels-last strides, also for one input channel
    (where ``.contiguous(memory_format=torch.channels_last)`` keeps contiguous strides, and oneDNN
    would then return contiguous activations)."""
    o, c, kh, kw = w.shape
    if c > 1:
        return w.contiguous(memory_format=torch.channels_last)
    return w.contiguous().as_strided(w.shape, (kh * kw, 1, kw, 1))


def _conv_stacked(layer: Conv2d, w: torch.Tensor, b: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    """Convolution of R stacked models (``a`` (R, B, C, H, W)).

    CPU: one ``conv2d`` per model with channels-last weights, so that oneDNN keeps channels-last
    activations channels-last (max pooling of channels-last tensors runs about 6x faster than of
    contiguous ones with torch 2.x's CPU kernels, and the patches of the next convolution are copied
    in runs of C), and a model's output does not depend on how many models are stacked with it.
    CUDA: one grouped convolution over the models (one kernel launch).
    """
    r, batch = a.shape[:2]
    if a.device.type != "cuda":
        # channels-last strides by permutation (also for one input channel, where .contiguous(channels_last)
        # keeps the contiguous strides and oneDNN would return contiguous activations)
        # (split/unbind and flatten, not indexing: their backward passes keep the gradients channels-last)
        outs = [F.conv2d(x, _channels_last(w_i), b_i, stride=layer.stride, padding=layer.padding)
                for x, w_i, b_i in zip(a.flatten(0, 1).split(batch), w.unbind(), b.unbind(), strict=True)]
        return (outs[0] if r == 1 else torch.cat(outs)).unflatten(0, (r, batch))
    if r == 1:
        return F.conv2d(a[0], w[0], b[0], stride=layer.stride, padding=layer.padding).unsqueeze(0)
    x = a.transpose(0, 1).reshape(batch, r * a.shape[2], *a.shape[3:])
    z = F.conv2d(x, w.flatten(0, 1), b.flatten(), stride=layer.stride, padding=layer.padding, groups=r)
    return z.view(batch, r, w.shape[1], *z.shape[2:]).transpose(0, 1)


def apply_stacked(layer: Layer, params: Params, h: torch.Tensor) -> torch.Tensor:
    """One layer for R stacked models: ``params`` tensors (R, ...), ``h`` (R, B, ...)."""
    if isinstance(layer, Linear):
        return torch.baddbmm(params[layer.bias].unsqueeze(1), h, params[layer.weight].transpose(1, 2))
    if isinstance(layer, Conv2d):
        return _conv_stacked(layer, params[layer.weight], params[layer.bias], h)
    if isinstance(layer, Tanh):
        return torch.tanh(h)
    if isinstance(layer, MaxPool2d):  # channels-last on the CPU: see _conv_stacked
        flat = h.flatten(0, 1)
        flat = flat if h.device.type == "cuda" else flat.contiguous(memory_format=torch.channels_last)
        return F.max_pool2d(flat, layer.kernel, layer.stride).unflatten(0, h.shape[:2])
    if isinstance(layer, Flatten):
        return h.flatten(2)
    raise TypeError(f"unknown layer {layer!r}")


def stacked_forward(layers: tuple[Layer, ...], params: Params, x: torch.Tensor,
                    taps: list[Tap] | None = None) -> torch.Tensor:
    """Logits (R, B, K) of R stacked models on their own batches ``x`` (R, B, ...).

    With ``taps`` given, every parameter layer's input and output is appended to it, and the first
    parameter layer's output is made to require grad so that a backward pass reaches every tap
    without computing weight gradients (the parameters must not require grad).
    """
    h = x
    for layer in layers:
        a = h
        h = apply_stacked(layer, params, a)
        if taps is not None and isinstance(layer, PARAM_LAYERS):
            if not h.requires_grad:
                h.requires_grad_(True)
            taps.append(Tap(layer, a, h))
    return h


def conv_geometry(layer: Conv2d, a_shape: tuple[int, ...], w_shape: tuple[int, ...]) -> tuple[int, int, int]:
    """(T, D, O) of a convolution: output positions, patch size C k^2 and output channels."""
    kernel = w_shape[-1]
    h_out = (a_shape[-2] + 2 * layer.padding - kernel) // layer.stride + 1
    w_out = (a_shape[-1] + 2 * layer.padding - kernel) // layer.stride + 1
    return h_out * w_out, math.prod(w_shape[1:]), w_shape[0]


def use_ghost_norm(t: int, d: int, o: int, mode: str = "auto") -> bool:
    """Whether a layer with T positions, input size D and output size O gets a ghost norm.

    Cost per example (multiply-adds) of the two routes, both followed by the clipped sum:
    ghost = T^2 (D + O) for the Gram matrices plus T O D for the re-weighted gradient;
    direct = T O D to materialise plus about 2 O D to take its norm and the weighted sum.
    ``auto`` takes ghost iff ``T^2 (D + O) < 2 O D`` — always for a linear layer (T = 1) with
    ``O, D >= 2``; a Bu et al. 2023 style per-layer choice with this trainer's costs.
    """
    if mode == "ghost":
        return True
    if mode == "direct":
        return False
    return t * t * (d + o) < 2 * o * d


def _linear_sqnorm(a: torch.Tensor, g: torch.Tensor, ghost: bool) -> torch.Tensor:
    """Squared norms (R, B) of a linear layer's per-example weight and bias gradients ``g_i a_i^T``, ``g_i``."""
    g_sq = _sqnorm(g, 1)
    if ghost:
        return _sqnorm(a, 1) * g_sq + g_sq
    return _sqnorm(g.unsqueeze(-1) * a.unsqueeze(-2), 2) + g_sq  # materialised (R, B, O, D)


def _sqnorm(x: torch.Tensor, dims: int) -> torch.Tensor:
    """Squared L2 norm over the last ``dims`` axes (one fused reduction, no squared temporary)."""
    return torch.linalg.vector_norm(x, dim=tuple(range(-dims, 0))).square()


def unfold_patches(layer: Conv2d, a: torch.Tensor, kernel: int) -> torch.Tensor:
    """Input patches (R, B, T, D) of a convolution: T output positions (row-major), D = k^2 C in
    (kh, kw, C) order (:func:`to_weight_layout` turns a (..., O, D) gradient into the weight's
    (O, C, kh, kw)).

    The values of ``F.unfold``, gathered with one strided copy whose innermost runs are contiguous
    for channels-last activations (C) and for single-channel inputs (kw) — faster than im2col on CPU.
    """
    if layer.padding:
        a = F.pad(a, (layer.padding,) * 4)
    r, b, c, h, w = a.shape
    h_out = (h - kernel) // layer.stride + 1
    w_out = (w - kernel) // layer.stride + 1
    s_r, s_b, s_c, s_h, s_w = a.stride()
    patches = a.as_strided((r, b, h_out, w_out, kernel, kernel, c),
                           (s_r, s_b, s_h * layer.stride, s_w * layer.stride, s_h, s_w, s_c))
    if c == 1:  # a trailing axis of length 1 makes the copy about 1.5x slower
        patches = patches.squeeze(-1)
    return patches.reshape(r, b, h_out * w_out, kernel * kernel * c)


def to_weight_layout(layer: Linear | Conv2d, grad: torch.Tensor, w_shape: torch.Size) -> torch.Tensor:
    """A weight gradient (R, O, D) in the patch order of :func:`unfold_patches` as a tensor of the
    weight's stacked shape ``w_shape`` (R, O, ...)."""
    if isinstance(layer, Linear):
        return grad.reshape(w_shape)
    o, c, kh, kw = w_shape[1:]
    return grad.reshape(-1, o, kh, kw, c).permute(0, 1, 4, 2, 3).contiguous()


def cross_entropy_signal(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``d loss_i / d logits_i = softmax(logits_i) - onehot(y_i)`` of the cross-entropy loss, for
    logits (..., K) and labels (...). Written out because torch's CPU log-softmax over a short last
    axis (10 classes) is about 6x slower than these elementwise operations."""
    shifted = logits - logits.amax(-1, keepdim=True)
    probs = shifted.exp()
    probs = probs / probs.sum(-1, keepdim=True)
    return probs.scatter_add(-1, y.unsqueeze(-1), torch.full_like(probs[..., :1], -1.0))


def _signals(layers: tuple[Layer, ...], params: Params, x: torch.Tensor, y: torch.Tensor,
             weight: torch.Tensor | None = None) -> tuple[list[Tap], tuple[torch.Tensor, ...]]:
    """One forward pass and one backward pass to the parameter layers' outputs (no weight
    gradients): the taps and the backprop signals of ``sum_i w_i loss_i`` (``w`` = 1 when None),
    each example's cross-entropy loss."""
    taps: list[Tap] = []
    with torch.enable_grad():
        logits = stacked_forward(layers, params, x, taps)
        with torch.no_grad():
            signal = cross_entropy_signal(logits, y)
            if weight is not None:
                signal = signal * weight.unsqueeze(-1)
        signals = torch.autograd.grad(logits, [tap.z for tap in taps], grad_outputs=signal)
    return taps, signals


def per_example_clipped_sum(layers: tuple[Layer, ...], params: Params, x: torch.Tensor, y: torch.Tensor,
                            weight: torch.Tensor, clip_norm: float, mode: str = "auto") -> Params:
    """``sum_i w_i min(1, C/||g_i||) g_i`` for R stacked models, ``g_i`` the gradient of example i's
    cross-entropy loss (Abadi et al. 2016, Algorithm 1, clip and sum steps).

    ``x`` (R, B, ...), ``y`` (R, B), ``weight`` (R, B) (1 for sampled examples, 0 for padding);
    returns tensors (R, ...) shaped like ``params``. Equal, up to rounding, to clipping materialised
    ``vmap(grad)`` per-example gradients (``targets.dpsgd_step.clipped_sum``). The passes and the
    per-example quantities (each reduced on one thread) use torch's intra-op threads; the sums over
    the examples run on one thread (:func:`targets.threads.torch_threads`), so the result is the
    same whatever the thread count.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    taps, signals = _signals(layers, params, x, y)
    parts = []
    for tap, g in zip(taps, signals, strict=True):
        a = tap.a.detach()
        layer = tap.layer
        if isinstance(layer, Linear):
            parts.append((layer, use_ghost_norm(1, a.shape[-1], g.shape[-1], mode), a, g, None))
            continue
        w_shape = params[layer.weight].shape[1:]
        t, d, o = conv_geometry(layer, a.shape, w_shape)
        unfolded = unfold_patches(layer, a, w_shape[-1])  # (R, B, T, D)
        g = g.flatten(3)  # (R, B, O, T)
        ghost = use_ghost_norm(t, d, o, mode)
        if ghost:
            grams = (torch.matmul(unfolded, unfolded.transpose(-1, -2)), torch.matmul(g.transpose(-1, -2), g))
            parts.append((layer, True, unfolded, g, grams))  # (R, B, T, T) each
        else:
            parts.append((layer, False, unfolded, g, torch.matmul(g, unfolded)))  # (R, B, O, D)
    sq = torch.zeros(weight.shape, dtype=signals[0].dtype, device=weight.device)
    for layer, ghost, a, g, extra in parts:
        if isinstance(layer, Linear):
            sq = sq + _linear_sqnorm(a, g, ghost)
        else:
            layer_sq = (extra[0] * extra[1]).sum((-1, -2)) if ghost else _sqnorm(extra, 2)
            sq = sq + layer_sq + _sqnorm(g.sum(-1), 1)
    factor = weight * torch.clamp(clip_norm / (sq.sqrt() + 1e-12), max=1.0)  # (R, B)
    with torch_threads(1):
        out: Params = {}
        weights = factor.unsqueeze(1)  # (R, 1, B): sums over the batch as batched matrix products
        for layer, ghost, a, g, extra in parts:
            w_shape = params[layer.weight].shape
            bias_signal = g if isinstance(layer, Linear) else g.sum(-1)  # (R, B, O)
            out[layer.bias] = torch.bmm(weights, bias_signal).squeeze(1)
            if isinstance(layer, Linear):
                out[layer.weight] = torch.bmm((g * factor.unsqueeze(-1)).transpose(1, 2), a)
            elif not ghost:
                out[layer.weight] = to_weight_layout(layer, torch.bmm(weights, extra.flatten(2)), w_shape)
            else:
                scaled = g * factor[:, :, None, None]  # (R, B, O, T)
                out[layer.weight] = to_weight_layout(layer, torch.einsum("rbot,rbtd->rod", scaled, a), w_shape)
    return {name: out[name] for name in params}


def weighted_gradient(layers: tuple[Layer, ...], params: Params, x: torch.Tensor, y: torch.Tensor,
                      weight: torch.Tensor) -> Params:
    """Gradient of ``sum_i w_i loss_i`` for R stacked models (non-private SGD).

    One forward and one backward pass to the layer outputs (torch's intra-op threads), then each
    layer's weight gradient from its input and backprop signal on one thread (a linear layer's
    ``sum_i g_i a_i^T``; a convolution's by oneDNN's weight-gradient kernel, one model at a time),
    so the result is the same whatever the thread count."""
    params = {name: p.detach() for name, p in params.items()}
    taps, signals = _signals(layers, params, x, y, weight)
    out: Params = {}
    with torch_threads(1):
        for tap, g in zip(taps, signals, strict=True):
            layer, a = tap.layer, tap.a.detach()
            if isinstance(layer, Linear):
                out[layer.weight] = torch.bmm(g.transpose(1, 2), a)
                out[layer.bias] = g.sum(1)
                continue
            w = params[layer.weight]
            grads = [torch.ops.aten.convolution_backward(g_r, a_r, _channels_last(w_r) if a.device.type != "cuda"
                                                         else w_r, None, (layer.stride,) * 2, (layer.padding,) * 2,
                                                         (1, 1), False, (0, 0), 1, (False, True, False))[1]
                     for g_r, a_r, w_r in zip(g.unbind(), a.unbind(), w.unbind(), strict=True)]
            out[layer.weight] = torch.stack(grads).contiguous()
            out[layer.bias] = g.sum((1, 3, 4))
    return {name: out[name] for name in params}


def activation_bytes_per_example(layers: tuple[Layer, ...], params: Params, input_shape: tuple[int, ...],
                                 mode: str = "auto") -> int:
    """Bytes that one example of one model holds during :func:`per_example_clipped_sum`.

    Counted from a dry run on one example: every layer output (kept for backward) and its backprop
    signal, unfolded convolution inputs, Gram matrices or materialised per-example gradients; doubled
    for temporaries. ``params`` are one model's stacked parameters (leading axis 1).
    """
    elements = 0
    h = torch.zeros((1, 1, *input_shape), dtype=torch.float32)
    with torch.no_grad():
        for layer in layers:
            a = h
            h = apply_stacked(layer, params, a)
            elements += 2 * h.numel()
            if isinstance(layer, Linear):
                if not use_ghost_norm(1, a.shape[-1], h.shape[-1], mode):
                    elements += a.shape[-1] * h.shape[-1]
            elif isinstance(layer, Conv2d):
                t, d, o = conv_geometry(layer, a.shape, params[layer.weight].shape[1:])
                elements += d * t + (2 * t * t if use_ghost_norm(t, d, o, mode) else o * d)
    return 2 * 4 * elements
