"""The test folders' one rule pytest's default import mode needs: no two test files share a basename (pytest
imports each as a top-level module, so the second of two ``test_x.py`` is an "import file mismatch" error that
stops the whole collection)."""

from __future__ import annotations

from collections import Counter

from helpers import ROOT


def test_test_file_basenames_are_unique() -> None:
    names = Counter(path.name for path in (ROOT / "tests").rglob("test_*.py"))
    assert [name for name, count in names.items() if count > 1] == []
