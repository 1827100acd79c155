"""The reconstruction kind's own result block (``RunKind.detail``), its keys written in ``results.json`` beside the
envelope's (:class:`audit.stats.outcome.Outcome`)."""

from __future__ import annotations

from dataclasses import dataclass

from audit.stats.blocks import nested
from audit.stats.outcome import Detail, Reconstruction

__all__ = ["ReconstructionDetail"]


@dataclass(frozen=True, kw_only=True)
class ReconstructionDetail(Detail):
    """A reconstruction run's own block.

    Attributes:
        reconstruction: the reconstruction-robustness game and its points.
    """

    reconstruction: Reconstruction = nested(Reconstruction)
