"""What the mechanism kind hands its reports (:class:`reports.presentation.Presentation`): its game in a
few words."""

from __future__ import annotations

from audit.stats.outcome import Game, Outcome
from reports.formatting import format_value


def game_phrase(outcome: Outcome) -> str:
    """How a mechanism audit played its game, in a few words.

    Args:
        outcome: the run's outcome.

    Returns:
        The phrase.
    """
    game = outcome.game or Game()
    return f"{format_value(game.draws_per_world)} draws on each side of its neighbouring pair"
