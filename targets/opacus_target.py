"""``opacus_mnist``: a real third-party DP-SGD implementation (Opacus) as an audit target.

The factory returns a trainer plugin dict (:mod:`targets.plugins.loading`), so it is audited exactly like
a user's code: ``python -m audit run dp --target opacus_mnist --threat black-box --canary
mislabelled``. Training: softmax regression (``torch.nn.Linear``) on the embedded MNIST sample,
Opacus ``PrivacyEngine.make_private`` with Poisson sampling at rate q = 0.1, clip norm 1, 5 epochs
(T = 50 steps), SGD with learning rate 1 on the clipped gradient sum divided by 100 (the expected batch
of the 1,000 training examples the many-run audits draw), noise multiplier calibrated by *our* PLD
accountant to (2, 1e-5).

The rate, the steps and the normaliser are fixed in advance, never derived from the dataset's size: the
Poisson loader is built at rate q (``DPDataLoader(dataset, sample_rate=q)``, so the rate Opacus derives
from it, ``1/len(loader)``, is q whatever the size) and the loss is summed (``loss_reduction="sum"``)
with the fixed expected batch in the learning rate. Opacus's defaults — a ``DataLoader`` of a batch size
and ``loss_reduction="mean"`` — make the rate ``1/len(loader)`` and the normaliser ``int(n q)`` move with
one record wherever ``n`` sits on a batch boundary (Opacus issues 571 and 819), and such a training is not
DP for add/remove neighbours at that size (the accounting check, :mod:`audit.plugins.accounting`). The claim
handed to the audit is that DP-SGD accounting (``"dpsgd"`` in the claim dict); the parameters
record what Opacus's own RDP and PRV accountants report for the same (sigma, q, T), so the
report compares the three accountants.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import torch

from audit.errors import UserError
from audit.theory.dpsgd import calibrate_noise_multiplier

EPSILON, DELTA = 2.0, 1e-5
SAMPLE_RATE, EPOCHS, CLIP, LR = 0.1, 5, 1.0, 1.0
N_TRAIN = 1000
STEPS = int(round(EPOCHS / SAMPLE_RATE))
#: The normaliser of the summed loss, fixed in advance: the expected batch of N_TRAIN rows.
EXPECTED_BATCH = SAMPLE_RATE * N_TRAIN


def _opacus():
    try:
        # optional dependency (the opacus extra)
        import opacus
    except ImportError:
        raise UserError("opacus_mnist needs Opacus: pip install -e '.[opacus]'") from None
    return opacus


@functools.lru_cache(maxsize=1)
def noise_multiplier() -> float:
    """sigma for (EPSILON, DELTA) at q = SAMPLE_RATE over STEPS steps (our PLD accountant)."""

    return float(calibrate_noise_multiplier(EPSILON, DELTA, SAMPLE_RATE, STEPS))


def opacus_epsilons(sigma: float) -> dict[str, float]:
    """Opacus's own epsilon for (sigma, q, T) at DELTA, by its RDP and PRV accountants."""
    # optional dependency (the opacus extra)
    from opacus.accountants import PRVAccountant, RDPAccountant

    out = {}
    for name, accountant in (("opacus_rdp_epsilon", RDPAccountant()), ("opacus_prv_epsilon", PRVAccountant())):
        accountant.history = [(sigma, SAMPLE_RATE, STEPS)]
        out[name] = float(accountant.get_epsilon(delta=DELTA))
    return out


@dataclass(frozen=True, kw_only=True)
class OpacusRecipe:
    """One Opacus DP-SGD training recipe: noise multiplier ``noise``, Poisson ``sample_rate``, ``epochs``,
    learning rate ``lr`` on the summed loss divided by ``expected_batch``, clip norm ``clip``, Opacus's
    ``accountant`` (``"rdp"``/``"prv"``), and ``physical_batch`` (None, or the physical batch of
    ``BatchMemoryManager``'s virtual steps)."""

    noise: float
    sample_rate: float
    epochs: int
    lr: float
    clip: float
    accountant: str
    expected_batch: float
    physical_batch: int | None = None


