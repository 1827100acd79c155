"""Batch sampling of the DP-SGD step (:mod:`targets.dpsgd_step`) for R models at once.

``"poisson"``: each member of a model's training set joins each step independently with
probability ``q`` — the sampling the DP-SGD accountant assumes [Abadi et al. 2016, Alg. 1;
docs/references.md, "DP-SGD accounting"]. ``"shuffle"``: fixed-size batches cut from a fresh random
permutation every epoch (what most implementations do; its privacy is *not* the Poisson figure,
Chua et al. 2024, docs/references.md, "Pitfalls"). Each model draws from its own generator, so
results do not depend on which models are sampled together.
"""

from __future__ import annotations

import math

import numpy as np

from audit.errors import UserError

#: ``TrainConfig.sampling`` choices (see :class:`BatchSampler`).
SAMPLING = ("poisson", "shuffle")


def steps_per_epoch(sample_rate: float) -> int:
    """Batches per epoch of shuffled sampling: ``round(1 / q)``."""
    return max(1, int(round(1.0 / sample_rate)))


def sample_poisson(members: list[np.ndarray], rngs: list[np.random.Generator], q: float) -> tuple[np.ndarray,
                                                                                                   np.ndarray]:
    """Poisson sampling for each model, padded to a common length: (index, weight) arrays (R, B)."""
    return pad_batches([idx[rng.random(idx.shape[0]) < q] for idx, rng in zip(members, rngs, strict=True)])


def pad_batches(chosen: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """One batch per model padded to the longest: (index, weight) (R, B), weight 1 sampled, 0 padding."""
    width = max(1, max(c.shape[0] for c in chosen))
    index = np.zeros((len(chosen), width), dtype=np.int64)
    weight = np.zeros((len(chosen), width), dtype=np.float32)
    for r, c in enumerate(chosen):
        index[r, : c.shape[0]] = c
        weight[r, : c.shape[0]] = 1.0
    return index, weight


class BatchSampler:
    """The batches of every model, step after step: ``next() -> (index, weight)``, each (R, B).

    ``"poisson"``: each member joins each step independently with probability ``q`` (what the
    DP-SGD accountant assumes). ``"shuffle"``: at the start of every epoch of
    :func:`steps_per_epoch` steps, each model draws a random permutation of its members and takes
    consecutive, near-equal slices of it (``numpy.array_split``) — every member is in exactly one
    batch per epoch. Each model draws from its own generator, so results do not depend on which
    models are trained together.
    """

    def __init__(self, members: list[np.ndarray], rngs: list[np.random.Generator], q: float,
                 sampling: str = "poisson") -> None:
        if sampling not in SAMPLING:
            raise UserError(f"unknown batch sampling {sampling!r}; choose one of {', '.join(SAMPLING)}")
        self.members, self.rngs, self.q, self.sampling = members, rngs, q, sampling
        self.per_epoch = steps_per_epoch(q)
        self.step = 0
        self._slices: list[list[np.ndarray]] = []

    def next(self) -> tuple[np.ndarray, np.ndarray]:
        if self.sampling == "poisson":
            self.step += 1
            return sample_poisson(self.members, self.rngs, self.q)
        k = self.step % self.per_epoch
        if k == 0:
            self._slices = [np.array_split(rng.permutation(idx), self.per_epoch)
                            for idx, rng in zip(self.members, self.rngs, strict=True)]
        self.step += 1
        return pad_batches([s[k] for s in self._slices])


def batch_width_bound(members: list[np.ndarray], q: float, sampling: str = "poisson") -> int:
    """A high-probability bound on the padded batch width: max over models of a Binomial(n_r, q)
    count is below ``q n + 5 sqrt(q n) + 1`` except with negligible probability (Chernoff); a
    shuffled batch has at most ``ceil(n / steps_per_epoch)`` members."""
    n = max((m.shape[0] for m in members), default=1)
    if sampling == "shuffle":
        return max(1, math.ceil(n / steps_per_epoch(q)))
    mean = q * n
    return max(1, min(n, int(math.ceil(mean + 5 * math.sqrt(mean) + 1))))
