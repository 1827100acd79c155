"""The options every ``run`` kind takes, as one frozen dataclass that each runner's options extend."""

from __future__ import annotations

from dataclasses import dataclass

#: Names of the common options, in field order (also the command-line ``dest`` names).
COMMON_OPTION_NAMES = ("target", "out", "seed", "device", "quick", "epsilon", "delta", "data_dir", "quiet", "confidence")


@dataclass(frozen=True)
class CommonRunOptions:
    """The options every run kind takes (``audit.commands.run.common_options``); stored in config.json."""

    target: str
    out: str = "runs"
    seed: int = 0
    device: str = "auto"
    quick: bool = False
    epsilon: float | None = None
    delta: float | None = None
    data_dir: str | None = None
    quiet: bool = False
    confidence: float = 0.95

    @classmethod
    def common_kwargs(cls, args) -> dict:
        """The common options from parsed command-line ``args``."""
        return {name: getattr(args, name) for name in COMMON_OPTION_NAMES}
