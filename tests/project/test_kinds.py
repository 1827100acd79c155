"""Audit kinds carry their behaviour (:class:`audit.kinds.RunKind`):

* each report shows its compact table once, whatever its kind (a reconstruction report showed its
  first table twice while the headline table and the sections listed different kinds);
* a kind's look is read on demand, never registered by importing the kinds: a fresh interpreter that
  imports only the reports draws a kind's report as the command does;
* the recipe of ``docs/contributing.md`` works: its toy kind, written from the page into a copy of the
  repository plus one line in ``audit/kind_table.py``, answers ``run toy --help``, ``list``, joins the
  regenerated catalogue, adds its own result block to the regenerated schema, writes it in its
  results.json (typed back as its block) and renders a report from it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ENVELOPE, ROOT, typed_outcome

from audit.kinds import run_kinds
from reports.html import build_context
from reports.presentation import DEFAULT, presentation_of

CONTRIBUTING = ROOT / "docs" / "contributing.md"
#: A fenced block of the page with a ``title="PATH"``.
TITLED = re.compile(r'^```python title="(?P<path>[^"]+)"\n(?P<body>.*?)^```$', re.M | re.S)


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


def _python(copy: Path, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(copy)}
    return subprocess.run([sys.executable, *argv], cwd=copy, env=env, capture_output=True, text=True, timeout=300)


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
    drawn = _python(ROOT, "-c", LIBRARY_CALLER, json.dumps(results))
    assert drawn.returncode == 0, drawn.stderr
    assert drawn.stdout.strip() == "first table of reconstruction"


@pytest.mark.slow
def test_a_toy_kind_is_its_package_plus_one_line(tmp_path: Path) -> None:
    copy = tmp_path / "repo"
    for package in ("audit", "targets", "attacks", "reports"):
        shutil.copytree(ROOT / package, copy / package, ignore=shutil.ignore_patterns("__pycache__"))
    blocks = {m["path"]: m["body"] for m in TITLED.finditer(CONTRIBUTING.read_text(encoding="utf-8"))}
    assert sorted(blocks) == ["audit/toy/__init__.py", "audit/toy/command.py", "audit/toy/runner.py"]
    for path, body in blocks.items():
        (copy / path).parent.mkdir(exist_ok=True)
        (copy / path).write_text(body, encoding="utf-8")
    kinds = copy / "audit" / "kind_table.py"
    text = kinds.read_text(encoding="utf-8")
    assert text.count('"audit.commands.sweep")') == 1
    kinds.write_text(text.replace('"audit.commands.sweep")', '"audit.commands.sweep", "audit.toy.command")'))

    assert _python(copy, "-m", "audit.target_defaults").returncode == 0
    schema = _python(copy, "-m", "audit", "schema")
    assert schema.returncode == 0, schema.stderr
    (copy / "audit" / "schemas" / "results.schema.json").write_text(schema.stdout, encoding="utf-8")
    definitions = json.loads(schema.stdout)["$defs"]
    assert definitions["letters"]["required"] == ["letters", "length"]
    assert definitions["letters"]["properties"]["length"] == {"description": "how many characters the name has.",
                                                              "type": "integer"}
    (toy_part,) = [rule["then"] for rule in definitions["run"]["allOf"][1:]
                   if rule["if"]["properties"]["kind"]["const"] == "toy"]
    assert toy_part == {"$ref": "#/$defs/letters"}  # its keys, written beside the envelope's
    catalogue = json.loads((copy / "audit" / "catalogue.json").read_text(encoding="utf-8"))["targets"]
    toy_targets = [name for name, use in catalogue.items() if "toy" in use["run_kinds"]]
    assert "laplace_count" in toy_targets
    assert all(catalogue[name]["family"] == "mechanism" for name in toy_targets)
    assert {k: [r for r in u["run_kinds"] if r != "toy"] for k, u in catalogue.items()} == \
        {k: u["run_kinds"] for k, u in json.loads((ROOT / "audit" / "catalogue.json").read_text())["targets"].items()}

    help_ = _python(copy, "-m", "audit", "run", "toy", "--help")
    assert help_.returncode == 0 and "--letters" in help_.stdout and "  laplace_count" in help_.stdout
    assert "targets of run toy" in help_.stdout
    listing = _python(copy, "-m", "audit", "list")
    assert listing.returncode == 0 and "run mechanism, bound, run toy" in listing.stdout
    wrong = _python(copy, "-m", "audit", "run", "toy", "--target", "dpsgd_digits")
    assert wrong.returncode == 2 and "not a toy target" in wrong.stderr

    run = _python(copy, "-m", "audit", "run", "toy", "--target", "laplace_count", "--letters", "4", "--quiet",
                  "--out", str(tmp_path / "runs"))
    assert run.returncode == 0, run.stderr
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir() and p.name != "cache"]
    results = json.loads((run_dir / "results.json").read_text(encoding="utf-8"))
    assert results["kind"] == "toy" and results["tables"][0]["rows"] == [["l"], ["a"], ["p"], ["l"]]
    assert results["letters"] == ["l", "a", "p", "l"] and results["length"] == 13 and "detail" not in results
    del results["length"]  # the regenerated schema checks the toy's block: typed, every key named
    (tmp_path / "broken.json").write_text(json.dumps(results), encoding="utf-8")
    typed = _python(copy, "-c", "import sys; from audit.results_file import load_outcome; "
                                "print(type(load_outcome(sys.argv[1]).detail).__name__)", str(run_dir))
    assert typed.returncode == 0 and typed.stdout.strip() == "Letters", typed.stderr
    broken = _python(copy, "-c", "import sys; from audit.results_file import load_outcome; load_outcome(sys.argv[1])",
                     str(tmp_path / "broken.json"))
    assert broken.returncode != 0 and "does not follow the results schema" in broken.stderr
    html = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "What was audited: the name of laplace_count." in html
    assert "What was found: lapl, 4 of its 13 letters" in html
    assert html.count("Letters") == 1 and html.count("Length") == 1
    (run_dir / "report.html").unlink()
    assert _python(copy, "-m", "audit", "report", str(run_dir)).returncode == 0  # `report` finds the toy's look
    html = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "What was audited: the name of laplace_count." in html and html.count("Letters") == 1


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
