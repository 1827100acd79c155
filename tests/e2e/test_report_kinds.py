"""Every run kind's real output: results.json (and compare.json) follow the shipped JSON Schema; every
report opens with its headline figure above the first table and nothing overflows a laptop-wide page
(headless Chromium); the index of runs lists them all; plots leave matplotlib's backend alone."""

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
from helpers import ROOT

from audit.cli import main
from audit.schemas import SCHEMA_PATH, validate_results

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (.ci/run installs it: "
                                                            "apt-get install chromium)")
#: One cheap run of every kind (argv after ``python -m audit``, without --out).
RUNS = {
    "membership": ["run", "membership", "--target", "nonprivate_digits", "--quick", "--canaries", "120"],
    "dp": ["run", "dp", "--target", "dpgd_logreg_digits", "--runs", "60", "--device", "cpu"],
    "mechanism": ["run", "mechanism", "--target", "laplace_count", "--draws", "3000"],
    "inversion": ["run", "inversion", "--target", "nonprivate_logreg_digits", "--quick", "--steps", "30",
                  "--black-box-steps", "2"],
    "extraction": ["run", "extraction", "--target", "dperm_digits", "--quick"],
    "sweep": ["sweep", "dp", "--target", "dpgd_logreg_digits", "--epsilons", "1,2", "--runs", "40", "--quick",
              "--device", "cpu"],
}
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


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """The run directory of each kind (plus a comparison), all in one folder of runs."""
    out = tmp_path_factory.mktemp("runs")
    dirs = {}
    for kind, argv in RUNS.items():
        before = set(out.iterdir())
        assert main([*argv, "--quiet", "--out", str(out)]) == 0, kind
        (dirs[kind],) = [p for p in set(out.iterdir()) - before if p.is_dir() and p.name != "cache"]
    before = set(out.iterdir())
    assert main(["compare", str(dirs["membership"]), "--out", str(out)]) == 0
    (dirs["compare"],) = [p for p in set(out.iterdir()) - before if p.is_dir()]
    return dirs


def _results(run_dir: Path) -> dict:
    name = "compare.json" if (run_dir / "compare.json").exists() else "results.json"
    return json.loads((run_dir / name).read_text())


@pytest.mark.parametrize("kind", [*RUNS, "compare"])
def test_output_follows_the_json_schema(runs, kind):
    results = _results(runs[kind])
    validate_results(results)
    if kind != "compare":
        assert results["kind"] == kind


@pytest.mark.parametrize("kind, drop", [("membership", "primary_attack"), ("dp", "best_estimate"),
                                        ("mechanism", "ceiling"), ("inversion", "inversion"),
                                        ("extraction", "extraction"), ("sweep", "rows"), ("dp", "verdict")])
def test_schema_rejects_a_missing_key(runs, kind, drop):
    results = _results(runs[kind])
    results.pop(drop)
    with pytest.raises(jsonschema.ValidationError):
        validate_results(results)


def test_schema_is_shipped_and_versioned():
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    from audit.run_context import SCHEMA_VERSION

    assert schema["$defs"]["envelope"]["properties"]["schema_version"] == {"const": SCHEMA_VERSION}
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
@pytest.mark.parametrize("kind", [*RUNS, "compare"])
def test_report_opens_with_its_figure_and_fits_the_page(runs, kind, tmp_path):
    html = runs[kind] / ("compare.html" if kind == "compare" else "report.html")
    page = _measure(html, tmp_path)
    assert page["naturalWidth"] > 0, "the headline figure did not load"
    assert page["figureBottom"] <= page["tableTop"], "the headline figure must come before the first table"
    assert page["scrollWidth"] <= page["innerWidth"], "the page overflows a 1366-pixel-wide window"
    assert page["figureWidth"] >= 0.8 * min(page["naturalWidth"], 1100), "the figure is shrunk below readable size"


@needs_chromium
def test_index_lists_every_run_and_fits_the_page(runs, tmp_path):
    index = runs["membership"].parent / "index.html"
    text = index.read_text()
    for kind in RUNS:
        assert f'{runs[kind].name}/report.html' in text
    assert f'{runs["compare"].name}/compare.html' in text
    assert "http://" not in text and "https://" not in text and "<script>" in text
    page = _measure(index, tmp_path)
    assert page["scrollWidth"] <= page["innerWidth"] and page["tableTop"] is not None


def test_report_command_on_a_folder_writes_the_index(runs):
    index = runs["membership"].parent / "index.html"
    index.unlink()
    assert main(["report", str(runs["membership"].parent)]) == 0
    assert index.is_file()


def test_reports_show_numbers_not_dumps(runs):
    for kind in RUNS:
        text = (runs[kind] / "report.html").read_text()
        body = re.sub(r'src="data:[^"]*"', "", text)
        assert not re.search(r"\[\s*-?\d+\.\d+, ", body), f"{kind}: a raw list in the report"
        cells = re.findall(r"<td[^>]*>([^<]*)</td>", body)
        numbers = [c.strip().lstrip("-") for c in cells if re.fullmatch(r"-?\d+\.\d+", c.strip())]
        long = [c for c in numbers if len(c.replace(".", "").lstrip("0")) > 3]
        assert not long, f"{kind}: table cells with more than 3 significant digits: {long[:5]}"
        assert "{'" not in body and '{"' not in body.split("<script")[0], f"{kind}: a raw dict in the report"


def test_plots_leave_the_matplotlib_backend_alone(tmp_path):
    script = ("import matplotlib, reports.plots as p; "
              "p.epsilon_plot([{'epsilon_theory': 1.0, 'epsilon_lb': 0.5, 'series': 's'}], 'e.png'); "
              "print(matplotlib.get_backend())")
    env = os.environ | {"MPLBACKEND": "pdf", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "pdf" and (tmp_path / "e.png").stat().st_size > 0


def _without_volatile(results: dict) -> dict:
    return {k: v for k, v in results.items() if k not in results["volatile"] and k != "volatile"}


@pytest.mark.parametrize("kind", RUNS)
def test_rerun_gives_the_same_results(runs, kind, tmp_path):
    """Every kind's config.json holds what ``rerun`` needs: the same results.json apart from volatile keys."""
    out = tmp_path / "again"
    assert main(["rerun", str(runs[kind]), "--out", str(out), "--quiet"]) == 0
    (again,) = [p for p in out.iterdir() if p.is_dir() and p.name != "cache"]
    assert _without_volatile(_results(again)) == _without_volatile(_results(runs[kind]))


def test_rerun_of_a_comparison_is_a_one_line_error(runs, capsys):
    assert main(["rerun", str(runs["compare"])]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "config.json" in err
