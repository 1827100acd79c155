"""The options of ``run membership`` (stored in config.json)."""

from __future__ import annotations

from dataclasses import dataclass

from attacks.names import ATTACKS
from audit.run_options import CommonRunOptions


@dataclass(frozen=True, kw_only=True)
class MembershipOptions(CommonRunOptions):
    """Everything that determines a membership run (stored in config.json)."""

    canary: str | None = None  # None: the preset of the target (game_preset)
    canaries: int | None = None
    shadows: int | None = None
    attacks: tuple[str, ...] = tuple(ATTACKS)
    references: int | None = None
    lira_variance: str = "auto"
    rmia_a: float | None = None
    max_memory: str | None = None
