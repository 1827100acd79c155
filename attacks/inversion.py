"""Model inversion: MI-FACE [Fredrikson, Jha, Ristenpart 2015, "Model Inversion Attacks that Exploit
Confidence Information and Basic Countermeasures", CCS, Algorithm 1], and SSIM for measuring it.

For a target class ``l`` MI-FACE minimises the cost ``c(x) = 1 - f_l(x) + AuxTerm(x)`` over inputs by
gradient descent, ``x_i = PROCESS(x_{i-1} - lambda grad c(x_{i-1}))``, from a neutral start, for at
most ``alpha`` steps, and returns the best iterate ``argmin_i c(x_i)`` (not the last one). It stops
when the cost has not improved for ``beta`` steps, or when the class confidence reaches ``gamma``.
Two deviations from a literal reading, both noted in docs/references.md ("Pitfalls"): the paper's stop
``c(x_i) <= gamma`` with gamma = 0.99 stops at once, so we implement gamma as a confidence target
``f_l(x) >= gamma``; and the start is neutral but not zero (a zero image has zero gradient through
many networks): a constant grey image at the mean intensity of the attacker's auxiliary data, or
the mean image of those data (the same for every class). PROCESS clips to the data
range. AuxTerm is an optional total-variation prior ``tv_weight * TV(x)`` on images (0 by default,
i.e. the paper's AuxTerm = 0).

Black-box variant: the gradient is estimated by central finite differences over every input
coordinate, ``(c(x + h e_j) - c(x - h e_j)) / 2h``, which costs 2 D queries of the prediction API
per step (plus one to evaluate the new iterate); every query is counted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
from scipy import ndimage
from tqdm.auto import tqdm

from audit.errors import UserError

Probabilities = Callable[[torch.Tensor], torch.Tensor]
#: MI-FACE's cost of a batch of inputs with their labels: (cost, class confidence), one each per input.
Cost = Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]

__all__ = ["MIFaceConfig", "InversionResult", "mi_face", "ssim", "total_variation"]


@dataclass(frozen=True, kw_only=True)
class MIFaceConfig:
    """MI-FACE hyper-parameters (Fredrikson et al. 2015, Algorithm 1: alpha, beta, gamma, lambda).

    ``alpha`` maximum steps, ``beta`` patience (steps without improvement of the best cost),
    ``gamma`` confidence target, ``lr`` the step size lambda, ``tv_weight`` the AuxTerm weight,
    ``black_box`` estimates gradients numerically with step ``fd_step``.

    Attributes:
        alpha: the most gradient steps per class.
        beta: the patience: steps without improvement of the best cost before stopping.
        gamma: the confidence at which a reconstruction stops.
        lr: the step size lambda.
        tv_weight: the weight of the total-variation AuxTerm.
        black_box: estimate gradients by finite differences instead of autograd.
        fd_step: the finite-difference step.
    """

    alpha: int = 5000
    beta: int = 100
    gamma: float = 0.999
    lr: float = 0.1
    tv_weight: float = 0.0
    black_box: bool = False
    fd_step: float = 1e-3

    def __post_init__(self) -> None:
        if self.alpha < 1 or self.beta < 1:
            raise UserError(f"MI-FACE needs alpha >= 1 and beta >= 1 steps (got {self.alpha}, {self.beta})")
        if not 0 < self.gamma <= 1:
            raise UserError(f"the MI-FACE confidence target gamma must be in (0, 1], got {self.gamma}")
        if self.lr <= 0 or self.fd_step <= 0 or self.tv_weight < 0:
            raise UserError("MI-FACE step size and finite-difference step must be > 0 and the TV weight >= 0")


@dataclass(kw_only=True)
class InversionResult:
    """One reconstruction per target class (best iterates), with the cost trace summary.

    Attributes:
        labels: the target classes, (K,).
        images: the best reconstruction of each, (K, *shape).
        confidence: the model's confidence in each class at its reconstruction.
        cost: the cost of each reconstruction.
        iterations: the steps each took.
        queries: the model evaluations each spent.
        stop_reason: why each stopped.
    """

    labels: np.ndarray
    images: np.ndarray
    confidence: np.ndarray
    cost: np.ndarray
    iterations: np.ndarray
    queries: np.ndarray
    stop_reason: list[str] = field(default_factory=list)


def total_variation(x: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """Anisotropic total variation (mean absolute difference of neighbouring pixels) per image of a batch.

    Args:
        x: a batch of images, B inputs of the given shape (or flat).
        shape: the shape of one image.

    Returns:
        The total variation of each image, (B,).
    """
    img = x.reshape(x.shape[0], *shape)
    if img.dim() == 2:  # flat features: treat as square images when possible
        side = int(round(img.shape[1] ** 0.5))
        if side * side != img.shape[1]:
            return torch.zeros(x.shape[0], dtype=x.dtype, device=x.device)
        img = img.reshape(x.shape[0], side, side)
    dh = (img[..., 1:, :] - img[..., :-1, :]).abs().flatten(1).mean(1)
    dw = (img[..., :, 1:] - img[..., :, :-1]).abs().flatten(1).mean(1)
    return dh + dw


@dataclass(frozen=True, kw_only=True)
class InputSpace:
    """The inputs MI-FACE searches: their shape and the range PROCESS clips them to.

    Attributes:
        shape: the shape of one input.
        low: the smallest input value.
        high: the largest input value.
    """

    shape: tuple[int, ...]
    low: float
    high: float


def mi_face(probabilities: Probabilities, labels: np.ndarray, space: InputSpace, start: float | np.ndarray,
            config: MIFaceConfig, progress: bool = False, desc: str = "MI-FACE") -> InversionResult:
    """Run MI-FACE for every class in ``labels`` at once (each reconstruction is independent).

    ``probabilities`` maps a batch (B, *shape) to class probabilities (B, K); it is the only access
    to the model (white-box: differentiated with autograd; black-box: queried on perturbed inputs).
    ``start`` is the neutral start: a constant intensity or one class-agnostic image (e.g. the mean
    of the attacker's auxiliary data), the same for every class.
    Queries count the model evaluations spent on each class (white-box: one forward/backward per step).

    Args:
        probabilities: the model, a batch (B, *shape) to class probabilities (B, K).
        labels: the classes to reconstruct.
        space: the shape of one input and the range of its values.
        start: the neutral start, a constant or one image.
        config: the hyper-parameters.
        progress: show a progress bar.
        desc: the progress bar's label.

    Returns:
        One reconstruction per class, with its confidence, cost, iterations, queries and stop reason.
    """
    shape, low, high = space.shape, space.low, space.high
    labels = np.asarray(labels, dtype=np.int64)
    lab = torch.as_tensor(labels)
    start_t = torch.as_tensor(np.broadcast_to(np.asarray(start, dtype=np.float32), shape).copy())
    x = start_t.expand(labels.size, *shape).clone()
    cost = _cost(probabilities, shape, config.tv_weight)
    with torch.no_grad():
        search = _Search.begin(x, *cost(x, lab), config.gamma)
    bar = tqdm(range(config.alpha), desc=desc, disable=not progress, unit="step", leave=False)
    for _ in bar:
        idx = np.flatnonzero(search.active)
        if idx.size == 0:
            break
        ti = torch.as_tensor(idx)
        xa = x[ti]
        g = _gradient(cost, xa, lab[ti], shape, config, search.queries, idx)
        with torch.no_grad():
            new = torch.clamp(xa.detach() - config.lr * g, low, high)  # PROCESS: clip to the data range
            cn, pn = cost(new, lab[ti])
            x[ti] = new
        if config.black_box:
            search.queries[idx] += 1
        search.step(idx, new, cn, pn, config)
    bar.close()
    return InversionResult(labels=labels, images=search.best_x.numpy(),
                           confidence=search.best_p.numpy().astype(np.float64),
                           cost=search.best_c.numpy().astype(np.float64), iterations=search.iterations,
                           queries=search.queries, stop_reason=search.reasons)


def _cost(probabilities: Probabilities, shape: tuple[int, ...], tv_weight: float) -> Cost:
    """MI-FACE's cost ``c(x) = 1 - f_l(x) + AuxTerm(x)`` of a batch with its labels, and ``f_l(x)``."""

    def cost(batch: torch.Tensor, batch_labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        p = probabilities(batch).gather(1, batch_labels[:, None])[:, 0]
        c = 1.0 - p
        if tv_weight:
            c = c + tv_weight * total_variation(batch, shape)
        return c, p

    return cost


def _gradient(cost: Cost, xa: torch.Tensor, labels: torch.Tensor, shape: tuple[int, ...], config: MIFaceConfig,
              queries: np.ndarray, idx: np.ndarray) -> torch.Tensor:
    """The gradient of the cost at the active iterates ``xa`` (classes ``idx``), counting its queries:
    autograd (white-box, one query) or central finite differences over every input coordinate
    (black-box, 2 D queries)."""
    if config.black_box:
        D = int(np.prod(shape))
        with torch.no_grad():
            h = config.fd_step
            eye = torch.eye(D, dtype=xa.dtype).reshape(D, *shape) * h
            grads = []
            for row, k in zip(xa, labels, strict=True):
                plus, _ = cost(row[None] + eye, k.repeat(D))
                minus, _ = cost(row[None] - eye, k.repeat(D))
                grads.append(((plus - minus) / (2 * h)).reshape(shape))
            g = torch.stack(grads)
        queries[idx] += 2 * D
        return g
    xa = xa.clone().requires_grad_(True)
    ca, _ = cost(xa, labels)
    (g,) = torch.autograd.grad(ca.sum(), xa)
    queries[idx] += 1
    return g


@dataclass(kw_only=True)
class _Search:
    """The state of MI-FACE over all classes: the best iterate of each class (``best_x``, its cost and
    confidence), steps since it last improved, steps and queries spent, whether it is still searching
    and why it stopped."""

    best_x: torch.Tensor
    best_c: torch.Tensor
    best_p: torch.Tensor
    since: torch.Tensor
    iterations: np.ndarray
    queries: np.ndarray
    active: np.ndarray
    reasons: list[str]

    @classmethod
    def begin(cls, x: torch.Tensor, c0: torch.Tensor, p0: torch.Tensor, gamma: float) -> _Search:
        """The search at the start ``x`` (cost ``c0``, confidence ``p0``; one query per class); classes
        whose start already reaches the confidence target ``gamma`` are done."""
        C = x.shape[0]
        search = cls(best_x=x.clone(), best_c=c0.clone(), best_p=p0.clone(), since=torch.zeros(C, dtype=torch.long),
                     iterations=np.zeros(C, dtype=np.int64), queries=np.ones(C, dtype=np.int64),
                     active=np.ones(C, dtype=bool), reasons=["alpha steps"] * C)
        for c in range(C):
            if p0[c] >= gamma:
                search.active[c], search.reasons[c] = False, "confidence target"
        return search

    def step(self, idx: np.ndarray, new: torch.Tensor, cn: torch.Tensor, pn: torch.Tensor,
             config: MIFaceConfig) -> None:
        """Record one step of the classes ``idx`` (new iterates with their cost and confidence): keep the
        best iterate, and stop a class at the confidence target gamma or after beta steps without progress."""
        self.iterations[idx] += 1
        improved = cn < self.best_c[torch.as_tensor(idx)]
        for j, c in enumerate(idx):
            if improved[j]:
                self.best_c[c], self.best_x[c], self.best_p[c] = cn[j], new[j], pn[j]
                self.since[c] = 0
            else:
                self.since[c] += 1
            if pn[j] >= config.gamma:
                self.active[c], self.reasons[c] = False, "confidence target"
            elif self.since[c] >= config.beta:
                self.active[c], self.reasons[c] = False, f"no progress in beta={config.beta} steps"


def ssim(a: np.ndarray, b: np.ndarray, data_range: float, sigma: float = 1.5, k1: float = 0.01,
         k2: float = 0.03) -> float:
    """Mean structural similarity of two images [Wang, Bovik, Sheikh, Simoncelli 2004, eq. 13]:

    SSIM(x, y) = (2 mu_x mu_y + C1)(2 sigma_xy + C2) / ((mu_x^2 + mu_y^2 + C1)(sigma_x^2 + sigma_y^2 + C2)),

    with local statistics weighted by a normalised circular Gaussian window of standard deviation
    ``sigma`` = 1.5 (the paper's 11 x 11 window, Sec. III-C; image borders reflected),
    C1 = (k1 L)^2, C2 = (k2 L)^2, L = ``data_range``, averaged over all pixels (the paper's MSSIM,
    eq. 17). Flat inputs of a square length are treated as square images.

    Args:
        a: one image (or a flat vector of a square length).
        b: another image of the same shape.
        data_range: L, the range of the pixel values.
        sigma: the Gaussian window's standard deviation.
        k1: the constant of C1.
        k2: the constant of C2.

    Returns:
        The mean SSIM.

    Raises:
        ValueError: images of different shapes, or a flat vector that is not square.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"SSIM needs images of the same shape, got {a.shape} and {b.shape}")
    a, b = np.squeeze(a), np.squeeze(b)
    if a.ndim == 1:
        side = int(round(a.size ** 0.5))
        if side * side != a.size:
            raise ValueError(f"SSIM needs images; a flat vector of {a.size} features is not square")
        a, b = a.reshape(side, side), b.reshape(side, side)

    def blur(img: np.ndarray) -> np.ndarray:
        return ndimage.gaussian_filter(img, sigma, mode="reflect", truncate=3.5)

    c1, c2 = (k1 * data_range) ** 2, (k2 * data_range) ** 2
    mu_a, mu_b = blur(a), blur(b)
    var_a = blur(a * a) - mu_a ** 2
    var_b = blur(b * b) - mu_b ** 2
    cov = blur(a * b) - mu_a * mu_b
    s = ((2 * mu_a * mu_b + c1) * (2 * cov + c2)) / ((mu_a ** 2 + mu_b ** 2 + c1) * (var_a + var_b + c2))
    return float(s.mean())
