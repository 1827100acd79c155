"""The recipe of ``docs/contributing.md`` works: its toy kind, written from the page into a copy of the repository
plus one line in ``audit/kind_table.py``, answers ``run toy --help``, ``list``, joins the regenerated catalogue, adds
its own result block to the regenerated schema, writes it in its results.json (typed back as its block) and renders
a report from it (seven subprocesses in the copy)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from helpers import ROOT, python_in

CONTRIBUTING = ROOT / "docs" / "contributing.md"
#: A fenced block of the page with a ``title="PATH"``.
TITLED = re.compile(r'^```python title="(?P<path>[^"]+)"\n(?P<body>.*?)^```$', re.M | re.S)


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

    assert python_in(copy, "-m", "audit.target_defaults").returncode == 0
    schema = python_in(copy, "-m", "audit", "schema")
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

    help_ = python_in(copy, "-m", "audit", "run", "toy", "--help")
    assert help_.returncode == 0 and "--letters" in help_.stdout and "  laplace_count" in help_.stdout
    assert "targets of run toy" in help_.stdout
    listing = python_in(copy, "-m", "audit", "list")
    assert listing.returncode == 0 and "run mechanism, bound, run toy" in listing.stdout
    wrong = python_in(copy, "-m", "audit", "run", "toy", "--target", "dpsgd_digits")
    assert wrong.returncode == 2 and "not a toy target" in wrong.stderr

    run = python_in(copy, "-m", "audit", "run", "toy", "--target", "laplace_count", "--letters", "4", "--quiet",
                  "--out", str(tmp_path / "runs"))
    assert run.returncode == 0, run.stderr
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir() and p.name != "cache"]
    results = json.loads((run_dir / "results.json").read_text(encoding="utf-8"))
    assert results["kind"] == "toy" and results["tables"][0]["rows"] == [["l"], ["a"], ["p"], ["l"]]
    assert results["letters"] == ["l", "a", "p", "l"] and results["length"] == 13 and "detail" not in results
    del results["length"]  # the regenerated schema checks the toy's block: typed, every key named
    (tmp_path / "broken.json").write_text(json.dumps(results), encoding="utf-8")
    typed = python_in(copy, "-c", "import sys; from audit.results_file import load_outcome; "
                                "print(type(load_outcome(sys.argv[1]).detail).__name__)", str(run_dir))
    assert typed.returncode == 0 and typed.stdout.strip() == "Letters", typed.stderr
    broken = python_in(copy, "-c", "import sys; from audit.results_file import load_outcome; load_outcome(sys.argv[1])",
                     str(tmp_path / "broken.json"))
    assert broken.returncode != 0 and "does not follow the results schema" in broken.stderr
    html = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "What was audited: the name of laplace_count." in html
    assert "What was found: lapl, 4 of its 13 letters" in html
    assert html.count("Letters") == 1 and html.count("Length") == 1
    (run_dir / "report.html").unlink()
    assert python_in(copy, "-m", "audit", "report", str(run_dir)).returncode == 0  # `report` finds the toy's look
    html = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "What was audited: the name of laplace_count." in html and html.count("Letters") == 1
