"""Audit kinds carry their behaviour (:class:`audit.kinds.RunKind`):

* each report shows its compact table once, whatever its kind (a reconstruction report showed its
  first table twice while the headline table and the sections listed different kinds);
* a kind's look is read on demand, never registered by importing the kinds: a fresh interpreter that
  imports only the reports draws a kind's report as the command does;
* the reports name no kind.

That the recipe of ``docs/contributing.md`` makes a kind: tests/e2e/test_toy_kind.py.
"""

from __future__ import annotations

import json
import re

import pytest
from helpers import ENVELOPE, ROOT, python_in, typed_outcome

from audit.kinds import run_kinds
from reports.html import build_context
from reports.presentation import DEFAULT, presentation_of


def _results(kind: str) -> dict:
    tables = [{"title": f"first table of {kind}", "columns": ["a"], "rows": [["1"]]},
              {"title": f"second table of {kind}", "columns": ["b"], "rows": [["2"]]}]
    return {"kind": kind, "target": "t", "target_description": "a target", "tables": tables,
            "verdict": {"status": "consistent", "text": "no violation"}}


def _titles(context: dict) -> list[str]:
    """Every table title the report shows: the compact table and those of the sections."""
    compact = [context["attack_table"]["title"]] if context["attack_table"] else []
    return compact + [t["title"] for s in context["sections"] for t in s["tables"]]


@pytest.mark.parametrize("kind", [k.name for k in run_kinds()])
def test_each_runner_table_shows_once(kind: str) -> None:
    titles = _titles(build_context(typed_outcome(_results(kind)), None, []))
    for table in _results(kind)["tables"]:
        assert titles.count(table["title"]) == 1, (kind, titles)
    if presentation_of(kind).tables_lead:
        assert build_context(typed_outcome(_results(kind)), None, [])["attack_table"]["title"] == \
            f"first table of {kind}"


def test_reconstruction_leads_with_its_first_table() -> None:
    assert presentation_of("reconstruction").tables_lead
    assert presentation_of("reconstruction").headline == "reconstruction.png"
    assert presentation_of("no such kind") is DEFAULT


#: A library caller: a fresh interpreter that imports the reports only (no kind, no command line) and
#: draws a hand-built reconstruction outcome, whose kind leads with its first table.
LIBRARY_CALLER = """
import json, sys
from reports.html import build_context
from audit.stats.outcome import Outcome
outcome = Outcome.from_dict(json.loads(sys.argv[1]))
assert "audit.kinds" not in sys.modules
print(build_context(outcome, None, [])["attack_table"]["title"])
"""


def test_a_library_caller_gets_the_kinds_look() -> None:
    results = ENVELOPE | _results("reconstruction")
    drawn = python_in(ROOT, "-c", LIBRARY_CALLER, json.dumps(results))
    assert drawn.returncode == 0, drawn.stderr
    assert drawn.stdout.strip() == "first table of reconstruction"


def test_the_reports_name_no_kind() -> None:
    """``reports/`` draws what a kind hands it (its presentation, the :class:`audit.stats.outcome.Detail` answers):
    no kind's name in its code and no read of a kind's own block by field."""
    names = [kind.name for kind in run_kinds()]
    for path in sorted((ROOT / "reports").glob("*.py")):
        code = path.read_text(encoding="utf-8")
        assert not re.search(r"\.detail\.\w", code), f"{path.name} reads a kind's block by field"
        assert not re.search(r"\bkind\s*(==|!=|in\b)", code), f"{path.name} branches on a kind"
        named = [name for name in names if f'"{name}"' in code or f"'{name}'" in code]
        assert not named, f"{path.name} names the kinds {named}"
