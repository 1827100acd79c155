"""A CNN trained with Opacus the way its MNIST tutorial writes it — GroupNorm instead of BatchNorm,
``PrivacyEngine.make_private_with_epsilon`` for the noise, 3 epochs of SGD — as a trainer plugin, on
4,990 of the 5,000 rows of the bundled MNIST sample. Audit it in one run of its training::

    python -m audit run dp --target examples.opacus_tutorial_cnn:trainer --one-run

It trains on CUDA when a GPU is there, as Opacus's tutorial does (``benchmarks/gpu/run.sh`` times it on both).
The audit runs this code unchanged: the accounting check reads the DP-SGD Opacus runs (noise multiplier,
Poisson rate, steps) and the one audited training carries the gradient canaries
(:mod:`audit.dp.plugins.one_run`). :func:`small_trainer` (500 rows, 1 epoch) is the configuration
``tests/e2e/dp/test_plugin_one_run.py`` audits in CI.

Opacus takes the rate as ``1/len(loader)`` and divides by ``int(n q)``; both move with one record when the
dataset size ``n`` sits on a batch boundary, and such a training is not DP for add/remove neighbours at that
size (the accounting check flags it). So the sizes here sit off the boundaries: 4,990 rows at batch 256
(20 batches and a normaliser of 249 with one record more or less; 5,000 rows would give 250, and 249
without one record) and, in CI, 500 rows at batch 64 (8 batches, normaliser 62; at batch 256, 500 rows
give a rate of 1/2, whose normaliser ``int(n/2)`` moves with any record).
"""

import numpy as np
import torch
from opacus import PrivacyEngine
from torch import nn

EPSILON, DELTA = 4.0, 1e-5
EPOCHS, BATCH_SIZE, MAX_GRAD_NORM, LR = 3, 256, 1.0, 0.5


def make_model() -> nn.Module:
    """The tutorial's convolutional network, GroupNorm for Opacus (about 26,000 parameters)."""
    return nn.Sequential(
        nn.Conv2d(1, 16, 8, 2, padding=3), nn.GroupNorm(4, 16), nn.ReLU(), nn.MaxPool2d(2, 1),
        nn.Conv2d(16, 32, 4, 2), nn.GroupNorm(8, 32), nn.ReLU(), nn.MaxPool2d(2, 1),
        nn.Flatten(), nn.Linear(32 * 4 * 4, 32), nn.ReLU(), nn.Linear(32, 10))


def images(X) -> torch.Tensor:
    """Rows of 784 pixels (0..255 or 0..1) as (n, 1, 28, 28) floats in [0, 1]."""
    x = torch.as_tensor(np.asarray(X, dtype=np.float32)).reshape(len(X), 1, 28, 28)
    return x / 255.0 if float(x.max()) > 1.0 else x


def train(X, y, seed, epochs=EPOCHS, accountant="prv", batch_size=BATCH_SIZE):
    torch.manual_seed(seed)                                   # the model, Opacus's batches and noise
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")   # as the Opacus tutorial does
    data = torch.utils.data.TensorDataset(images(X), torch.as_tensor(np.asarray(y, dtype=np.int64)))
    loader = torch.utils.data.DataLoader(data, batch_size=batch_size)
    model = make_model().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    model, optimizer, loader = PrivacyEngine(accountant=accountant).make_private_with_epsilon(
        module=model, optimizer=optimizer, data_loader=loader, epochs=epochs,
        target_epsilon=EPSILON, target_delta=DELTA, max_grad_norm=MAX_GRAD_NORM)
    criterion = nn.CrossEntropyLoss()
    model.train()
    for _ in range(epochs):
        for xb, yb in loader:
            optimizer.zero_grad()
            if len(xb):
                criterion(model(xb.to(device)), yb.to(device)).backward()
            optimizer.step()
    model.eval()

    def predict_proba(Z):
        with torch.no_grad():
            return torch.softmax(model(images(Z).to(device)), dim=1).cpu().numpy()

    return predict_proba


def trainer(rows=4990, epochs=EPOCHS, accountant="prv", batch_size=BATCH_SIZE):
    """The trainer plugin: the first ``rows`` rows of the MNIST sample, ``epochs`` epochs, claiming the
    epsilon the noise was calibrated for (by Opacus's ``accountant``: its default PRV, or RDP); ``rows`` and
    ``batch_size`` off a batch boundary (module docstring)."""
    from targets.datasets import load_dataset

    mnist = load_dataset("mnist")
    return {"kind": "trainer", "name": "opacus_tutorial_cnn", "dataset": (mnist.X[:rows], mnist.y[:rows]),
            "train": lambda X, y, seed: train(X, y, seed, epochs=epochs, accountant=accountant, batch_size=batch_size),
            "description": f"Opacus tutorial CNN (GroupNorm, make_private_with_epsilon, {epochs} epochs) on {rows} "
                           f"MNIST rows, claims ({EPSILON:g}, {DELTA:g})",
            "claim": {"epsilon": EPSILON, "delta": DELTA}}


def small_trainer():
    """The CI configuration: 500 rows at batch 64, 1 epoch, the noise calibrated by Opacus's RDP accountant (its
    PRV calibration takes longer than the training at this size; RDP's noise is larger, so the claim holds)."""
    return trainer(rows=500, epochs=1, accountant="rdp", batch_size=64)


if __name__ == "__main__":
    from targets.datasets import load_dataset

    mnist = load_dataset("mnist")
    proba = train(mnist.X, mnist.y, seed=0)
    print("training accuracy:", float(np.mean(proba(mnist.X).argmax(1) == mnist.y)))
