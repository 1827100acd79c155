"""Helpers shared by the test files (the folders' ``conftest.py`` files hold the fixtures): the
repository's paths, which do not depend on how deep a test file lies under ``tests/``."""

import importlib.util
from pathlib import Path
from types import ModuleType

#: The repository root (``tests/`` is directly below it).
ROOT = Path(__file__).resolve().parents[1]
#: Finished runs checked in for the tests that read a run without training one.
FIXTURES = ROOT / "tests" / "fixtures"


def docs_hooks() -> ModuleType:
    """The documentation site's build hooks (``docs/hooks.py``: the generated CLI reference, schema page and
    the rest), loaded as a module: the tests check the site against what the hooks generate."""
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
