"""Helpers shared by the test files (the folders' ``conftest.py`` files hold the fixtures): the
repository's paths, which do not depend on how deep a test file lies under ``tests/``."""

from pathlib import Path

#: The repository root (``tests/`` is directly below it).
ROOT = Path(__file__).resolve().parents[1]
#: Finished runs checked in for the tests that read a run without training one.
FIXTURES = ROOT / "tests" / "fixtures"
