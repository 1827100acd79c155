"""Two rules of the test folders: no two test files share a basename (pytest's default import mode imports each as a
top-level module, so the second of two ``test_x.py`` is an "import file mismatch" error that stops the whole
collection), and no test forks the pytest process (tests/README.md: a fork of a pytest-xdist worker deadlocked and
stopped CI at its time limit)."""

from __future__ import annotations

import ast
from collections import Counter

from helpers import ROOT


def test_test_file_basenames_are_unique() -> None:
    names = Counter(path.name for path in (ROOT / "tests").rglob("test_*.py"))
    assert [name for name, count in names.items() if count > 1] == []


#: Calls that fork the calling process: in a test they fork the pytest-xdist worker, whose threads make the child
#: deadlock (tests/README.md, "No test forks the pytest process").
FORKING_CALLS = {"fork", "forkpty", "supervised"}


def _called_name(node: ast.Call) -> str | None:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def test_no_test_forks_the_pytest_process() -> None:
    """``os.fork`` and ``audit.supervisor.supervised`` are called only in the code of a fresh process a test starts
    (a string given to ``python -c``), which the syntax tree of the test file does not hold as a call."""
    forking = [f"{path.relative_to(ROOT)}:{node.lineno}" for path in sorted((ROOT / "tests").rglob("*.py"))
               for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
               if isinstance(node, ast.Call) and _called_name(node) in FORKING_CALLS]
    assert forking == [], f"a test forks the pytest process: {forking}"
