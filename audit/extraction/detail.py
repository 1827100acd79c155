"""The extraction kind's own result block (``RunKind.detail``), its keys written in ``results.json`` beside the
envelope's (:class:`audit.stats.outcome.Outcome`)."""

from __future__ import annotations

from dataclasses import dataclass

from audit.stats.blocks import nested
from audit.stats.outcome import Detail, Extraction

__all__ = ["ExtractionDetail"]


@dataclass(frozen=True, kw_only=True)
class ExtractionDetail(Detail):
    """A extraction run's own block.

    Attributes:
        extraction: what the extraction attacks recovered.
    """

    extraction: Extraction = nested(Extraction)
