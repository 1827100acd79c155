"""How a report of each audit kind is drawn, declared by the kinds themselves: the figure it opens
with, the sentences under it and where its compact table comes from (:class:`Presentation`).

The reports list no kinds: each kind's record (:class:`audit.kinds.RunKind`, in
``audit/<kind>/command.py``) names its presentation, and :mod:`reports.html` and :mod:`reports.summary`
read the one of the outcome's ``kind`` when they draw it (:func:`presentation_of`), from the table of
kinds (:mod:`audit.kind_table`), as pip reads its table of commands: nothing is registered when a module
is imported, so a library caller of :func:`reports.html.render_report` gets the report the command
writes. A kind that names none is drawn as a claim audit (:data:`DEFAULT`). Standard library only at run
time: the kinds' records are read by ``--help``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from audit.kind_table import kind_records


@dataclass(frozen=True, kw_only=True)
class Presentation:
    """How a report of one kind is drawn: what the kind hands the reports (each function named as
    ``module:function``, imported when a report is drawn).

    Attributes:
        headline: File name of the figure the report opens with; None: the first figure the runner
            listed in the outcome's ``figures``.
        sentences: The kind's opening sentences, ``function(outcome) -> list[str]`` of the run's
            :class:`audit.stats.outcome.Outcome`, called only with its ``detail`` block; None, or an outcome
            built without its block: those of a claim audit (:func:`reports.summary.claim_sentences`).
        tables_lead: True when the first of the runner's ``tables`` is the compact table shown under the
            headline (not repeated below it); False: the table of attacks is built from ``attacks``.
        game: How the audit played its game in a few words, ``function(outcome) -> str``, in a claim audit's
            first sentence; None: "its audit game".
        figures: The kind's own figures drawn from its block, ``function(run_dir, outcome) -> list[dict]``
            (each ``path``, ``title``, ``caption``), after the ROC and tradeoff figures, called only with the
            outcome's ``detail`` block; None: none.
        sections: The kind's own sections, shown open first under the headline,
            ``function(outcome) -> list[tuple[str, list[str]]]`` (title, paragraphs); None: none.
    """

    headline: str | None = "tradeoff.png"
    sentences: str | None = None
    tables_lead: bool = False
    game: str | None = None
    figures: str | None = None
    sections: str | None = None

    def function(self, what: str) -> Callable[..., Any] | None:
        """The function named by the field ``what`` (``sentences``, ``game``, ``figures``, ``sections``),
        imported now, or None where the field names none.

        Args:
            what: the field's name.

        Returns:
            The function, or None.
        """
        name = getattr(self, what)
        if name is None:
            return None
        module, _, attribute = name.partition(":")
        return getattr(importlib.import_module(module), attribute)


#: The presentation of a kind that names none: a claim audit opening with its tradeoff curve.
DEFAULT = Presentation()


def presentation_of(kind: object) -> Presentation:
    """The presentation the record of ``kind`` names (read from the table of kinds now), else
    :data:`DEFAULT` (a kind the table does not hold, or not a kind's name).

    Args:
        kind: a run kind (the outcome's ``kind``).

    Returns:
        The presentation.
    """
    return next((record.report for record in kind_records() if record.name == kind), DEFAULT)
