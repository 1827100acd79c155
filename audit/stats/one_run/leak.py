"""Guess shapes of a black-box one-run audit chosen to catch a leak confined to some of the canaries
(issue 39, item 3). Sources: docs/references.md, "One-run auditing".

A gate's black-box one-run audit asks whether the released model leaks MORE than claimed, and real leaks
outside DP-SGD are partial: a non-private pass over a quarter of the data (a "polish" epoch) reaches a
quarter of the included canaries, and a model memorises some canaries and not others. The design of
:mod:`audit.stats.one_run.design` simulates the claim's own mechanism (the perfect attack AT the claim),
which often prefers two-sided guesses; against a partial leak those dilute the evidence: the "out" guesses
are drawn from a pool where the included canaries that did not leak look like excluded ones.

The leak model (fixed in advance, never fitted to the audited scores): of the ``m`` canaries, half are in
(their expectation); a fraction ``f`` of the included ones score above every other canary, the others are
indistinguishable from the excluded ones. With ``L = f m/2`` leaked canaries, a guess shape
``(k_pos, k_neg)`` gets, in expectation,

* right "in" guesses: ``min(k_pos, L) + max(0, k_pos - L) (1 - f)/(2 - f)`` (past the leaked ones the top
  scores come from a pool of ``m/2`` excluded and ``(1 - f) m/2`` non-leaked included canaries);
* right "out" guesses: ``k_neg / (2 - f)`` (the bottom scores come from the same pool).

With ``errors`` e, a share e of the leaked canaries' top places go to the others (the in-guesses right:
``(1 - e) min(k_pos, L) + (k_pos - (1 - e) min(k_pos, L)) (1 - f)/(2 - f)``): a design for e = 0 needs every
top guess right, one for e > 0 gives up the smallest leaks to tolerate imperfect ones. The shape's *reach* is
the smallest ``f`` at which that number of right guesses (rounded down) makes the one-run bound exceed the
claimed epsilon (the bound is increasing in ``f``: bisection). The design takes
the shape of the smallest reach — one- and two-sided shapes weighed on the same scale — ties to the fewest
guesses; ``sides`` restricts the candidates (the ``--guesses K:0`` one-sided and ``K:K`` two-sided forms).
Its perfect-attack expectation and ceiling are then those of :func:`audit.stats.one_run.design`'s
simulation of the claimed mechanism at that shape, so results read the same as any design's.

Validity is untouched: the shape depends on the claim, ``m`` and the confidence only, never on the audited
coins or scores, and both one-run tests are valid for any shape fixed in advance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from audit.errors import UserError
from audit.stats.one_run.design import (
    CanaryMechanism,
    DesignObjective,
    OneRunDesign,
    cached_bound,
    check_count,
    design_from_games,
    guess_shapes,
    simulated_games,
)

#: The candidate shapes: "both" (one- and two-sided), "one" (``k_neg = 0``), "two" (``k_neg = k_pos``).
Sides = Literal["both", "one", "two"]
#: Bisection steps over the leaked fraction (resolution 2^-14).
_STEPS = 14


def expected_right(shape: tuple[int, int], canaries: int, fraction: float, errors: float = 0.0) -> int:
    """Right guesses of ``shape`` when ``fraction`` of the included canaries leak, ``errors`` of the leaked ones
    falling back among the others (module docstring), rounded down."""
    k_pos, k_neg = shape
    top = min(k_pos, fraction * canaries / 2)
    rest = (1 - fraction) / (2 - fraction)
    right = top * (1 - errors) + (k_pos - top + top * errors) * rest + k_neg / (2 - fraction)
    return int(math.floor(right + 1e-9))


@dataclass(frozen=True)
class Leak:
    """The leak a design must catch: the claim it must reject (``claimed_epsilon``) and the share of the leaked
    canaries' top places it expects others to take (``errors``, :func:`expected_right`)."""

    claimed_epsilon: float
    errors: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.errors < 1.0:
            raise UserError(f"the leak design's errors must lie in [0, 1) (got {self.errors!r})")


def reach(shape: tuple[int, int], canaries: int, leak: Leak, objective: DesignObjective) -> float:
    """The smallest leaked fraction at which ``shape`` rejects ``leak.claimed_epsilon`` (inf: not even at 1)."""
    guesses = sum(shape)

    def caught(f: float) -> bool:
        right = expected_right(shape, canaries, f, leak.errors)
        return cached_bound(objective.method, guesses, right, canaries, objective.delta,
                             objective.confidence) > leak.claimed_epsilon

    if not caught(1.0):
        return math.inf
    low, high = 0.0, 1.0
    for _ in range(_STEPS):
        mid = (low + high) / 2
        low, high = (low, mid) if caught(mid) else (mid, high)
    return high


def shapes_for(canaries: int, method: str, guess_counts: ArrayLike | None, sides: Sides) -> list[tuple[int, int]]:
    """The candidate shapes of :func:`audit.stats.one_run.design.guess_shapes` on the ``sides`` asked for."""
    if sides not in ("both", "one", "two"):
        raise UserError(f"guess sides must be 'both', 'one' or 'two' (got {sides!r})")
    shapes = [s for s in guess_shapes(canaries, method, guess_counts)
              if sides == "both" or (s[1] == 0) == (sides == "one")]
    if not shapes:
        raise UserError(f"no two-sided guess shape fits {canaries} canaries (2 K guesses needed)")
    return shapes


def choose_leak_design(mechanism: CanaryMechanism, canaries: int, leak: Leak, objective: DesignObjective,
                       rng: np.random.Generator | int | None, *, simulations: int = 20,
                       guess_counts: ArrayLike | None = None, sides: Sides = "both") -> OneRunDesign:
    """The guess shape of the smallest reach for ``leak`` (module docstring) among ``guess_counts`` (default the
    design's grid) on ``sides``, with the perfect-attack expectation of ``mechanism`` (the claim's) at that shape
    from ``2 x simulations`` simulated games; ``grid`` and ``grid_value`` hold every shape and its reach."""
    m = check_count(canaries, "canaries", 2)
    shapes = shapes_for(m, objective.method, guess_counts, sides)
    reaches = np.array([reach(s, m, leak, objective) for s in shapes])
    j = int(np.argmin(reaches))  # ties: the first, i.e. the fewest guesses, one-sided before two-sided
    games = simulated_games(mechanism, m, 2 * simulations, np.random.default_rng(rng))
    chosen = design_from_games(games[:simulations], games[simulations:], mechanism, [shapes[j]],
                                objective.method, objective.delta, objective.confidence, objective.criterion)
    return replace(chosen, criterion="leak", grid=tuple(shapes), grid_value=tuple(float(r) for r in reaches))
