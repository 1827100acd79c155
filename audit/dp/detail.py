"""The dp kind's own result blocks (``RunKind.detail``): a dp run's (:class:`DpDetail`: the one-run game, the
accounting check, what each threat can catch) and a sweep's (:class:`SweepDetail`: its points and audited
targets). Their keys are written in ``results.json`` beside the envelope's (:class:`audit.stats.outcome.Outcome`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from audit.stats.blocks import LIST, nested
from audit.stats.outcome import ConfigCheck, Detail, OneRun, SweepPoint, SweepRow

__all__ = ["DpDetail", "SweepDetail"]


@dataclass(frozen=True, kw_only=True)
class DpDetail(Detail):
    """A dp run's own block: what only some of its games write (a many-run game writes none of it).

    Attributes:
        one_run: a one-run dp audit.
        config_check: a dp accounting check.
        threat_coverage: which mistakes each threat and the accounting check can catch (a plugin's one-run dp).
    """

    one_run: OneRun | None = nested(OneRun, optional=True)
    config_check: ConfigCheck | None = nested(ConfigCheck, optional=True)
    threat_coverage: Sequence[Mapping[str, Any]] | None = None

    def perfect_expectation(self) -> float | None:
        """``one_run.expected_perfect.mean`` (:meth:`audit.stats.outcome.Detail.perfect_expectation`)."""
        expected = self.one_run.expected_perfect if self.one_run is not None else None
        return float(expected.mean) if expected is not None and isinstance(expected.mean, (int, float)) else None

    def accounting_check(self) -> ConfigCheck | None:
        """``config_check`` (:meth:`audit.stats.outcome.Detail.accounting_check`)."""
        return self.config_check

    def roc_band(self) -> bool:
        """A one-run game draws its ROC's confidence band (:meth:`audit.stats.outcome.Detail.roc_band`)."""
        return self.one_run is not None


@dataclass(frozen=True, kw_only=True)
class SweepDetail(Detail):
    """A sweep's own block: the points of its figure and its audited targets.

    Attributes:
        sweep: a sweep's points.
        rows: a sweep's audited targets.
    """

    sweep: tuple[SweepPoint, ...] = nested(SweepPoint, LIST)
    rows: tuple[SweepRow, ...] = nested(SweepRow, LIST)
