"""DP-SGD trainers written the way a user would (trainer-plugin form), one correct and two
deliberately broken, all claiming (1, 1e-5)-DP — controls for black-box audits.

Each factory returns the trainer plugin dict of :mod:`targets.plugins.loading`; audit one with
``python -m audit run dp --target targets.dpsgd_controls:no_clipping --threat black-box
--canary crafted`` or ``audit.testing.assert_private``. The model is softmax regression on
scikit-learn's digits (raw intensities 0..16, so that per-example gradients are far above C)
trained by the project's one DP-SGD step (:class:`targets.dpsgd_step.DPSGDStep` through
:func:`targets.training.train_models`; Abadi et al. 2016, Alg. 1): Poisson sampling at rate
q = 0.1, clip norm C = 1, 5 epochs (T = 50 steps), noise multiplier calibrated to (1, 1e-5) by the
PLD accountant, the sum divided by the expected batch size. Training starts from zero weights, as
logistic regression usually does (``train_models(options=StepOptions(init=...))``, a public starting point): a random
start would persist along the directions no training input spans — where the crafted canary lives
— and blur a black-box audit.

* ``correct``: the step as shipped.
* ``no_clipping``: :class:`NoClippingStep` — the per-example gradients are summed unclipped (a
  classic bug: clipping skipped); the Gaussian noise no longer covers an example whose gradient is
  larger than C.
* ``noise_over_batch``: :class:`NoiseOverBatchStep` — noise std sigma C / B instead of sigma C (the
  noise added *after* averaging with the formula for the sum, a bug that divides the noise by the
  expected batch size B).

Each fault is one overridden method of the step, so the controls differ from the shipped code in
exactly the documented place. Every control calls the two audit hooks of :mod:`targets.audit_hooks`
around its noise (:func:`hooked`), as a user's hooked loop does, so its updates can be audited
(``--threat updates``, ``--check-config``); outside an audit they change nothing.

The third DP-SGD control, shuffled batches accounted as Poisson, is not visible to a black-box
audit of the final model: it is the registry target ``dpsgd_control_shuffle_as_poisson``
(:mod:`targets.registry`), caught from the training updates by ``run dp --canary dirac-replace``.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from audit.theory.dpsgd import calibrate_noise_multiplier
from targets.audit_hooks import add_canary, report_update
from targets.datasets import Dataset, load_dataset
from targets.dpsgd_step import DPSGDStep, StepOptions, TrainConfig
from targets.models import Params, get_architecture
from targets.training import log_softmax, predict_logits, train_models

#: The claim every control makes.
CLAIM = {"epsilon": 1.0, "delta": 1e-5}
SAMPLE_RATE = 0.1
EPOCHS = 5
CLIP = 1.0
LR = 1.0
N_TRAIN_NOMINAL = 1000
N_CLASSES = 10


@functools.lru_cache(maxsize=1)
def noise_multiplier() -> float:
    """sigma for (1, 1e-5)-DP at q = 0.1, T = 50 steps (PLD accountant)."""

    return float(calibrate_noise_multiplier(CLAIM["epsilon"], CLAIM["delta"], SAMPLE_RATE,
                                            int(round(EPOCHS / SAMPLE_RATE))))


def _digits() -> tuple[np.ndarray, np.ndarray]:
    """Digits with pixel intensities 0..16 as scikit-learn ships them: unnormalised inputs have
    gradient norms far above C, so clipping (or its absence) matters."""
    data = load_dataset("digits")  # scaled to [0, 1] by the loader; undo it
    return (data.X.reshape(len(data), -1) * 16.0).astype(np.float32), data.y


class NoClippingStep(DPSGDStep):
    """BROKEN on purpose: the per-example gradients are summed without clipping."""

    def clipped_sum(self, params: Params, index: torch.Tensor, weight: torch.Tensor) -> Params:
        return self.weighted_sum(params, index, weight)


class NoiseOverBatchStep(DPSGDStep):
    """BROKEN on purpose: the noise std is divided by the expected batch size."""

    def noise_std(self) -> float:
        return super().noise_std() / self.config.expected_batch_size


def hooked(step_type: type[DPSGDStep]) -> type[DPSGDStep]:
    """``step_type`` with the two audit hooks of :mod:`targets.audit_hooks` around its noise (one model per
    call, as a user's loop): the clipped sum and the step's records before, the noisy sum after."""

    class Hooked(step_type):
        def gradient_sum(self, batch):
            self._batch = batch
            return super().gradient_sum(batch)

        def add_noise(self, summed):
            batch = self._batch
            add_canary([v[0] for v in summed.values()], clip_norm=float(self.config.clip_norm),
                       sample_rate=float(self.config.sample_rate), batch=batch.rows[0][batch.weights[0] > 0])
            noisy = super().add_noise(summed)
            report_update([v[0] for v in noisy.values()])
            return noisy

    Hooked.__name__ = f"Hooked{step_type.__name__}"
    return Hooked


def make_trainer(step_type: type[DPSGDStep] = DPSGDStep):
    """A DP-SGD trainer ``train(X, y, seed) -> predict_proba`` moved by ``step_type`` (the step, or a broken one)."""
    config = TrainConfig(arch="logreg", epochs=EPOCHS, sample_rate=SAMPLE_RATE, lr=LR,
                         expected_batch_size=SAMPLE_RATE * N_TRAIN_NOMINAL, clip_norm=CLIP,
                         noise_multiplier=noise_multiplier())

    def train(X: np.ndarray, y: np.ndarray, seed: int):
        X = np.asarray(X, dtype=np.float32).reshape(len(X), -1)
        data = Dataset(X, np.asarray(y, dtype=np.int64), "user data", N_CLASSES, (X.shape[1],), "train(X, y)")
        zeros = {k: torch.zeros(shape) for k, shape in get_architecture("logreg").shapes(data.shape, N_CLASSES).items()}
        params = train_models(data, np.ones((1, len(data)), dtype=bool), config, [int(seed)], progress=False,
                              options=StepOptions(step_type=hooked(step_type), init=zeros))

        def predict_proba(Z: np.ndarray) -> np.ndarray:
            Z = np.asarray(Z, dtype=np.float32).reshape(len(Z), -1)
            return np.exp(log_softmax(predict_logits("logreg", params, Z)[0]))

        return predict_proba

    return train


def _plugin(name: str, description: str, **kinds) -> dict:
    return {"kind": "trainer", "name": name, "description": description, "dataset": _digits(),
            "train": make_trainer(**kinds), "claim": dict(CLAIM)}


def correct() -> dict:
    return _plugin("dpsgd_control_correct", "DP-SGD softmax regression on digits, correct, claims (1, 1e-5)")


def no_clipping() -> dict:
    return _plugin("dpsgd_control_no_clipping", "BROKEN DP-SGD: per-example clipping skipped, claims (1, 1e-5)",
                   step_type=NoClippingStep)


def noise_over_batch() -> dict:
    return _plugin("dpsgd_control_noise_over_batch", "BROKEN DP-SGD: noise std divided by the batch size, claims "
                   "(1, 1e-5)", step_type=NoiseOverBatchStep)

