"""The one-run canary game [Steinke, Nasr, Jagielski 2023, Algorithm 1] with shadow models.

The dataset is split, by a seeded permutation, into disjoint parts: a test set (accuracy only);
the target's natural training data; the target's ``m`` canaries; a shadow pool; and the shadows'
own ``m`` canaries. Each canary enters the target's training set by an independent fair coin. Each
of ``K`` shadow models [Shokri et al. 2017] trains on a random subset of the shadow pool (disjoint
from everything the target saw) plus its own fair-coin selection of the shadow canaries, so the
shadows play the same game as the target on data from the same distribution.

Reference models for LiRA [Carlini et al. 2022, Sec. IV-B] and RMIA [Zarifzadeh et al. 2024] are
optional: each of ``R`` reference models trains on its own random subset of the shadow pool plus some
of the *target's* canaries, assigned so that every canary is IN exactly ``floor(R/2)`` reference
models (chosen at random per canary, independently of the target's coins; with ``R = 1`` the one
reference model leaves every canary out). This assumes an adversary who knows the candidate
examples and their training labels, as LiRA's and RMIA's threat model does; the shadow models, by contrast,
never see the target's canaries (Shokri et al.'s disjoint-data setting).

Canary kinds. Drawn from the data (each costs the shadow pool one example): ``mislabelled``
(held-out example with a uniformly random wrong label) or ``natural`` (held-out example with its
true label). Synthetic, out of the data distribution and made to be memorable [Nasr et al. 2021,
Sec. 4 "crafted input canaries"; Steinke, Nasr, Jagielski 2023, Sec. 7 and Mahloujifar, Melis,
Chaudhuri 2025, Sec. 6 audit with such canaries], each with a uniformly random label and appended
to the data rather than taken from it, so that they also leave the whole pool to the shadows:
``sparse`` (:data:`SPARSE_PIXELS` random pixels at full intensity on a blank image, a different
pattern per canary), ``quiet`` (crafted for the final model: the same patterns drawn only on the
:data:`QUIET_FRACTION` of the pixels that vary least over public data, the shadow pool, which the target never
trains on; the clipping-aware idea of Jagielski, Ullman, Oprea 2020 (ClipBKD: the data's direction of least
variance) per pixel, so that the canary's gradient falls where the data's gradients barely reach and its clipped
step stands out of the noise) or ``blank`` (a constant image, intensities evenly spaced over [0, 1] in a
random order). The model has nothing in the data to explain a random label on such an input but
the canary itself. RMIA's population samples are made like the canaries and trained on by no model:
fresh synthetic canaries (:data:`SYNTHETIC_POPULATION`), or copies of the test images labelled as the
canaries are. Sources: docs/references.md, "Canaries and threat models".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from audit.choices import CRAFTED_CANARIES, MEMBERSHIP_CANARIES, SYNTHETIC_CANARIES
from audit.errors import UserError
from audit.stats.outcome import Game
from targets.datasets import Dataset

#: RMIA's population of synthetic canaries: fresh ones that no model trains on.
SYNTHETIC_POPULATION = 1000
#: Pixels switched on in a ``sparse`` canary (of 784 for MNIST: two patterns share ~0.5 pixel on average).
SPARSE_PIXELS = 20
#: The fraction of the pixels, those of least variance over the public data, a ``quiet`` canary draws from.
QUIET_FRACTION = 0.5
#: Test records of the game (accuracy only), at most a tenth of the data.
TEST_RECORDS = 500
#: How crafted canaries (:data:`audit.choices.CRAFTED_CANARIES`) are made: ``craft(public rows, count, rng)`` ->
#: (inputs (count, *shape), labels (count,)), from the public rows of the data (the shadow pool) and ``rng`` only
#: (:func:`audit.membership.crafted.canary_crafter`).
Crafter = Callable[[np.ndarray, int, np.random.Generator], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True, eq=False, kw_only=True)
class CanaryGame:
    """Who trains on what. ``data`` carries the canary labels used in training.

    Masks are over the rows of ``data``: ``target_mask`` (N,), ``shadow_masks`` (K, N).
    ``target_canaries`` / ``shadow_canaries`` are row indices (m,); ``target_in`` (m,) and
    ``shadow_in`` (K, m) are the fair coins (True = canary trained on).
    ``reference_masks`` (R, N) and ``reference_in`` (R, m) (which target canaries each LiRA
    reference model trains on) have R = 0 when no reference models were asked for. ``population``:
    rows no model trains on, made like the canaries (RMIA's population samples). The first
    ``natural_rows`` rows are the dataset's; the others were appended.
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
    population: np.ndarray | None = None
    natural_rows: int = 0

    @property
    def references(self) -> int:
        return 0 if self.reference_masks is None else int(self.reference_masks.shape[0])

    @property
    def m(self) -> int:
        return int(self.target_canaries.shape[0])

    @property
    def appended_rows(self) -> int:
        """Rows appended to the dataset (synthetic canaries, the population): the last rows of ``data``."""
        return len(self.data) - self.natural_rows

    def summary(self) -> Game:
        """results.json's ``game`` of the one-run canary game: its canaries and coins, the shadow and reference
        models and what each trains on (``reference_inclusion`` written as null without reference models)."""
        refs = self.references
        return Game(
            canaries=self.m, canary_kind=self.canary_kind, included=int(self.target_in.sum()),
            shadow_models=int(self.shadow_masks.shape[0]), target_train_size=int(self.target_mask.sum()),
            shadow_train_sizes=[int(s) for s in self.shadow_masks.sum(axis=1)],
            test_size=int(self.test_index.shape[0]),
            inclusion="independent fair coin per canary (one-run game, Steinke et al. 2023)",
            reference_models=refs, population=int(self.population.size),
            reference_inclusion=(f"each target canary IN exactly {refs // 2} of {refs} reference models (LiRA, "
                                 "RMIA)") if refs else None,
            nulls=frozenset(() if refs else {"reference_inclusion"}))


def mislabel(y: np.ndarray, n_classes: int, rng: np.random.Generator) -> np.ndarray:
    """A uniformly random label different from each true label."""
    return (y + rng.integers(1, n_classes, size=y.shape[0])) % n_classes


def quiet_pixels(public: np.ndarray) -> np.ndarray:
    """The :data:`QUIET_FRACTION` of the pixels (flat indices) of least variance over ``public`` inputs
    (ties broken by index), where a ``quiet`` canary draws its pattern."""
    flat = np.asarray(public, dtype=np.float64).reshape(len(public), -1)
    keep = max(SPARSE_PIXELS, int(round(QUIET_FRACTION * flat.shape[1])))
    return np.sort(np.argsort(flat.var(axis=0), kind="stable")[:keep])


def synthetic_canaries(kind: str, count: int, shape: tuple[int, ...], n_classes: int,
                       rng: np.random.Generator, public: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``count`` synthetic canaries of ``kind`` (:data:`SYNTHETIC_CANARIES`): inputs (count, *shape)
    float32 in [0, 1] and independent uniformly random labels (count,); ``quiet`` canaries need the
    ``public`` inputs their pixels are chosen on (:func:`quiet_pixels`)."""
    d = int(np.prod(shape))
    X = np.zeros((count, d), dtype=np.float32)
    if kind in ("sparse", "quiet"):
        if kind == "quiet" and public is None:
            raise UserError("quiet canaries need public data to choose their pixels on")
        pixels = np.arange(d) if kind == "sparse" else quiet_pixels(public)
        on = min(SPARSE_PIXELS, pixels.size)
        for i in range(count):
            X[i, rng.choice(pixels, size=on, replace=False)] = 1.0
    elif kind == "blank":
        X[:] = rng.permutation(np.linspace(0.0, 1.0, count, dtype=np.float32))[:, None]
    else:
        raise UserError(f"unknown synthetic canary {kind!r}; choose one of {', '.join(SYNTHETIC_CANARIES)}")
    return X.reshape(count, *shape), rng.integers(0, n_classes, size=count)


def check_canary_game(data: Dataset, n_train: int, m: int, shadows: int, canary_kind: str,
                      references: int = 0) -> None:
    """Raise UserError for a game :func:`build_canary_game` cannot play (before anything is trained)."""
    _check_game(canary_kind, m, shadows, references)
    _shadow_pool_size(data, n_train, m, min(TEST_RECORDS, len(data) // 10), canary_kind)


def build_canary_game(data: Dataset, n_train: int, m: int, shadows: int, canary_kind: str,
                      seed: int, references: int = 0, crafter: Crafter | None = None) -> CanaryGame:
    """Split ``data`` and toss the coins; raises UserError when the dataset is too small.

    ``references`` LiRA reference models are drawn from a separate random stream, so the target's
    and the shadows' data and coins do not depend on it. ``crafter`` makes crafted canaries (and their
    population) from the shadow pool before any coin is tossed.
    """
    _check_game(canary_kind, m, shadows, references)
    if canary_kind in CRAFTED_CANARIES and crafter is None:
        raise UserError(f"{canary_kind} canaries are designed on a public model: this game has none to train")
    n_test = min(TEST_RECORDS, len(data) // 10)
    shadow_pool_size = _shadow_pool_size(data, n_train, m, n_test, canary_kind)
    rng = np.random.default_rng([seed, 7])  # one stream, in this order: split, labels, coins, shadow sets
    game_data, (test_index, target_natural, target_canaries, shadow_canaries, shadow_pool) = _place_canaries(
        data, n_train, m, n_test, canary_kind, seed, rng, crafter)
    game_data, population = _with_population(game_data, data, (test_index, shadow_pool), canary_kind, seed, crafter)
    n = len(game_data)

    target_in = rng.random(m) < 0.5
    target_mask = np.zeros(n, dtype=bool)
    target_mask[target_natural] = True
    target_mask[target_canaries[target_in]] = True

    per_shadow = min(n_train, shadow_pool_size)
    shadow_in = rng.random((shadows, m)) < 0.5
    shadow_masks = np.zeros((shadows, n), dtype=bool)
    for k in range(shadows):
        shadow_masks[k, rng.choice(shadow_pool, size=per_shadow, replace=False)] = True
        shadow_masks[k, shadow_canaries[shadow_in[k]]] = True
    reference_masks, reference_in = _reference_games(references, m, n, shadow_pool, per_shadow, target_canaries,
                                                     seed)
    return CanaryGame(data=game_data, canary_kind=canary_kind, test_index=test_index, target_mask=target_mask,
                      target_canaries=target_canaries, target_in=target_in, shadow_masks=shadow_masks,
                      shadow_canaries=shadow_canaries, shadow_in=shadow_in, reference_masks=reference_masks,
                      reference_in=reference_in, population=population, natural_rows=len(data))


def _check_game(canary_kind: str, m: int, shadows: int, references: int) -> None:
    """Raise UserError for a game that cannot be played: an unknown canary kind, fewer than 2 shadow
    models or canaries, a negative number of reference models."""
    if canary_kind not in MEMBERSHIP_CANARIES:
        raise UserError(f"unknown canary kind {canary_kind!r}; choose one of {', '.join(MEMBERSHIP_CANARIES)}")
    if shadows < 2:
        raise UserError(f"the shadow attack needs at least 2 shadow models, got {shadows}")
    if references < 0:
        raise UserError(f"the number of reference models cannot be negative, got {references}")
    if m < 2:
        raise UserError(f"need at least 2 canaries, got {m}")


def _shadow_pool_size(data: Dataset, n_train: int, m: int, n_test: int, canary_kind: str) -> int:
    """The records left for the shadow models' training sets once the test records, the target's
    training set and (natural canaries) the 2 m canaries are set apart; at least ``n_train // 2``."""
    n = len(data)
    synthetic = canary_kind in SYNTHETIC_CANARIES
    pooled = 0 if synthetic else 2 * m
    shadow_pool_size = n - n_test - n_train - pooled
    if shadow_pool_size < n_train // 2:
        raise UserError(
            f"dataset {data.name} has {n} examples, too few for {n_train} training examples, "
            + ("" if synthetic else f"2 x {m} canaries ")
            + "and a shadow pool; "
            + ("" if synthetic else "lower --canaries, use a synthetic --canary kind, ")
            + "or use a larger dataset (--data-dir)"
        )
    return shadow_pool_size


def _made_canaries(kind: str, count: int, data: Dataset, public: np.ndarray, rng: np.random.Generator,
                   crafter: Crafter | None) -> tuple[np.ndarray, np.ndarray]:
    """``count`` synthetic or crafted canaries of ``kind`` (inputs, labels), made from ``rng`` and the ``public``
    rows of ``data`` only."""
    if kind in CRAFTED_CANARIES:
        return crafter(public, count, rng)
    return synthetic_canaries(kind, count, data.shape, data.n_classes, rng, public=data.X[public])


def _place_canaries(data: Dataset, n_train: int, m: int, n_test: int, canary_kind: str, seed: int,
                    rng: np.random.Generator, crafter: Crafter | None = None) -> tuple[Dataset, list[np.ndarray]]:
    """The game's data and its index sets (test records, the target's natural training records, the
    target's m canaries, the shadows' m canaries, the shadow pool) from a permutation drawn from ``rng``:
    synthetic canaries are appended as new rows (the target's, then the shadows'); natural ones are
    records of ``data``, relabelled by ``rng`` when mislabelled."""
    n = len(data)
    order = rng.permutation(n)
    if canary_kind in SYNTHETIC_CANARIES:
        test_index, target_natural, shadow_pool = np.split(order, np.cumsum([n_test, n_train]))
        target_canaries, shadow_canaries = n + np.arange(m), n + m + np.arange(m)
        cX, cy = _made_canaries(canary_kind, 2 * m, data, shadow_pool, np.random.default_rng([seed, 9]), crafter)
        game_data = Dataset(np.concatenate([data.X, cX]), np.concatenate([data.y, cy]).astype(data.y.dtype),
                            data.name, data.n_classes, data.shape, data.source)
        return game_data, [test_index, target_natural, target_canaries, shadow_canaries, shadow_pool]
    cut = np.cumsum([n_test, n_train, m, m])
    test_index, target_natural, target_canaries, shadow_canaries, shadow_pool = np.split(order, cut)
    y = data.y.copy()
    if canary_kind == "mislabelled":
        canaries = np.concatenate([target_canaries, shadow_canaries])
        y[canaries] = mislabel(y[canaries], data.n_classes, rng)
    game_data = Dataset(data.X, y, data.name, data.n_classes, data.shape, data.source)
    return game_data, [test_index, target_natural, target_canaries, shadow_canaries, shadow_pool]


def _with_population(game_data: Dataset, data: Dataset, held_out: tuple[np.ndarray, np.ndarray], canary_kind: str,
                     seed: int, crafter: Crafter | None = None) -> tuple[Dataset, np.ndarray]:
    """``game_data`` with RMIA's population appended, and its rows: made like the canaries and trained on
    by no model (its own random stream): fresh synthetic canaries (``quiet`` ones on the pixels chosen on the
    same shadow pool), or copies of the test images labelled as the canaries are. ``held_out``: the test
    records and the shadow pool."""
    test_index, shadow_pool = held_out
    pop_rng = np.random.default_rng([seed, 10])
    if canary_kind in SYNTHETIC_CANARIES:
        pX, py = _made_canaries(canary_kind, SYNTHETIC_POPULATION, data, shadow_pool, pop_rng, crafter)
    else:
        pX, py = data.X[test_index], data.y[test_index]
        if canary_kind == "mislabelled":
            py = mislabel(py, data.n_classes, pop_rng)
    population = len(game_data) + np.arange(len(py))
    game_data = Dataset(np.concatenate([game_data.X, pX]), np.concatenate([game_data.y, py]).astype(data.y.dtype),
                        data.name, data.n_classes, data.shape, data.source)
    return game_data, population


def _reference_games(references: int, m: int, n: int, shadow_pool: np.ndarray, per_shadow: int,
                     target_canaries: np.ndarray, seed: int) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(masks, coins) of the LiRA/RMIA reference models (None without them), from their own stream: each
    target canary in exactly half of them, each trained on ``per_shadow`` records of the shadow pool."""
    if not references:
        return None, None
    ref_rng = np.random.default_rng([seed, 8])
    reference_in = np.zeros((references, m), dtype=bool)
    for i in range(m):
        reference_in[ref_rng.choice(references, size=references // 2, replace=False), i] = True
    reference_masks = np.zeros((references, n), dtype=bool)
    for r in range(references):
        reference_masks[r, ref_rng.choice(shadow_pool, size=per_shadow, replace=False)] = True
        reference_masks[r, target_canaries[reference_in[r]]] = True
    return reference_masks, reference_in
