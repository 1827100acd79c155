"""The table of audit kinds: the module that holds each kind's record (``RUN_KIND``, an
:class:`audit.kinds.RunKind`), read on demand, as pip reads its table of commands. Adding a kind is its
package plus one line here (``docs/contributing.md``).

Standard library only, and it imports nothing of the project: the command line reads the records through
:func:`audit.kinds.run_kinds`, and the reports read a kind's look from them
(:func:`reports.presentation.presentation_of`) without the kinds registering anything when they are
imported, so that a library caller of :func:`reports.html.render_report` gets the same report as the
command.
"""

from __future__ import annotations

import importlib
from typing import Any

#: The command modules of every audit kind, each exposing ``RUN_KIND``.
KIND_COMMANDS = ("audit.dp.command", "audit.extraction.command", "audit.inversion.command",
                 "audit.mechanism.command", "audit.membership.command", "audit.reconstruction.command",
                 "audit.commands.sweep")


def kind_records() -> list[Any]:
    """Every kind's record (:class:`audit.kinds.RunKind`), in :data:`KIND_COMMANDS` order, its module
    imported now (Python imports each once).

    Returns:
        The records.
    """
    return [importlib.import_module(name).RUN_KIND for name in KIND_COMMANDS]
