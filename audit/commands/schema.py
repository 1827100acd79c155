"""``python -m audit schema``: print the JSON Schema of ``results.json`` and ``compare.json``, generated from
the types (:func:`audit.schemas.generate.schema_text`); the shipped ``audit/schemas/results.schema.json`` is
its output: ``python -m audit schema > audit/schemas/results.schema.json`` after a change of the types."""

from __future__ import annotations

import argparse
import sys


def print_schema(args: argparse.Namespace) -> int:
    """Print the generated schema; returns the exit status."""
    from audit.schemas.generate import schema_text  # the outcome's types: imported when the command runs

    sys.stdout.write(schema_text())
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``schema`` command to ``subparsers``."""
    parser = subparsers.add_parser(
        "schema", help="print the JSON Schema of results.json and compare.json (generated from the types)",
        description="Print the JSON Schema (draft 2020-12) every results.json and compare.json follows, generated "
                    "from the typed outcome (audit.stats.outcome) and what each run kind requires. The shipped "
                    "audit/schemas/results.schema.json is this output.")
    parser.set_defaults(func=print_schema)
