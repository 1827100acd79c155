"""Command-line entry point: ``python -m audit <command> ...``.

Each command lives in its own module under :mod:`audit.commands` and exposes
``register(subparsers)``, which adds its parser and sets ``func`` to a callable
``(args) -> int``. User errors (:class:`audit.errors.UserError`) end with one line on stderr and
exit status 2; argparse usage errors do the same.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

from audit.errors import UserError

#: Command modules, each with ``register(subparsers)``; order is the order shown in ``--help``.
COMMAND_MODULES = (
    "audit.commands.list_cmd",
    "audit.commands.run",
    "audit.commands.report",
)


class OneLineArgumentParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line on stderr and exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"error: {self.prog}: {message} (see --help)\n")
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser with every registered command."""
    parser = OneLineArgumentParser(
        prog="python -m audit",
        description="privacy-audit: empirical privacy audits of ML models against their DP guarantees.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineArgumentParser)
    subparsers.required = True
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run the command; returns the process exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except UserError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("interrupted: finished models are cached; run the same command again to resume\n")
        return 130