def train_softmax(X: np.ndarray, y: np.ndarray, seed: int, recipe: OpacusRecipe):
    """Softmax regression trained by Opacus by ``recipe`` (``make_private``, Poisson sampling at the recipe's
    ``sample_rate``, SGD on the summed loss with learning rate ``lr / expected_batch``: rate, steps and
    normaliser fixed in advance, module docstring); returns ``predict_proba``. A ``physical_batch`` runs it
    through ``BatchMemoryManager`` (virtual steps)."""
    noise, sample_rate, epochs, lr = recipe.noise, recipe.sample_rate, recipe.epochs, recipe.lr
    clip, accountant, expected_batch, physical_batch = (recipe.clip, recipe.accountant, recipe.expected_batch,
                                                        recipe.physical_batch)
    opacus = _opacus()
    # optional dependency (the opacus extra)
    from opacus.data_loader import DPDataLoader

    torch.manual_seed(int(seed))  # Opacus draws its noise and batches from torch's global generator
    features = torch.as_tensor(np.asarray(X, dtype=np.float32)).reshape(len(X), -1)
    labels = torch.as_tensor(np.asarray(y, dtype=np.int64))
    model = torch.nn.Linear(features.shape[1], 10)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr / expected_batch)
    loader = DPDataLoader(torch.utils.data.TensorDataset(features, labels), sample_rate=sample_rate)
    engine = opacus.PrivacyEngine(accountant=accountant)
    model, optimizer, loader = engine.make_private(module=model, optimizer=optimizer, data_loader=loader,
                                                   noise_multiplier=noise, max_grad_norm=clip, poisson_sampling=True,
                                                   loss_reduction="sum")
    loss_fn = torch.nn.CrossEntropyLoss(reduction="sum")

    def steps(batches) -> None:
        for xb, yb in batches:
            optimizer.zero_grad()
            if len(xb):
                loss_fn(model(xb), yb).backward()
            optimizer.step()

    for _ in range(epochs):
        if physical_batch is None:
            steps(loader)
        else:
            # optional dependency (the opacus extra)
            from opacus.utils.batch_memory_manager import BatchMemoryManager

            with BatchMemoryManager(data_loader=loader, max_physical_batch_size=physical_batch,
                                    optimizer=optimizer) as batches:
                steps(batches)
    weight, bias = model._module.weight.detach().clone(), model._module.bias.detach().clone()

    def predict_proba(Z: np.ndarray) -> np.ndarray:
        z = torch.as_tensor(np.asarray(Z, dtype=np.float32)).reshape(len(Z), -1)
        return torch.softmax(z @ weight.T + bias, dim=1).numpy()

    return predict_proba


def train(X: np.ndarray, y: np.ndarray, seed: int):
    """Train with Opacus (Poisson sampling on); returns ``predict_proba``."""
    return train_softmax(X, y, seed, OpacusRecipe(noise=noise_multiplier(), sample_rate=SAMPLE_RATE, epochs=EPOCHS,
                                                  lr=LR, clip=CLIP, accountant="rdp", expected_batch=EXPECTED_BATCH))


def opacus_mnist() -> dict:
    """The trainer plugin dict of the ``opacus_mnist`` target."""
    _opacus()
    sigma = noise_multiplier()
    return {
        "kind": "trainer", "name": "opacus_mnist", "dataset": "mnist", "train": train,
        "description": f"softmax regression on MNIST trained by Opacus (Poisson sampling), sigma {sigma:.3f}, "
                       f"({EPSILON:g}, {DELTA:g}) by our PLD accountant",
        "claim": {"epsilon": EPSILON, "delta": DELTA,
                  "dpsgd": {"noise_multiplier": sigma, "sample_rate": SAMPLE_RATE, "steps": STEPS}},
        "params": {"noise_multiplier": sigma, "sample_rate": SAMPLE_RATE, "steps": STEPS, "clip_norm": CLIP,
                   "lr": LR, "epochs": EPOCHS} | opacus_epsilons(sigma),
    }
