"""``python -m audit run KIND --target NAME ...``: run one audit and write a run directory.

Each kind's record (:class:`audit.kinds.RunKind`, in ``audit/<kind>/command.py``) has a
``register(kind_subparsers, common)``, where ``common`` is a parent parser holding the options every
run accepts (:func:`audit.run_parser.common_options`). This command lists no kind: it adds every record
whose command starts with ``run``. Registering imports nothing heavy: a kind's record names its runner
(torch, scikit-learn, ...) as a string imported when the audit runs, and the checks of the command line
(numbers, :mod:`audit.arguments`; target names against the stored catalogue,
:func:`audit.run_parser.check_target`) answer bad input before anything heavy is imported.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from audit.kinds import run_kinds
from audit.run_parser import check_target, common_options, gated_results


def gated(kind: str, func: Callable[[argparse.Namespace], Any]) -> Callable[[argparse.Namespace], int]:
    """Wrap a run kind's function: the target is checked against the catalogue first, then
    :func:`audit.run_parser.gated_results`."""
    checked = gated_results(func)

    def run(args: argparse.Namespace) -> int:
        check_target(kind, args.target)
        return checked(args)

    return run


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``run`` and its kinds (every record whose command is ``run <kind>``)."""
    records = [kind for kind in run_kinds() if kind.command.startswith("run ")]
    names = ", ".join(kind.name for kind in records)
    parser = subparsers.add_parser("run", help=f"run an audit ({names}) and write a report",
                                   description="Run one audit against a target and write a run directory with "
                                               "config.json, results.json, report.html and plots.")
    kinds = parser.add_subparsers(dest="kind", metavar="KIND", parser_class=type(parser))
    kinds.required = True
    common = common_options()
    for kind in records:
        kind.register(kinds, common)
    for kind, kind_parser in kinds.choices.items():
        kind_parser.set_defaults(func=gated(kind, kind_parser.get_default("func")))
