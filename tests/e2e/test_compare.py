"""``python -m audit compare``: one table and one ROC figure across finished runs (no training)."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import matplotlib.image as mpimg
import pytest
from helpers import FIXTURES

from audit.errors import UserError
from audit.io import read_json, write_json
from audit.stats.metrics import dp_advantage_bound
from reports.compare import COMPARE_HTML, COMPARE_JSON, COMPARE_PNG, compare_runs

FIXTURE = FIXTURES / "run_membership"
EVIL = "<script>alert(1)</script>"


@pytest.fixture()
def two_runs(tmp_path: Path) -> list[Path]:
    """The fixture DP run and a 'non-private' copy of it (no claim, no tradeoff, a hostile name)."""
    dp = tmp_path / "dp"
    shutil.copytree(FIXTURE, dp)
    nonprivate = tmp_path / "nonprivate"
    shutil.copytree(FIXTURE, nonprivate)
    results = read_json(nonprivate / "results.json")
    results.update(target=f"nonprivate{EVIL}", epsilon_theory=None, tradeoff=None, accountant=None)
    write_json(nonprivate / "results.json", results)
    return [dp, nonprivate]


def test_compare_writes_table_figure_and_json(tmp_path, two_runs):
    out = tmp_path / "cmp"
    summary = compare_runs(two_runs, out)
    dp_results = read_json(two_runs[0] / "results.json")
    n_attacks = len(dp_results["attacks"])
    assert len(summary.rows) == 2 * n_attacks
    image = mpimg.imread(io.BytesIO((out / COMPARE_PNG).read_bytes()), format="png")
    assert image.shape[0] > 300 and image[..., :3].std() > 0.05
    html = (out / COMPARE_HTML).read_text(encoding="utf-8")
    assert EVIL not in html and "&lt;script&gt;" in html
    assert "data:image/png;base64," in html and "(non-private)" in html
    rows = read_json(out / COMPARE_JSON)["rows"]
    dp_rows = [r for r in rows if r["epsilon_theory"] is not None]
    for row in dp_rows:
        attack = dp_results["attacks"][row["attack"]]
        assert row["auc"] == pytest.approx(attack["auc"])
        assert row["tpr_01"] == pytest.approx(attack["tpr_at_fpr"]["0.001"])
        assert row["advantage_dp_bound"] == pytest.approx(dp_advantage_bound(dp_results["epsilon_theory"],
                                                                             dp_results["delta"]))
    assert all(r["advantage_dp_bound"] is None for r in rows if r["epsilon_theory"] is None)
    assert 'class="over"' not in html  # the fixture's attacks stay within the bound
    # deterministic figure
    again = compare_runs(two_runs, tmp_path / "cmp2")
    assert Path(again.figure).read_bytes() == (out / COMPARE_PNG).read_bytes()


def test_compare_marks_advantage_interval_above_bound(tmp_path, two_runs):
    results = read_json(two_runs[0] / "results.json")
    name = sorted(results["attacks"])[0]
    results["attacks"][name]["advantage_ci"] = [0.99995, 1.0]  # above the epsilon-8 bound 0.99933
    write_json(two_runs[0] / "results.json", results)
    compare_runs(two_runs, tmp_path / "o")
    html = (tmp_path / "o" / COMPARE_HTML).read_text(encoding="utf-8")
    assert html.count('class="over"') == 1


def test_compare_attack_filter_and_errors(tmp_path, two_runs):
    summary = compare_runs(two_runs, tmp_path / "one", attacks=["shadow"])
    assert {r.attack for r in summary.rows} == {"shadow"}
    with pytest.raises(UserError):
        compare_runs(two_runs, tmp_path / "none", attacks=["lira_online"])
    with pytest.raises(UserError):
        compare_runs([tmp_path / "missing"], tmp_path / "x")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError):
        compare_runs([tmp_path / "empty"], tmp_path / "x")


def test_compare_cli(tmp_path, two_runs, capsys):
    proc = subprocess.run([sys.executable, "-m", "audit", "compare", *map(str, two_runs), "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = Path(proc.stdout.splitlines()[0].split(":", 1)[1].strip())
    assert report.name == COMPARE_HTML and report.is_file()
    assert (report.parent / COMPARE_PNG).is_file()
    assert json.loads((report.parent / COMPARE_JSON).read_text())["runs"] == [str(p) for p in two_runs]
    from audit.cli import main

    assert main(["compare", str(tmp_path / "nope"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0 and "does not exist" in err
