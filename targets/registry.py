"""Named targets: what is trained (dataset, model, trainer) and what privacy it claims.

A :class:`TrainedTarget` is a model trained by :mod:`targets.training` — non-private SGD or DP-SGD
with Poisson subsampling. A DP-SGD target's claim is its requested ``epsilon`` at ``delta``; the
noise multiplier is calibrated from it with the PLD accountant for the target's sample rate and
number of steps (``resolve_noise_multiplier``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from audit.errors import UserError
from audit.theory.checks import check_delta, check_epsilon
from audit.theory.dpsgd import DPSGDClaim, calibrate_noise_multiplier
from targets.training import TrainConfig, steps_for


@dataclass(frozen=True, kw_only=True)
class TrainedTarget:
    """A model-training target.

    ``n_train`` is the nominal training-set size (natural examples; canaries come on top);
    ``batch_size`` the expected Poisson batch size, so the sample rate is ``batch_size / n_train``.
    ``epsilon`` is None for a non-private target. ``sampling`` is the trainer's batch sampling
    (:class:`targets.sampling.BatchSampler`); the claim is always the Poisson accountant's, so a
    ``"shuffle"`` target claims what it does not have (a broken control, Chua et al. 2024).
    """

    name: str
    description: str
    dataset: str
    arch: str
    n_train: int
    batch_size: int
    epochs: float
    lr: float
    momentum: float = 0.0
    clip_norm: float | None = None
    epsilon: float | None = None
    delta: float = 1e-5
    sampling: str = "poisson"

    @property
    def private(self) -> bool:
        return self.epsilon is not None

    @property
    def sample_rate(self) -> float:
        return min(1.0, self.batch_size / self.n_train)

    @property
    def steps(self) -> int:
        return steps_for(self.epochs, self.sample_rate)

    def with_privacy(self, epsilon: float | None, delta: float | None) -> TrainedTarget:
        """The same target with a different claimed (epsilon, delta); checks their ranges."""
        if delta is not None:
            check_delta(delta, "--delta", positive=True, limited=True)
        if epsilon is not None:
            check_epsilon(epsilon, "--epsilon", positive=True, limited=True)
            if not self.private:
                raise UserError(f"target {self.name} is not private; --epsilon applies to DP targets only")
        return replace(self, epsilon=self.epsilon if epsilon is None else float(epsilon),
                       delta=self.delta if delta is None else float(delta))

    def noise_multiplier(self) -> float:
        """sigma for the claimed epsilon at delta (PLD accountant); 0 for non-private targets."""
        if not self.private:
            return 0.0

        return float(calibrate_noise_multiplier(self.epsilon, self.delta, self.sample_rate, self.steps))

    def train_config(self, noise_multiplier: float) -> TrainConfig:
        """The trainer configuration for this target at a given noise multiplier."""
        return TrainConfig(arch=self.arch, epochs=self.epochs, sample_rate=self.sample_rate, lr=self.lr,
                           expected_batch_size=self.sample_rate * self.n_train, clip_norm=self.clip_norm,
                           noise_multiplier=noise_multiplier, momentum=self.momentum, sampling=self.sampling)

    def params(self, noise_multiplier: float) -> dict:
        """Training and privacy parameters under the names ``results.json`` uses."""
        return {"noise_multiplier": noise_multiplier, "clip_norm": self.clip_norm, "sample_rate": self.sample_rate,
                "steps": self.steps, "epochs": self.epochs, "lr": self.lr, "momentum": self.momentum,
                "expected_batch_size": self.sample_rate * self.n_train, "n_train": self.n_train,
                "sampling": self.sampling}

    def claim(self, noise_multiplier: float) -> DPSGDClaim | None:
        """The DP-SGD privacy claim (PLD accountant) or None for a non-private target."""
        if not self.private:
            return None

        return DPSGDClaim(noise_multiplier=noise_multiplier, sample_rate=self.sample_rate, steps=self.steps)


TARGETS: dict[str, TrainedTarget] = {
    t.name: t
    for t in [
        TrainedTarget(name="nonprivate_mnist", description="CNN on MNIST, non-private SGD (momentum 0.9)",
                      dataset="mnist", arch="cnn", n_train=1500, batch_size=128, epochs=12, lr=0.1, momentum=0.9),
        TrainedTarget(name="dpsgd_mnist",
                      description="CNN on MNIST, DP-SGD (Poisson sampling, clip 1), epsilon 8 at delta 1e-5",
                      dataset="mnist", arch="cnn", n_train=1500, batch_size=256, epochs=15, lr=2.0, clip_norm=1.0,
                      epsilon=8.0, delta=1e-5),
        TrainedTarget(name="nonprivate_digits", description="MLP on digits, non-private SGD", dataset="digits",
                      arch="mlp", n_train=800, batch_size=64, epochs=60, lr=0.1, momentum=0.9),
        TrainedTarget(name="dpsgd_digits", description="MLP on digits, DP-SGD, epsilon 4 at delta 1e-5",
                      dataset="digits", arch="mlp", n_train=800, batch_size=128, epochs=30, lr=2.0, clip_norm=1.0,
                      epsilon=4.0, delta=1e-5),
        TrainedTarget(name="nonprivate_logreg_digits",
                      description="softmax logistic regression on digits, non-private SGD", dataset="digits",
                      arch="logreg", n_train=800, batch_size=64, epochs=20, lr=0.5, momentum=0.9),
        TrainedTarget(name="dpsgd_logreg_digits",
                      description="softmax logistic regression on digits, DP-SGD, epsilon 4 at delta 1e-5",
                      dataset="digits", arch="logreg", n_train=800, batch_size=128, epochs=20, lr=2.0, clip_norm=1.0,
                      epsilon=4.0, delta=1e-5),
        TrainedTarget(name="nonprivate_logreg_mnist",
                      description="softmax logistic regression on MNIST, non-private SGD", dataset="mnist",
                      arch="logreg", n_train=1500, batch_size=128, epochs=20, lr=0.5, momentum=0.9),
        TrainedTarget(name="dpsgd_logreg_mnist",
                      description="softmax logistic regression on MNIST, DP-SGD, epsilon 8 at delta 1e-5",
                      dataset="mnist", arch="logreg", n_train=1500, batch_size=256, epochs=15, lr=2.0, clip_norm=1.0,
                      epsilon=8.0, delta=1e-5),
        # CIFAR-10 from its binary files (--data-dir; targets.data_files): the MNIST CNN's recipe on colour images
        TrainedTarget(name="nonprivate_cifar10", description="CNN on CIFAR-10, non-private SGD (momentum 0.9)",
                      dataset="cifar10", arch="cnn", n_train=1500, batch_size=128, epochs=12, lr=0.1, momentum=0.9),
        TrainedTarget(name="dpsgd_cifar10",
                      description="CNN on CIFAR-10, DP-SGD (Poisson sampling, clip 1), epsilon 8 at delta 1e-5",
                      dataset="cifar10", arch="cnn", n_train=1500, batch_size=256, epochs=15, lr=2.0, clip_norm=1.0,
                      epsilon=8.0, delta=1e-5),
        # DP audit targets (run dp / sweep dp): small, cheap runs so that thousands fit on a laptop
        TrainedTarget(name="dpgd_logreg_digits",
                      description="softmax logistic regression on 32 digits, full-batch DP-GD (4 steps), "
                                  "epsilon 4 at delta 1e-5",
                      dataset="digits", arch="logreg", n_train=32, batch_size=32, epochs=4, lr=0.5, clip_norm=1.0,
                      epsilon=4.0, delta=1e-5),
        # black-box audits from worst-case (pre-trained) initial parameters, Annamalai & De Cristofaro 2024:
        # full batch on a 1,000-record MNIST sample (run dp --threat black-box --canary blank --init pretrained)
        TrainedTarget(name="dpgd_logreg_mnist",
                      description="softmax logistic regression on 1,000 MNIST images, full-batch DP-GD "
                                  "(100 steps), epsilon 10 at delta 1e-5",
                      dataset="mnist", arch="logreg", n_train=1000, batch_size=1000, epochs=100, lr=0.5,
                      clip_norm=1.0, epsilon=10.0, delta=1e-5),
        TrainedTarget(name="dpsgd_audit_logreg_digits",
                      description="softmax logistic regression on 400 digits, DP-SGD with Poisson "
                                  "rate 0.05 (20 steps), epsilon 4 at delta 1e-5",
                      dataset="digits", arch="logreg", n_train=400, batch_size=20, epochs=1, lr=0.5, clip_norm=1.0,
                      epsilon=4.0, delta=1e-5),
        # a broken control and its correct twin: one epoch of 200 batches of 2 (q = 0.005), claims
        # epsilon 1 by the Poisson accountant; caught by run dp --canary dirac-replace (audit.dp.canaries)
        TrainedTarget(name="dpsgd_control_shuffle_as_poisson",
                      description="BROKEN control: DP-SGD softmax regression on 400 digits "
                                  "with shuffled batches (each record in exactly one of the 200 batches of an epoch) "
                                  "accounted as Poisson rate 0.005, claims epsilon 1 at delta 1e-5",
                      dataset="digits", arch="logreg", n_train=400, batch_size=2, epochs=1, lr=0.5, clip_norm=1.0,
                      epsilon=1.0, delta=1e-5, sampling="shuffle"),
        TrainedTarget(name="dpsgd_control_poisson",
                      description="correct twin of dpsgd_control_shuffle_as_poisson: the same DP-SGD "
                                  "with Poisson sampling at rate 0.005, epsilon 1 at delta 1e-5",
                      dataset="digits", arch="logreg", n_train=400, batch_size=2, epochs=1, lr=0.5, clip_norm=1.0,
                      epsilon=1.0, delta=1e-5),
    ]
}


def get_target(name: str) -> TrainedTarget:
    """Look up a registered target; unknown names are a one-line user error."""
    if name not in TARGETS:
        raise UserError(f"unknown target {name!r}; run `python -m audit list` to see the targets")
    return TARGETS[name]
