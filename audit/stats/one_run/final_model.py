"""What a perfect attack on the final model expects in a one-run game, under the last-iterate heuristic
[Steinke, Nasr, Ganesh, Balle, Choquette-Choo, Jagielski, Hayes, Thakurta, Smith, Terzis 2025, ICLR].

With linear losses a canary's coordinate of DP-SGD's last iterate (rate q, noise multiplier sigma, T steps,
clip 1) is ``N(0, sigma^2 T)`` when it is out and, when it is in, that plus the number of steps that sampled
it, ``Bin(T, q)``: the pair of :mod:`audit.theory.last_iterate`. Its likelihood ratio increases with the
coordinate, so the coordinate itself is the perfect attack's score. The M canaries of a one-run game are M
independent draws (each in by its own fair coin), and the bound of fixed guesses on simulated games is what
an attack that sees only the final model could expect at best if the model were linear: the final-model
counterpart of :mod:`audit.stats.one_run.design`'s perfect-attack expectation, a reference that decides
nothing. Sources: docs/references.md, "Last-iterate heuristic".

The same games also choose the guesses of a black-box (final-model) audit before its training
(:func:`choose_final_model_design`): the score an attack reads from a final model is a sum over the steps,
close to the Gaussian pair above, whose two tails mirror each other, whereas the per-step likelihood ratio that
:mod:`audit.stats.one_run.design` simulates has a long "in" tail only; so one- and two-sided guesses are weighed
on games of the final model, not of the updates.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from numpy.typing import ArrayLike

from audit.stats.one_run.design import (
    CanaryMechanism,
    DesignObjective,
    OneRunDesign,
    cached_bound,
    check_count,
    design_from_games,
    grid_bounds,
)
from audit.stats.one_run.leak import Sides, shapes_for

__all__ = ["simulate_last_iterate_scores", "last_iterate_expectation", "choose_final_model_design"]


def simulate_last_iterate_scores(canaries: int, mechanism: CanaryMechanism,
                                 rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """One simulated one-run game on a linear model's final iterate: ``(scores, members)`` of ``canaries``
    canaries, each in by its own fair coin, its score its coordinate of the last iterate (units of C).

    Args:
        canaries: M.
        mechanism: the DP-SGD the code ran (q, sigma, T).
        rng: the random stream.

    Returns:
        The scores and the fair coins.
    """
    q, sigma, steps = float(mechanism.sample_rate), float(mechanism.noise_multiplier), int(mechanism.steps)
    members = rng.random(canaries) < 0.5
    scores = rng.normal(0.0, sigma * math.sqrt(steps), canaries) + members * rng.binomial(steps, q, canaries)
    return scores, members


def last_iterate_expectation(mechanism: CanaryMechanism, canaries: int, guesses: tuple[int, int], method: str,
                             delta: float, confidence: float, games: int, seed: int) -> dict:
    """The bound of ``guesses`` (k+ "in" for the highest scores, k- "out" for the lowest) with ``method``
    (:data:`audit.stats.one_run.design.DESIGN_METHODS`) over ``games`` simulated final-model games.

    Args:
        mechanism: the DP-SGD the code ran.
        canaries: M.
        guesses: (k+, k-).
        method: ``fdp`` or ``steinke``.
        delta: delta of the bound.
        confidence: its confidence.
        games: simulated games.
        seed: their seed.

    Returns:
        ``{"mean", "sd", "range_5_95", "games", "k_pos", "k_neg", "method"}``.
    """
    rng = np.random.default_rng([seed, 71])
    shape = [(int(guesses[0]), int(guesses[1]))]
    bounds = np.array([grid_bounds(*simulate_last_iterate_scores(canaries, mechanism, rng), shape, method, delta,
                                   confidence)[0] for _ in range(games)])
    return {"mean": float(bounds.mean()), "sd": float(bounds.std(ddof=1)) if games > 1 else 0.0,
            "range_5_95": [float(np.quantile(bounds, 0.05)), float(np.quantile(bounds, 0.95))],
            "games": int(games), "k_pos": shape[0][0], "k_neg": shape[0][1], "method": method}


def choose_final_model_design(mechanism: CanaryMechanism, canaries: int, claimed_epsilon: float,
                              objective: DesignObjective, rng: np.random.Generator | int | None, *,
                              simulations: int = 20, guess_counts: ArrayLike | None = None,
                              sides: Sides = "both") -> OneRunDesign:
    """The guess shape of a black-box one-run audit, fixed before its training from the claim alone.

    Rule: among the candidate shapes (``(k, 0)`` and ``(k, k)`` for every count of
    :func:`audit.stats.one_run.design.guess_count_grid` or ``guess_counts``, on ``sides``), keep those that can
    reject the claim, i.e. whose ceiling (every guess right) exceeds ``claimed_epsilon`` (a shape that cannot
    never flags a violation; all of them when none can), and take the one with the largest mean
    (``objective.criterion``) bound over ``simulations`` games of the claimed mechanism's final model
    (:func:`simulate_last_iterate_scores`: the score a perfect attack on a linear model's last iterate reads);
    ``simulations`` further games give its expected bound, spread and ceiling. No audited coin or score is
    used, so the one-run bounds of the chosen shape are valid whatever the code does, and one shape competes
    (the verdict's family is unchanged).

    Args:
        mechanism: the claimed DP-SGD (q, sigma, T), or the Gaussian mechanism a claim is simulated as.
        canaries: M.
        claimed_epsilon: the epsilon the audit tests.
        objective: the bound (method, delta, confidence) and the criterion over the games.
        rng: the generator (or seed) of the simulated games.
        simulations: the games that choose the shape (as many evaluate it).
        guess_counts: the candidate counts (default the grid).
        sides: ``"both"``, ``"one"`` (``k_neg = 0``) or ``"two"`` (``k_neg = k_pos``).

    Returns:
        The design (``criterion`` ``"final-model"``; ``grid``/``grid_value``: the shapes that competed and
        their mean bound).
    """
    m = check_count(canaries, "canaries", 2)
    sims = check_count(simulations, "simulations")
    method, delta, confidence = objective.method, objective.delta, objective.confidence
    shapes = shapes_for(m, method, guess_counts, sides)
    rejecting = [s for s in shapes if cached_bound(method, sum(s), sum(s), m, delta, confidence) > claimed_epsilon]
    gen = np.random.default_rng(rng)
    games = [simulate_last_iterate_scores(m, mechanism, gen) for _ in range(2 * sims)]
    chosen = design_from_games(games[:sims], games[sims:], mechanism, rejecting or shapes, method, delta,
                               confidence, objective.criterion)
    return replace(chosen, criterion="final-model")
