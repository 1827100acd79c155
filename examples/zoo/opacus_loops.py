"""Opacus DP-SGD loops with real mistakes, each beside its correct twin.

:func:`train` is the loop the Opacus tutorials write — a ``DataLoader``, ``PrivacyEngine.make_private``
(Poisson sampling at rate ``1/len(loader)``), ``optimizer.step()`` per batch — for softmax regression
(``torch.nn.Linear``) on the first :data:`N` = 295 rows of scikit-learn's digits with batch size 30:
10 batches, rate 0.1, 2 epochs = 20 steps, clip norm 1. At 295 rows neither the rate nor the expected
batch size Opacus derives from the dataset moves when one record is added or removed (a record-dependent
configuration, Opacus issues #571 and #819, happens at 300 rows: :func:`batch_boundary`). Every plugin
claims (2, 1e-5)-DP. Sources: docs/reference/bug-zoo.md and docs/references.md ("Bug zoo").
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch

from examples.zoo.hooked import DELTA, EPS, sigma_for
from targets.datasets import load_digits

N, BATCH, EPOCHS, CLIP, LR = 295, 30, 2, 1.0, 2.0
#: The rate and steps Opacus runs at N rows: 1 / len(loader) and EPOCHS x len(loader).
RATE, STEPS = 1 / 10, EPOCHS * 10
#: The size of the dataset the mistake ``wrong_dataset_size`` accounts with (all of digits).
FULL = 1797


@dataclass(frozen=True)
class Extra:
    """What the loop does besides its DP-SGD epochs: ``warmup`` ("loader": one ordinary epoch over the
    shuffled DataLoader before ``make_private``; "sliced": the same with batches sliced off the tensors, no
    DataLoader), ``polish`` (the fraction of the records one ordinary epoch covers after the DP epochs, a plain
    SGD optimizer on the same model), ``ema`` (the decay of an exponential moving average of the parameters
    after each DP step, returned instead of the last iterate; De et al. 2022)."""

    warmup: str | None = None
    polish: float = 0.0
    ema: float | None = None


def _plain_epoch(model: torch.nn.Module, X: torch.Tensor, y: torch.Tensor, batches) -> None:
    """One ordinary (non-private) SGD epoch of ``model`` over ``batches`` (index tensors or (x, y) pairs)."""
    plain = torch.optim.SGD(model.parameters(), lr=LR)
    for batch in batches:
        xb, yb = batch if isinstance(batch, (list, tuple)) else (X[batch], y[batch])
        plain.zero_grad()
        torch.nn.functional.cross_entropy(model(xb), yb).backward()
        plain.step()
    plain.zero_grad()


def train(X: np.ndarray, y: np.ndarray, seed: int, *, noise: float | None, epochs: int = EPOCHS,
          original_loader: bool = False, epsilon_epochs: int | None = None, extra: Extra = Extra()):
    """The Opacus loop; ``noise``: the noise multiplier (None: ``make_private_with_epsilon`` calibrates
    it for (EPS, DELTA) over ``epsilon_epochs`` epochs); ``original_loader``: iterate the DataLoader
    built before ``make_private`` instead of the one it returns (the mistake of
    :func:`original_loader`); ``extra``: passes besides DP-SGD (:class:`Extra`). Returns ``predict_proba``."""
    from opacus import PrivacyEngine  # optional dependency (the opacus extra)

    torch.manual_seed(seed)
    Xt, yt = torch.as_tensor(X, dtype=torch.float32), torch.as_tensor(y)
    data = torch.utils.data.TensorDataset(Xt, yt)
    loader = torch.utils.data.DataLoader(data, batch_size=BATCH, shuffle=True)
    model = torch.nn.Linear(X.shape[1], 10)
    if extra.warmup == "loader":
        _plain_epoch(model, Xt, yt, loader)
    elif extra.warmup == "sliced":
        _plain_epoch(model, Xt, yt, torch.randperm(len(Xt)).split(BATCH))
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    engine = PrivacyEngine(accountant="rdp")
    if noise is None:
        model, optimizer, private_loader = engine.make_private_with_epsilon(
            module=model, optimizer=optimizer, data_loader=loader, target_epsilon=EPS, target_delta=DELTA,
            epochs=epsilon_epochs or epochs, max_grad_norm=CLIP)
    else:
        model, optimizer, private_loader = engine.make_private(
            module=model, optimizer=optimizer, data_loader=loader, noise_multiplier=noise, max_grad_norm=CLIP)
    averaged = copy.deepcopy(model._module).requires_grad_(False) if extra.ema is not None else model
    for _ in range(epochs):
        for xb, yb in (loader if original_loader else private_loader):
            optimizer.zero_grad()
            if len(xb):
                torch.nn.functional.cross_entropy(model(xb), yb).backward()
            optimizer.step()
            if extra.ema is not None:
                with torch.no_grad():
                    for a, p in zip(averaged.parameters(), model.parameters(), strict=True):
                        a.mul_(extra.ema).add_(p, alpha=1 - extra.ema)
    if extra.polish:  # on the module without Opacus's hooks (to_standard_module): ordinary training
        chosen = torch.randperm(len(Xt))[: int(extra.polish * len(Xt))]
        _plain_epoch(model.to_standard_module(), Xt, yt, chosen.split(BATCH))
    return lambda Z: torch.softmax(averaged(torch.as_tensor(Z, dtype=torch.float32)), 1).detach().numpy()


def _epoch(model: torch.nn.Module, optimizer: torch.optim.Optimizer, loader) -> None:
    """One epoch of DP-SGD steps over ``loader``."""
    for xb, yb in loader:
        optimizer.zero_grad()
        if len(xb):
            torch.nn.functional.cross_entropy(model(xb), yb).backward()
        optimizer.step()


@torch.no_grad()
def _mean_loss(model: torch.nn.Module, loader) -> float:
    """A no-grad pass over ``loader`` (validation or evaluation): the mean loss of its batches."""
    losses = [float(torch.nn.functional.cross_entropy(model(xb), yb)) for xb, yb in loader]
    return float(np.mean(losses))


def train_pattern(X: np.ndarray, y: np.ndarray, seed: int, *, pattern: str, held_out: tuple | None = None):
    """The Opacus loop of :func:`train` (noise for the rate and steps it runs) written one of the ways the Opacus
    docs show: ``"memory-manager"``, each logical batch through ``BatchMemoryManager`` in physical batches of at
    most 8; ``"validation"``, a no-grad validation loss after every epoch over ``held_out`` (rows, labels) in a
    ``DataLoader`` of the same size as the training set; ``"evaluation"``, a no-grad evaluation over the
    training rows before training; ``"fixed-rate"``, a ``DPDataLoader`` at rate :data:`RATE` handed to
    ``make_private`` with its default ``loss_reduction='mean'`` (the normaliser is ``int(N q)``, Opacus #571).
    Returns ``predict_proba``."""
    from opacus import PrivacyEngine  # optional dependency (the opacus extra)
    from opacus.data_loader import DPDataLoader
    from opacus.utils.batch_memory_manager import BatchMemoryManager

    torch.manual_seed(seed)
    data = torch.utils.data.TensorDataset(torch.as_tensor(X, dtype=torch.float32), torch.as_tensor(y))
    loader = (DPDataLoader(data, sample_rate=RATE) if pattern == "fixed-rate" else
              torch.utils.data.DataLoader(data, batch_size=BATCH, shuffle=True))
    model = torch.nn.Linear(X.shape[1], 10)
    if pattern == "evaluation":
        _mean_loss(model, torch.utils.data.DataLoader(data, batch_size=BATCH))
    model, optimizer, private_loader = PrivacyEngine(accountant="rdp").make_private(
        module=model, optimizer=torch.optim.SGD(model.parameters(), lr=LR), data_loader=loader,
        noise_multiplier=sigma_for(RATE, STEPS), max_grad_norm=CLIP)
    if held_out is not None:
        held = torch.utils.data.TensorDataset(torch.as_tensor(held_out[0], dtype=torch.float32),
                                              torch.as_tensor(held_out[1]))
        validation = torch.utils.data.DataLoader(held, batch_size=BATCH)
    for _ in range(EPOCHS):
        if pattern == "memory-manager":
            with BatchMemoryManager(data_loader=private_loader, max_physical_batch_size=8,
                                    optimizer=optimizer) as physical:
                _epoch(model, optimizer, physical)
        else:
            _epoch(model, optimizer, private_loader)
        if held_out is not None:
            _mean_loss(model, validation)
    return lambda Z: torch.softmax(model(torch.as_tensor(Z, dtype=torch.float32)), 1).detach().numpy()


def opacus_noise(*, delta: float = DELTA, sample_rate: float = RATE, steps: int = STEPS) -> float:
    """The noise multiplier Opacus's own ``get_noise_multiplier`` (RDP) gives for EPS at these values."""
    from opacus.accountants.utils import get_noise_multiplier  # optional dependency (the opacus extra)

    return float(get_noise_multiplier(target_epsilon=EPS, target_delta=delta, sample_rate=sample_rate, steps=steps,
                                      accountant="rdp"))


def plugin(name: str, description: str, rows: int = N, **loop) -> dict:
    """The trainer plugin: the first ``rows`` digits, the loop of :func:`train` with ``loop``, claiming (EPS, DELTA)."""
    digits = load_digits()
    return {"kind": "trainer", "name": f"zoo_opacus_{name}", "dataset": (digits.X[:rows], digits.y[:rows]),
            "train": lambda X, y, seed: train(X, y, seed, **loop), "description": description,
            "claim": {"epsilon": EPS, "delta": DELTA}}


def original_loader() -> dict:
    """The commonest Opacus mistake: the loop iterates the shuffled DataLoader it built, not the Poisson
    one ``make_private`` returns (each record once an epoch, accounted as Poisson)."""
    return plugin("original_loader", "iterates the original shuffled DataLoader", noise=sigma_for(RATE, STEPS),
                  original_loader=True)


def original_loader_twin() -> dict:
    return plugin("original_loader_twin", "iterates the DataLoader make_private returns", noise=sigma_for(RATE, STEPS))


def batch_boundary() -> dict:
    """300 rows, batch size 30: one more record makes 11 batches, so the rate 1/len(loader), the steps and
    the expected batch size move with it (Opacus issues #571, #819)."""
    return plugin("batch_boundary", "300 rows, batch 30: rate, steps and normaliser move with one record",
                  rows=300, noise=sigma_for(RATE, STEPS))


def batch_boundary_twin() -> dict:
    return plugin("batch_boundary_twin", "295 rows, batch 30: the configuration is the same with one record more "
                  "or less", noise=sigma_for(RATE, STEPS))


def wrong_delta() -> dict:
    """The noise calibrated by Opacus for delta 1e-3, the claim made at delta 1e-5."""
    return plugin("wrong_delta", "noise calibrated for delta 1e-3, claim at 1e-5", noise=opacus_noise(delta=1e-3))


def wrong_delta_twin() -> dict:
    return plugin("wrong_delta_twin", "noise calibrated for the claimed delta", noise=opacus_noise())


def wrong_dataset_size() -> dict:
    """The noise calibrated for the rate BATCH / 1797 (the whole of digits) while training on N rows."""
    return plugin("wrong_dataset_size", f"noise calibrated for rate {BATCH}/{FULL}, samples at {RATE:g}",
                  noise=opacus_noise(sample_rate=BATCH / FULL))


def wrong_dataset_size_twin() -> dict:
    return plugin("wrong_dataset_size_twin", "noise calibrated for the rate the loader samples with",
                  noise=opacus_noise())


def extra_epochs() -> dict:
    """``make_private_with_epsilon`` told 1 epoch, the loop trains EPOCHS."""
    return plugin("extra_epochs", f"noise calibrated for 1 epoch, trains {EPOCHS}", noise=None, epsilon_epochs=1)


def extra_epochs_twin() -> dict:
    return plugin("extra_epochs_twin", f"noise calibrated for the {EPOCHS} epochs it trains", noise=None)


def pattern_plugin(name: str, description: str, pattern: str, rows: int = N, validation: bool = False) -> dict:
    """The trainer plugin of :func:`train_pattern`: the first ``rows`` digits (``validation``: the next ``rows``
    held out for a validation loss), claiming (EPS, DELTA)."""
    digits = load_digits()
    held = (digits.X[rows:2 * rows], digits.y[rows:2 * rows]) if validation else None
    return {"kind": "trainer", "name": f"zoo_opacus_{name}", "dataset": (digits.X[:rows], digits.y[:rows]),
            "train": lambda X, y, seed: train_pattern(X, y, seed, pattern=pattern, held_out=held),
            "description": description, "claim": {"epsilon": EPS, "delta": DELTA}}


def batch_memory_manager() -> dict:
    """Correct: each logical (Poisson) batch split by ``BatchMemoryManager`` into physical batches of at most 8,
    one noisy step per logical batch (what Opacus recommends for large logical batches)."""
    return pattern_plugin("batch_memory_manager", "BatchMemoryManager: logical batches of ~30 in physical "
                          "batches of 8", "memory-manager")


def validation_loader() -> dict:
    """Correct: a no-grad validation loss after every epoch over held-out rows in a DataLoader of the training
    set's size (its batches reach no gradient, so they are no step's records)."""
    return pattern_plugin("validation_loader", f"a no-grad validation loss over {N} held-out rows every epoch",
                          "validation", validation=True)


def evaluation_first() -> dict:
    """Correct: a no-grad evaluation over the training rows before training."""
    return pattern_plugin("evaluation_first", "a no-grad evaluation over the training rows before training",
                          "evaluation")


def mean_reduction_boundary() -> dict:
    """300 rows at rate 0.1 with Opacus's default ``loss_reduction='mean'``: the noisy sum is divided by
    ``expected_batch_size = int(N q)``, 30 at 300 rows and 29 at 299 (Opacus #571), so the normaliser moves
    with one record while the rate and steps (a DPDataLoader at a fixed rate) do not."""
    return pattern_plugin("mean_reduction_boundary", "loss_reduction='mean' at 300 rows, q 0.1: int(N q) moves "
                          "with one record", "fixed-rate", rows=300)


def mean_reduction_boundary_twin() -> dict:
    return pattern_plugin("mean_reduction_boundary_twin", f"loss_reduction='mean' at {N} rows, q 0.1: int(N q) "
                          "is the same with one record more or less", "fixed-rate")


# --- the whole training: passes outside DP-SGD (issue 39) ----------------------------------------------

def polish() -> dict:
    """DP training done right, then one ordinary epoch (plain SGD, no clipping, no noise) on 25% of the records."""
    return plugin("polish", "DP-SGD, then one non-private epoch on 25% of the records", noise=sigma_for(RATE, STEPS),
                  extra=Extra(polish=0.25))


def polish_twin() -> dict:
    return plugin("polish_twin", f"the extra epoch taken with DP-SGD: {EPOCHS + 1} DP epochs, noise calibrated for "
                  "them", noise=sigma_for(RATE, STEPS + 10), epochs=EPOCHS + 1)


#: The warm-up loops' data: 590 synthetic rows of 256 features (10 Gaussian classes), 20 batches of 30 (off a batch
#: boundary, as N): rate 1/20, 40 steps. A model over 64 inputs holds too little of each input canary to show a
#: warm-up (docs/reference/bug-zoo.md).
WIDE_N, WIDE_D, WIDE_RATE, WIDE_STEPS = 590, 256, 1 / 20, 40


def wide_plugin(name: str, description: str, **loop) -> dict:
    """The trainer plugin on :data:`WIDE_N` synthetic rows of :data:`WIDE_D` features, claiming (EPS, DELTA)."""
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(10, WIDE_D))
    y = rng.integers(0, 10, WIDE_N)
    X = (centers[y] + rng.normal(size=(WIDE_N, WIDE_D))).astype(np.float32)
    return {"kind": "trainer", "name": f"zoo_opacus_{name}", "dataset": (X, y),
            "train": lambda X, y, seed: train(X, y, seed, **loop), "description": description,
            "claim": {"epsilon": EPS, "delta": DELTA}}


