"""The inversion kind's own result block (``RunKind.detail``), its keys written in ``results.json`` beside the
envelope's (:class:`audit.stats.outcome.Outcome`)."""

from __future__ import annotations

from dataclasses import dataclass

from audit.stats.blocks import nested
from audit.stats.outcome import Detail, Inversion

__all__ = ["InversionDetail"]


@dataclass(frozen=True, kw_only=True)
class InversionDetail(Detail):
    """An inversion run's own block.

    Attributes:
        inversion: what the model-inversion attack reconstructed.
    """

    inversion: Inversion = nested(Inversion)
