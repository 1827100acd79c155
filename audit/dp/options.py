"""The options of ``run dp`` and ``sweep dp`` (stored in config.json)."""

from __future__ import annotations

from dataclasses import dataclass

from audit.run_options import CommonRunOptions


@dataclass(frozen=True, kw_only=True)
class DPOptions(CommonRunOptions):
    """Everything that determines a ``run dp`` (stored in config.json)."""

    runs: int | None = None
    canary: str | None = None  # None: the target's default (audit.target_defaults)
    threat: str | None = None
    init: str = "random"
    calibration_runs: int = 0
    check_config: bool = False  # the accounting check of a trainer plugin alone (audit.dp.plugins.config)
    one_run: bool = False  # one training with M gradient canaries (audit.dp.one_run.game)
    canaries: int | None = None  # None: by simulating the claim (audit.stats.one_run.design.default_canary_count)
    input_canaries: int | None = None  # plugin one-run: records/texts in the audited run (None: by its cost; 0: none)
    guesses: str | int | None = None  # LM black-box one-run: "K", "K:0" or "K:K" (audit.arguments.guess_spec)


@dataclass(frozen=True, kw_only=True)
class SweepOptions(CommonRunOptions):
    """``sweep dp``: the audit of ``target`` at each claimed epsilon, for each threat model (the common
    options of every run, then these); ``epsilon`` is not one of them (``epsilons`` is)."""

    epsilons: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0)
    threats: tuple[str, ...] | None = None
    canary: str | None = None
    runs: int | None = None
    init: str = "random"
    calibration_runs: int = 0