def warmup_loader() -> dict:
    """One ordinary epoch over the shuffled DataLoader before ``make_private`` (a non-private warm-up)."""
    return wide_plugin("warmup_loader", "a non-private warm-up epoch over the DataLoader before make_private",
                       noise=sigma_for(WIDE_RATE, WIDE_STEPS), extra=Extra(warmup="loader"))


def warmup_loader_twin() -> dict:
    return wide_plugin("warmup_loader_twin", f"the warm-up epoch taken with DP-SGD: {EPOCHS + 1} DP epochs, noise "
                       "calibrated for them", noise=sigma_for(WIDE_RATE, WIDE_STEPS + 20), epochs=EPOCHS + 1)


def warmup_sliced() -> dict:
    """One ordinary epoch before ``make_private``, batches sliced off the tensors (no DataLoader to see)."""
    return wide_plugin("warmup_sliced", "a non-private warm-up epoch of batches sliced off the tensors, before "
                       "make_private", noise=sigma_for(WIDE_RATE, WIDE_STEPS), extra=Extra(warmup="sliced"))


def warmup_sliced_twin() -> dict:
    return wide_plugin("warmup_sliced_twin", f"the warm-up epoch taken with DP-SGD: {EPOCHS + 1} DP epochs, noise "
                       "calibrated for them", noise=sigma_for(WIDE_RATE, WIDE_STEPS + 20), epochs=EPOCHS + 1)


def ema() -> dict:
    """Correct: an exponential moving average (decay 0.8) of the parameters after each DP step is returned
    (post-processing of the DP iterates, De et al. 2022). Must pass."""
    return plugin("ema", "returns an EMA of the DP iterates", noise=sigma_for(RATE, STEPS), extra=Extra(ema=0.8))


#: Every mistake of this module (its twin is ``NAME + "_twin"``).
MISTAKES = ("original_loader", "batch_boundary", "wrong_delta", "wrong_dataset_size", "extra_epochs",
            "mean_reduction_boundary", "polish")
#: Mistakes the accounting check cannot see (a pass before ``make_private`` leaves no trace in the DP steps nor
#: in the model returned): caught by the input canaries of ``--one-run`` (twin ``NAME + "_twin"``).
ONE_RUN_MISTAKES = ("warmup_loader", "warmup_sliced")
#: Correct loops written as the Opacus docs show them, with no twin: each must pass.
CORRECT = ("batch_memory_manager", "validation_loader", "evaluation_first", "ema")
