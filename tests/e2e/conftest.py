"""Everything under ``tests/e2e/`` is an end-to-end run (the command line, whole audits, the docs'
tutorials, the benchmarks at their CI size) and is marked ``slow`` here, by folder: ``make test-fast``
(``pytest -m "not slow"``) leaves it out, ``make test`` and CI run it."""

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``slow`` every collected test whose file lies under this folder (the hook sees the whole
    session's items, wherever its conftest lies, so it selects by path)."""
    for item in items:
        if HERE in item.path.resolve().parents:
            item.add_marker(pytest.mark.slow)
