"""Opacus training loops with the accounting mismatches real code ships — controls for the
update-level audit (``run dp --threat updates --canary dirac``, :mod:`audit.dp.plugins.updates`).

Every control is a trainer plugin (:mod:`targets.plugins.loading`) written as a user writes Opacus code:
softmax regression (``torch.nn.Linear``) on the first 200 of scikit-learn's digits (a small set
keeps the hundreds of trainings of an audit fast), SGD with learning rate 1,
``PrivacyEngine.make_private`` with Poisson sampling at rate q = 0.5 (expected batch 100), clip
norm 1, the rate, steps and normaliser fixed in advance (the loop of
:func:`targets.opacus_target.train_softmax`: a Poisson loader built at rate q, the summed loss over the
fixed expected batch), so no control's configuration moves with one record added or removed (the
accounting check's world-dependence test). Every control claims (2, 1e-5)-DP and states the DP-SGD
accounting it believes in (``"dpsgd"``: noise multiplier, sample rate, steps; Abadi et al. 2016,
Alg. 1): 2 epochs, T = 4 steps, the noise multiplier our PLD accountant calibrates to (2, 1e-5)
(:func:`claimed_noise`). The audit does not read the claim's numbers off the code: it observes the
steps.

* ``correct``: trains as accounted. ``correct_opacus_claim``: the same loop claiming what Opacus's
  own accountant reports (``"claim": "opacus"``).
* ``extra_epochs``: the loop trains 10 epochs (T = 20) where 2 were accounted.
* ``physical_batch_rate``: the loop uses ``BatchMemoryManager`` (physical batches of 20) and the
  accounting takes the physical batch for the sampled one: rate 0.1 instead of 0.5, its noise
  multiplier calibrated for (2, 1e-5) at that rate.
* ``noise_for_larger_epsilon``: the noise multiplier was computed by Opacus's
  ``get_noise_multiplier`` for epsilon 8 (another experiment's budget) while the claim is 2.

:func:`true_epsilon` gives each control's real epsilon by the PLD accountant (at least twice the
claim for the three broken ones); ``tests/e2e/dp/test_opacus_controls.py`` asserts the audit flags each
broken control and passes the correct one, with run counts justified by the exact rejection
probability of the designed test (:func:`audit.stats.tradeoff_test.rejection_power`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from audit.theory.dpsgd import DPSGDClaim, calibrate_noise_multiplier
from targets.datasets import load_digits
from targets.opacus_target import OpacusRecipe
from targets.opacus_target import train_softmax as opacus_train_softmax

EPSILON, DELTA = 2.0, 1e-5
N_TRAIN = 200
BATCH = 100
SAMPLE_RATE = BATCH / N_TRAIN
EPOCHS = 2
STEPS = int(round(EPOCHS / SAMPLE_RATE))
CLIP, LR = 1.0, 1.0
#: The broken controls' faults.
EXTRA_EPOCHS = 10
PHYSICAL_BATCH = 20
LARGER_EPSILON = 8.0


@functools.lru_cache(maxsize=4)
def claimed_noise(sample_rate: float = SAMPLE_RATE) -> float:
    """The noise multiplier for (EPSILON, DELTA) over STEPS steps at ``sample_rate`` (our PLD accountant)."""

    return float(calibrate_noise_multiplier(EPSILON, DELTA, sample_rate, STEPS))


@functools.lru_cache(maxsize=1)
def larger_epsilon_noise() -> float:
    """The fault of ``noise_for_larger_epsilon``: Opacus's own calibration for LARGER_EPSILON."""
    # optional dependency (the opacus extra)
    from opacus.accountants.utils import get_noise_multiplier

    return float(get_noise_multiplier(target_epsilon=LARGER_EPSILON, target_delta=DELTA, sample_rate=SAMPLE_RATE,
                                      steps=STEPS, accountant="prv"))


