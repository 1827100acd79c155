"""Every run kind's real output: results.json (and compare.json) follow the shipped JSON Schema; every
report opens with its headline figure above the first table and nothing overflows a laptop-wide page
(headless Chromium); a library caller of ``render_report`` draws the report ``audit report`` draws; the
index of runs lists them all; plots leave matplotlib's backend alone."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from helpers import KIND_RUNS, ROOT, without_volatile

from audit.cli import main
from audit.results_file import load_outcome, outcome_of, results_path, write_outcome
from audit.schemas import SCHEMA_PATH, validate_results

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (.ci/run installs it: "
                                                            "apt-get install chromium)")
#: Injected into a copy of a report: measures the page after load into <pre id="measure">.
MEASURE = """<script>window.addEventListener("load", function () {
var img = document.querySelector("figure.headline img"), table = document.querySelector("table");
var f = img ? img.getBoundingClientRect() : null, t = table ? table.getBoundingClientRect() : null;
var out = {scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth,
  figureBottom: f && f.bottom, figureWidth: f && f.width, naturalWidth: img ? img.naturalWidth : 0,
  tableTop: t && t.top};
var pre = document.createElement("pre"); pre.id = "measure"; pre.textContent = JSON.stringify(out);
document.body.appendChild(pre);
});</script>"""


def _results(run_dir: Path) -> dict:
    name = "compare.json" if (run_dir / "compare.json").exists() else "results.json"
    return json.loads((run_dir / name).read_text())


@pytest.mark.parametrize("kind", [*KIND_RUNS, "compare"])
def test_output_follows_the_json_schema(kind_runs, kind):
    results = _results(kind_runs[kind])
    validate_results(results)
    if kind != "compare":
        assert results["kind"] == kind


@pytest.mark.parametrize("kind", [*KIND_RUNS, "compare"])
def test_the_typed_outcome_writes_back_the_same_bytes(kind_runs, kind, tmp_path):
    source = results_path(kind_runs[kind])
    write_outcome(tmp_path / source.name, load_outcome(source))
    assert (tmp_path / source.name).read_bytes() == source.read_bytes()


@pytest.mark.parametrize("kind", [*KIND_RUNS, "compare"])
def test_every_key_a_run_writes_is_a_named_field(kind_runs, kind):
    """Nothing goes into ``extra``: typed strictly, the file holds no key that no block names (``extra`` is
    for files of older versions only)."""
    outcome_of(_results(kind_runs[kind]), strict=True)


@pytest.mark.parametrize("kind, drop", [("membership", "primary_attack"), ("dp", "best_estimate"),
                                        ("mechanism", "ceiling"), ("inversion", "inversion"),
                                        ("extraction", "extraction"), ("sweep", "rows"), ("dp", "verdict"),
                                        ("reconstruction", "reconstruction")])
def test_schema_rejects_a_missing_key(kind_runs, kind, drop):
    results = _results(kind_runs[kind])
    results.pop(drop)
    with pytest.raises(jsonschema.ValidationError):
        validate_results(results)


def test_schema_is_shipped():
    jsonschema.Draft202012Validator.check_schema(json.loads(SCHEMA_PATH.read_text()))
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"audit.schemas" = ["*.json"]' in pyproject and '"catalogue.json"' in pyproject


def _measure(html: Path, tmp_path: Path) -> dict:
    page = tmp_path / f"measured-{html.parent.name}.html"
    page.write_text(html.read_text().replace("</body>", MEASURE + "</body>"))
    done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1366,900",
                           "--virtual-time-budget=10000", "--dump-dom", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    found = re.search(r'<pre id="measure">([^<]*)</pre>', done.stdout)
    assert found, done.stderr[-2000:]
    return json.loads(found.group(1))


@needs_chromium
@pytest.mark.parametrize("kind", [*KIND_RUNS, "compare"])
def test_report_opens_with_its_figure_and_fits_the_page(kind_runs, kind, tmp_path):
    html = kind_runs[kind] / ("compare.html" if kind == "compare" else "report.html")
    page = _measure(html, tmp_path)
    assert page["naturalWidth"] > 0, "the headline figure did not load"
    assert page["figureBottom"] <= page["tableTop"], "the headline figure must come before the first table"
    assert page["scrollWidth"] <= page["innerWidth"], "the page overflows a 1366-pixel-wide window"
    assert page["figureWidth"] >= 0.8 * min(page["naturalWidth"], 1100), "the figure is shrunk below readable size"


@needs_chromium
def test_index_lists_every_run_and_fits_the_page(kind_runs, tmp_path):
    index = kind_runs["membership"].parent / "index.html"
    text = index.read_text()
    for kind in KIND_RUNS:
        assert f'{kind_runs[kind].name}/report.html' in text
    assert f'{kind_runs["compare"].name}/compare.html' in text
    assert "http://" not in text and "https://" not in text and "<script>" in text
    page = _measure(index, tmp_path)
    assert page["scrollWidth"] <= page["innerWidth"] and page["tableTop"] is not None


def test_a_library_caller_renders_the_report_the_command_renders(kind_runs, tmp_path):
    """A fresh interpreter that imports ``reports.html`` alone (no kind, no command line) renders every
    kind's run byte for byte as ``audit report`` does: the kinds' looks are read on demand."""
    pairs = []
    for kind in KIND_RUNS:
        command, library = tmp_path / "command" / kind, tmp_path / "library" / kind
        for copy in (command, library):
            shutil.copytree(kind_runs[kind], copy, ignore=shutil.ignore_patterns("*.png", "report.html"))
        assert main(["report", str(command)]) == 0
        pairs.append((command, library))
    script = ("import sys; from pathlib import Path; from reports.html import render_report\n"
              "for run_dir in sys.argv[1:]: render_report(Path(run_dir))")
    done = subprocess.run([sys.executable, "-c", script, *(str(library) for _, library in pairs)],
                          env=os.environ | {"PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    for command, library in pairs:
        assert (library / "report.html").read_bytes() == (command / "report.html").read_bytes(), command.name


def test_report_command_on_a_folder_writes_the_index(kind_runs):
    index = kind_runs["membership"].parent / "index.html"
    index.unlink()
    assert main(["report", str(kind_runs["membership"].parent)]) == 0
    assert index.is_file()


def test_reports_show_numbers_not_dumps(kind_runs):
    for kind in KIND_RUNS:
        text = (kind_runs[kind] / "report.html").read_text()
        body = re.sub(r'src="data:[^"]*"', "", text)
        assert not re.search(r"\[\s*-?\d+\.\d+, ", body), f"{kind}: a raw list in the report"
        cells = re.findall(r"<td[^>]*>([^<]*)</td>", body)
        numbers = [c.strip().lstrip("-") for c in cells if re.fullmatch(r"-?\d+\.\d+", c.strip())]
        long = [c for c in numbers if len(c.replace(".", "").lstrip("0")) > 3]
        assert not long, f"{kind}: table cells with more than 3 significant digits: {long[:5]}"
        assert "{'" not in body and '{"' not in body.split("<script")[0], f"{kind}: a raw dict in the report"


def test_plots_leave_the_matplotlib_backend_alone(tmp_path):
    script = ("import matplotlib, reports.plots as p; from audit.stats.outcome import SweepPoint; "
              "p.epsilon_plot([SweepPoint(epsilon_theory=1.0, epsilon_lb=0.5, series='s', method='m')], 'e.png'); "
              "print(matplotlib.get_backend())")
    env = os.environ | {"MPLBACKEND": "pdf", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "pdf" and (tmp_path / "e.png").stat().st_size > 0


@pytest.mark.parametrize("kind", KIND_RUNS)
def test_rerun_gives_the_same_results(kind_runs, kind, tmp_path):
    """Every kind's config.json holds what ``rerun`` needs: the same results.json apart from volatile keys."""
    out = tmp_path / "again"
    assert main(["rerun", str(kind_runs[kind]), "--out", str(out), "--quiet"]) == 0
    (again,) = [p for p in out.iterdir() if p.is_dir() and p.name != "cache"]
    assert without_volatile(_results(again)) == without_volatile(_results(kind_runs[kind]))


def test_rerun_of_a_comparison_is_a_one_line_error(kind_runs, capsys):
    assert main(["rerun", str(kind_runs["compare"])]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "config.json" in err
