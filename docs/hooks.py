"""MkDocs hook: pages generated from the code at build time, so that the site and the code agree by
construction.

* ``reference/cli.md``: the ``--help`` text of every command and run kind, formatted by the parser
  that ``python -m audit`` itself builds (:func:`audit.cli.build_parser`), at a fixed width.
* ``reference/results-schema.md``: the keys of each part of ``audit/schemas/results.schema.json``
  (required and optional) and the schema itself.
* The API pages (mkdocstrings, which reads docstrings as Markdown): the Sphinx roles the docstrings use
  (``:func:`x```) are left as plain code, ``x`` (:func:`strip_sphinx_roles`), not printed as ":func:".

A page asks for a generated block with a marker line ``<!-- generated: NAME -->``. ``tests/helpers.py``
imports this module by path; ``tests/project/test_docs.py`` and ``tests/e2e/test_docs_runs.py`` check the
generated text against the parser.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from audit.cli import build_parser

#: Width of the generated help text (argparse reads it from $COLUMNS).
HELP_WIDTH = 100
SCHEMA = Path(__file__).resolve().parent.parent / "audit" / "schemas" / "results.schema.json"


@contextmanager
def _columns(width: int) -> Iterator[None]:
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(width)
    try:
        yield
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps its sub-parsers in the subparsers action
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def help_texts(width: int = HELP_WIDTH) -> list[tuple[str, str]]:
    """(command line, its ``--help`` text) for ``python -m audit`` and every command and sub-command,
    depth first, in the order ``--help`` lists them."""
    with _columns(width):
        root = build_parser()
        out: list[tuple[str, str]] = []

        def walk(words: list[str], parser: argparse.ArgumentParser) -> None:
            out.append((" ".join(["python -m audit", *words]), parser.format_help()))
            for name, child in _subcommands(parser).items():
                walk([*words, name], child)

        walk([], root)
    return out


def cli_reference() -> str:
    """The CLI reference in Markdown: one section per command, its help in a text block."""
    parts = []
    for command, text in help_texts():
        level = "##" if command.count(" ") <= 3 else "###"
        parts.append(f"{level} `{command}`\n\n```text\n{text.rstrip()}\n```\n")
    return "\n".join(parts)


def _keys(node: dict[str, Any], defs: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(required keys, optional keys) of one schema definition or a kind's part of it, through allOf,
    if/then/else (a key required in one branch only is optional) and a kind's own block (``$ref``)."""
    required: list[str] = []
    optional: list[str] = []
    for part in node.get("allOf", [node]):
        if "$ref" in part:
            part = defs[part["$ref"].rsplit("/", 1)[-1]]
        if "allOf" in part:  # a kind's results beside its block
            inner = _keys(part, defs)
            required += [k for k in inner[0] if k not in required]
            optional += [k for k in inner[1] if k not in optional]
            continue
        if "then" in part:
            branches = [_keys(part[key], defs) for key in ("then", "else") if key in part]
            both = [k for k in branches[0][0] if all(k in b[0] for b in branches)]
            required += [k for k in both if k not in required]
            optional += [k for b in branches for k in b[0] + b[1] if k not in both and k not in optional]
            continue
        req = part.get("required", [])
        required += [k for k in req if k not in required]
        optional += [k for k in part.get("properties", {}) if k not in req and k not in optional]
    return required, [k for k in optional if k not in required]


def schema_reference() -> str:
    """Every definition of the results schema with its required and optional keys, what each kind requires,
    then the schema."""
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    cell = lambda keys: ", ".join(f"`{k}`" for k in keys) or "—"  # noqa: E731
    rows = ["| part | required keys | optional keys |", "|---|---|---|"]
    defs = schema["$defs"]
    for name, node in defs.items():
        if name != "run":
            rows.append(f"| `{name}` | {cell(_keys(node, defs)[0])} | {cell(_keys(node, defs)[1])} |")
    kinds = ["| kind | it requires too | in some of its runs |", "|---|---|---|"]
    for rule in schema["$defs"]["run"]["allOf"][1:]:
        required, optional = _keys(rule["then"], defs)
        kinds.append(f"| `{rule['if']['properties']['kind']['const']}` | {cell(required)} | {cell(optional)} |")
    top = " or ".join(f"`{ref['$ref'].rsplit('/', 1)[-1]}`" for ref in schema["oneOf"])
    return (f"Schema `{schema['$id']}` ({schema['$schema']}). {schema['description']}\n\n"
            f"A document is {top}: a `run` is an `outcome` whose kind's part holds too.\n\n" + "\n".join(rows) +
            "\n\nWhat each kind requires beyond the `outcome` (its record's `results`, `audit/<kind>/command.py`, "
            "and its own block's keys, `detail`):"
            "\n\n" + "\n".join(kinds) +
            f"\n\n??? note \"The schema itself ({SCHEMA.name})\"\n\n    ```json\n" +
            "\n".join("    " + line for line in json.dumps(schema, indent=2).splitlines()) + "\n    ```\n")


GENERATED = {"cli-reference": cli_reference, "results-schema": schema_reference}


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Replace each ``<!-- generated: NAME -->`` line with the generated block."""
    for name, make in GENERATED.items():
        marker = f"<!-- generated: {name} -->"
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown


#: A Sphinx role in rendered HTML: the role's name before the code span Markdown made of its target.
SPHINX_ROLE = re.compile(r":(?:func|meth|mod|class|data|attr|exc|obj|const|py:\w+):(<code>)~?")


def strip_sphinx_roles(html: str) -> str:
    """``:func:<code>x</code>`` -> ``<code>x</code>`` (and ``~x`` -> ``x``)."""
    return SPHINX_ROLE.sub(r"\1", html)


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    """Strip the Sphinx roles of the docstrings from every page (module docstring)."""
    return strip_sphinx_roles(html)