def train_softmax(X: np.ndarray, y: np.ndarray, seed: int, *, noise: float, epochs: int = EPOCHS,
                  physical_batch: int | None = None, accountant: str = "prv") -> Callable[[np.ndarray], np.ndarray]:
    """The controls' Opacus loop (:func:`targets.opacus_target.train_softmax` at this module's sample rate,
    learning rate and clip norm); returns ``predict_proba``. ``physical_batch`` runs it through
    ``BatchMemoryManager`` (virtual steps)."""
    return opacus_train_softmax(X, y, seed, OpacusRecipe(noise=noise, sample_rate=SAMPLE_RATE, epochs=epochs, lr=LR,
                                                         clip=CLIP, accountant=accountant, expected_batch=BATCH,
                                                         physical_batch=physical_batch))


def _plugin(name: str, description: str, train: Callable, accounted_rate: float = SAMPLE_RATE) -> dict:

    sigma = claimed_noise(accounted_rate)
    digits = load_digits()
    return {"kind": "trainer", "name": name, "dataset": (digits.X[:N_TRAIN], digits.y[:N_TRAIN]), "train": train,
            "description": description,
            "claim": {"epsilon": EPSILON, "delta": DELTA,
                      "dpsgd": {"noise_multiplier": sigma, "sample_rate": accounted_rate, "steps": STEPS}},
            "params": {"clip_norm": CLIP, "lr": LR, "batch_size": BATCH, "accounted_epochs": EPOCHS}}


def correct() -> dict:
    """Trains exactly as accounted."""
    def train(X: np.ndarray, y: np.ndarray, seed: int):
        return train_softmax(X, y, seed, noise=claimed_noise())

    return _plugin("opacus_control_correct", "Opacus softmax regression on digits, accounted correctly, (2, 1e-5)",
                   train)


def correct_opacus_claim() -> dict:
    """The correct loop, claiming what Opacus's PRV accountant reports after training."""
    made = correct()
    return made | {"name": "opacus_control_correct_opacus_claim", "claim": "opacus", "delta": DELTA,
                   "description": "the correct Opacus loop, claiming the epsilon Opacus reports"}


def extra_epochs() -> dict:
    """Accounts EPOCHS epochs, trains EXTRA_EPOCHS."""
    def train(X: np.ndarray, y: np.ndarray, seed: int):
        return train_softmax(X, y, seed, noise=claimed_noise(), epochs=EXTRA_EPOCHS)

    return _plugin("opacus_control_extra_epochs", f"BROKEN control: trains {EXTRA_EPOCHS} epochs, accounts {EPOCHS}; "
                   f"claims (2, 1e-5)", train)


def physical_batch_rate() -> dict:
    """BatchMemoryManager loop that accounts the physical batch as the sampled one."""
    def train(X: np.ndarray, y: np.ndarray, seed: int):
        return train_softmax(X, y, seed, noise=claimed_noise(PHYSICAL_BATCH / N_TRAIN), physical_batch=PHYSICAL_BATCH)

    return _plugin("opacus_control_physical_batch_rate", f"BROKEN control: accounts sample rate "
                   f"{PHYSICAL_BATCH / N_TRAIN:g} (the physical batch), samples at {SAMPLE_RATE:g}; claims (2, 1e-5)",
                   train, accounted_rate=PHYSICAL_BATCH / N_TRAIN)


def noise_for_larger_epsilon() -> dict:
    """Noise calibrated by Opacus for LARGER_EPSILON, claim EPSILON."""
    def train(X: np.ndarray, y: np.ndarray, seed: int):
        return train_softmax(X, y, seed, noise=larger_epsilon_noise())

    return _plugin("opacus_control_noise_for_larger_epsilon", f"BROKEN control: noise calibrated for epsilon "
                   f"{LARGER_EPSILON:g}; claims (2, 1e-5)", train)


def true_epsilon(control: str) -> float:
    """The control's real epsilon at DELTA: the DP-SGD it runs (noise, rate 0.5, steps) by the PLD accountant."""

    noise, steps = {"correct": (claimed_noise(), STEPS),
                    "extra_epochs": (claimed_noise(), STEPS * EXTRA_EPOCHS // EPOCHS),
                    "physical_batch_rate": (claimed_noise(PHYSICAL_BATCH / N_TRAIN), STEPS),
                    "noise_for_larger_epsilon": (larger_epsilon_noise(), STEPS)}[control]
    return float(DPSGDClaim(noise, SAMPLE_RATE, steps).epsilon(DELTA))
