"""How a report of each audit kind is drawn, registered by the kinds themselves: the figure it opens
with, the sentences under it and where its compact table comes from (:class:`Presentation`).

The reports list no kinds and import nothing of the kinds: each kind's record
(:class:`audit.kinds.RunKind`, in ``audit/<kind>/command.py``) registers its presentation here when it is
created (:func:`register_presentation`), and :mod:`reports.html` and :mod:`reports.summary` look up the
one of the outcome's ``kind`` (:func:`presentation_of`); a kind that registered none is drawn as a claim
audit (:data:`DEFAULT`). Standard library only at run time: the kinds' records are read by ``--help``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the annotation only: --help reads the records without the outcome's types
    from audit.stats.outcome import Outcome


@dataclass(frozen=True, kw_only=True)
class Presentation:
    """How a report of one kind is drawn.

    Attributes:
        headline: File name of the figure the report opens with; None: the first figure the runner
            listed in the outcome's ``figures``.
        sentences: ``module:function`` of the kind's opening sentences, ``function(outcome) -> list[str]``
            of the run's :class:`audit.stats.outcome.Outcome`; None: those of a claim audit
            (:func:`reports.summary.headline_sentences`).
        tables_lead: True when the first of the runner's ``tables`` is the compact table shown under the
            headline (not repeated below it); False: the table of attacks is built from ``attacks``.
    """

    headline: str | None = "tradeoff.png"
    sentences: str | None = None
    tables_lead: bool = False

    def sentence_function(self) -> Callable[[Outcome], list[str]] | None:
        """The function named by :attr:`sentences` (imported now), or None.

        Returns:
            The function, or None.
        """
        if self.sentences is None:
            return None
        module, _, attribute = self.sentences.partition(":")
        return getattr(importlib.import_module(module), attribute)


#: The presentation of a kind that registered none: a claim audit opening with its tradeoff curve.
DEFAULT = Presentation()
_REGISTERED: dict[str, Presentation] = {}


def register_presentation(kind: str, presentation: Presentation) -> None:
    """Record how reports of ``kind`` (the outcome's ``kind``) are drawn; registering again replaces it.

    Args:
        kind: the run kind.
        presentation: how its reports are drawn.
    """
    _REGISTERED[kind] = presentation


def presentation_of(kind: object) -> Presentation:
    """The registered presentation of ``kind``, else :data:`DEFAULT`.

    Args:
        kind: a run kind (the outcome's ``kind``).

    Returns:
        The presentation.
    """
    return _REGISTERED.get(kind, DEFAULT) if isinstance(kind, str) else DEFAULT
