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
"""

from __future__ import annotations

import math

import numpy as np

from audit.stats.one_run.design import CanaryMechanism, grid_bounds

__all__ = ["simulate_last_iterate_scores", "last_iterate_expectation"]


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
