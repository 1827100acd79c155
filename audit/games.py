"""The one-run canary game [Steinke, Nasr, Jagielski 2023, Algorithm 1] with shadow models.

The dataset is split, by a seeded permutation, into disjoint parts: a test set (accuracy only);
the target's natural training data; the target's ``m`` canaries; a shadow pool; and the shadows'
own ``m`` canaries. Each canary enters the target's training set by an independent fair coin. Each
of ``K`` shadow models [Shokri et al. 2017] trains on a random subset of the shadow pool (disjoint
from everything the target saw) plus its own fair-coin selection of the shadow canaries, so the
shadows play the same game as the target on data from the same distribution.

Reference models for LiRA [Carlini et al. 2022, Sec. IV-B] are optional: each of ``R`` reference
models trains on its own random subset of the shadow pool plus some of the *target's* canaries,
assigned so that every canary is IN exactly ``floor(R/2)`` reference models (chosen at random per
canary, independently of the target's coins). This assumes an adversary who knows the candidate
examples and their training labels, as LiRA's threat model does; the shadow models, by contrast,
never see the target's canaries (Shokri et al.'s disjoint-data setting).

Canary kinds: ``mislabelled`` (held-out example with a uniformly random wrong label — the
strongest black-box signal) or ``natural`` (held-out example with its true label).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from audit.choices import MEMBERSHIP_CANARIES
from audit.errors import UserError
from targets.datasets import Dataset


@dataclass(frozen=True, eq=False)
class CanaryGame:
    """Who trains on what. ``data`` carries the canary labels used in training.

    Masks are over the rows of ``data``: ``target_mask`` (N,), ``shadow_masks`` (K, N).
    ``target_canaries`` / ``shadow_canaries`` are row indices (m,); ``target_in`` (m,) and
    ``shadow_in`` (K, m) are the fair coins (True = canary trained on).
    ``reference_masks`` (R, N) and ``reference_in`` (R, m) (which target canaries each LiRA
    reference model trains on) have R = 0 when no reference models were asked for.
    """

    data: Dataset
    canary_kind: str
    test_index: np.ndarray
    target_mask: np.ndarray
    target_canaries: np.ndarray
    target_in: np.ndarray
    shadow_masks: np.ndarray
    shadow_canaries: np.ndarray
    shadow_in: np.ndarray
    reference_masks: np.ndarray | None = None
    reference_in: np.ndarray | None = None

    @property
    def references(self) -> int:
        return 0 if self.reference_masks is None else int(self.reference_masks.shape[0])

    @property
    def m(self) -> int:
        return int(self.target_canaries.shape[0])

    def summary(self) -> dict:
        return {
            "canaries": self.m,
            "canary_kind": self.canary_kind,
            "included": int(self.target_in.sum()),
            "shadow_models": int(self.shadow_masks.shape[0]),
            "target_train_size": int(self.target_mask.sum()),
            "shadow_train_sizes": [int(s) for s in self.shadow_masks.sum(axis=1)],
            "test_size": int(self.test_index.shape[0]),
            "inclusion": "independent fair coin per canary (one-run game, Steinke et al. 2023)",
            "reference_models": self.references,
            "reference_inclusion": (f"each target canary IN exactly {self.references // 2} of {self.references} "
                                    "reference models (LiRA, Carlini et al. 2022)") if self.references else None,
        }


def mislabel(y: np.ndarray, n_classes: int, rng: np.random.Generator) -> np.ndarray:
    """A uniformly random label different from each true label."""
    return (y + rng.integers(1, n_classes, size=y.shape[0])) % n_classes


def build_canary_game(data: Dataset, n_train: int, m: int, shadows: int, canary_kind: str,
                      seed: int, n_test: int = 500, references: int = 0) -> CanaryGame:
    """Split ``data`` and toss the coins; raises UserError when the dataset is too small.

    ``references`` LiRA reference models are drawn from a separate random stream, so the target's
    and the shadows' data and coins do not depend on it.
    """
    if canary_kind not in MEMBERSHIP_CANARIES:
        raise UserError(f"unknown canary kind {canary_kind!r}; choose one of {', '.join(MEMBERSHIP_CANARIES)}")
    if shadows < 2:
        raise UserError(f"the shadow attack needs at least 2 shadow models, got {shadows}")
    if references and references < 4:
        raise UserError(f"LiRA needs at least 4 reference models (2 IN, 2 OUT per canary), got {references}")
    if m < 2:
        raise UserError(f"need at least 2 canaries, got {m}")
    n = len(data)
    n_test = min(n_test, n // 10)
    shadow_pool_size = n - n_test - n_train - 2 * m
    if shadow_pool_size < n_train // 2:
        raise UserError(
            f"dataset {data.name} has {n} examples, too few for {n_train} training examples, "
            f"2 x {m} canaries and a shadow pool; lower --canaries or use a larger dataset (--data-dir)"
        )
    rng = np.random.default_rng([seed, 7])
    order = rng.permutation(n)
    cut = np.cumsum([n_test, n_train, m, m])
    test_index, target_natural, target_canaries, shadow_canaries, shadow_pool = np.split(order, cut)
    y = data.y.copy()
    if canary_kind == "mislabelled":
        canaries = np.concatenate([target_canaries, shadow_canaries])
        y[canaries] = mislabel(y[canaries], data.n_classes, rng)
    game_data = Dataset(data.X, y, data.name, data.n_classes, data.shape, data.source)

    target_in = rng.random(m) < 0.5
    target_mask = np.zeros(n, dtype=bool)
    target_mask[target_natural] = True
    target_mask[target_canaries[target_in]] = True

    shadow_in = rng.random((shadows, m)) < 0.5
    shadow_masks = np.zeros((shadows, n), dtype=bool)
    per_shadow = min(n_train, shadow_pool_size)
    for k in range(shadows):
        shadow_masks[k, rng.choice(shadow_pool, size=per_shadow, replace=False)] = True
        shadow_masks[k, shadow_canaries[shadow_in[k]]] = True
    reference_masks = reference_in = None
    if references:
        ref_rng = np.random.default_rng([seed, 8])
        reference_in = np.zeros((references, m), dtype=bool)
        for i in range(m):
            reference_in[ref_rng.choice(references, size=references // 2, replace=False), i] = True
        reference_masks = np.zeros((references, n), dtype=bool)
        for r in range(references):
            reference_masks[r, ref_rng.choice(shadow_pool, size=per_shadow, replace=False)] = True
            reference_masks[r, target_canaries[reference_in[r]]] = True
    return CanaryGame(game_data, canary_kind, test_index, target_mask, target_canaries, target_in,
                      shadow_masks, shadow_canaries, shadow_in, reference_masks, reference_in)
