"""``extra`` (:class:`audit.stats.blocks.Block`) holds only the keys of a ``results.json`` written by an older
version: no code outside the block base and the loader of files (``audit.results_file``) reads it or writes it,
so what a run writes and what is read back as data are named fields. At run time, ``RunContext.finish`` refuses
a block that carries ``extra`` (tests/core/test_run_finish.py), whatever the kind."""

from __future__ import annotations

import ast

from helpers import ROOT

#: The block base (reads and writes ``extra`` for every block) and the loader of older files.
ALLOWED = {"audit/stats/blocks.py", "audit/results_file.py"}
#: The shipped code and what reads its results (benchmarks, tools).
FOLDERS = ("audit", "targets", "attacks", "reports", "benchmarks", "tools")
#: Calls whose ``extra=`` is the logging module's (a log record's extra attributes), not a block's.
LOGGING = {"debug", "info", "warning", "error", "exception", "critical", "log"}


def _uses(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "extra":
            lines.append(node.lineno)
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value == "extra":
            lines.append(node.lineno)
        elif isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name not in LOGGING and any(k.arg == "extra" for k in node.keywords):
                lines.append(node.lineno)
    return lines


def test_only_the_loader_of_older_files_touches_extra():
    found = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            where = path.relative_to(ROOT).as_posix()
            if where not in ALLOWED:
                found += [f"{where}:{line}" for line in _uses(ast.parse(path.read_text(encoding="utf-8")))]
    assert not found, f"extra read or written outside the loader of older files (name the key instead): {found}"


def test_the_check_sees_a_read_and_a_write():
    code = "outcome.extra['x']\nTable(title='t', extra={'x': 1})\nresults['extra']\nlog.warning('w', extra=FILE)"
    assert sorted(set(_uses(ast.parse(code)))) == [1, 2, 3]
