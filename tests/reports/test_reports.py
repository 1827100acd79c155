"""Tests of the report renderer (reports.plots, reports.html) and the `report` command, on the fixture run
(the report in a browser: tests/e2e/test_report_browser.py)."""

from __future__ import annotations

import argparse
import base64
import copy
import io
import re
import shutil
from pathlib import Path

import matplotlib.image as mpimg
import numpy as np
import pytest
from helpers import FIXTURES, typed_outcome

from audit.errors import UserError
from audit.io import read_json, write_json
from audit.results_file import load_outcome
from audit.stats.outcome import AttackMetrics, SweepPoint
from reports import plots
from reports.html import render_report

FIXTURE = FIXTURES / "run_membership"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
DATA_URI = re.compile(r"data:image/png;base64,([A-Za-z0-9+/=]+)")
EVIL = "<script>alert(1)</script>"


def _decode_png(data: bytes) -> np.ndarray:
    assert data.startswith(PNG_MAGIC)
    image = mpimg.imread(io.BytesIO(data), format="png")
    assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100
    return image


def test_render_writes_report_and_all_plots(membership_run: Path) -> None:
    path = render_report(membership_run)
    assert path == membership_run / "report.html"
    for name in ("roc.png", "tradeoff.png"):  # the fixture's sweep points (an older file's) are a sweep's only
        image = _decode_png((membership_run / name).read_bytes())
        assert image[..., :3].std() > 0.05, f"{name} looks blank"
    html = path.read_text(encoding="utf-8")
    results = read_json(membership_run / "results.json")
    # The headline (sentences, figure, attack table) and every section of the fixture show up.
    for text in ("What was audited", "What was found", '<figure class="headline">', "<h2>Attacks</h2>",
                 "How to read this report", "Every lower bound", "More figures", "Parameters", "Audit game",
                 "Model", "Configuration (config.json)", "noise_multiplier", "ε = 7.99 at δ = 1e-05",
                 "(pld)", "add/remove", "one-run", "loss_threshold",
                 "shadow", "n_shadow_models", "consistent", "#d7f0d9"):
        assert text in html, text
    assert results["target_description"] in html
    assert html.index('<figure class="headline">') < html.index("<table")
    # The best bound (one-run, 1.42) is the one marked and summarised.
    assert re.search(r"<tr><td>one-run \(best\)</td><td>shadow</td><td>1.42</td>", html)
    assert "ε ≥ 1.42 (one-run, attack shadow, 95% confidence)" in html
    # The GDP figure is shown as an estimate.
    assert re.search(r"<td>gdp</td>.*?<td>estimate</td>", html)


def test_data_uris_decode_and_no_external_urls(membership_run: Path) -> None:
    html = render_report(membership_run).read_text(encoding="utf-8")
    uris = DATA_URI.findall(html)
    assert len(uris) == 2
    for encoded in uris:
        _decode_png(base64.b64decode(encoded, validate=True))
    without_images = DATA_URI.sub("", html)
    lowered = html.lower()
    assert "http://" not in lowered and "https://" not in lowered
    assert "<script" not in without_images.lower()
    values = re.findall(r"""\b(?:src|href|action|srcset|poster)\s*=\s*(["']?)([^"'\s>]*)""", html, re.IGNORECASE)
    assert len(values) == 2 and all(v.startswith("data:image/png;base64,") for _, v in values), values
    assert "@import" not in html and "url(" not in without_images


def test_user_strings_are_escaped(membership_run: Path) -> None:
    results = read_json(membership_run / "results.json")
    results["target"] = EVIL
    results["target_description"] = 'plugin my.mod:factory "quoted" & <b>bold</b>'
    results["attacks"][EVIL] = copy.deepcopy(results["attacks"]["shadow"])
    results["attacks"][EVIL]["empirical_points"][0]["label"] = EVIL
    results["lower_bounds"][0]["attack"] = EVIL
    results["params"][EVIL] = EVIL
    results["verdict"]["text"] = EVIL
    write_json(membership_run / "results.json", results)
    config = read_json(membership_run / "config.json")
    config["target"] = "pkg.evil:<img src=x onerror=alert(1)>"
    write_json(membership_run / "config.json", config)
    html = render_report(membership_run).read_text(encoding="utf-8")
    assert EVIL not in html
    assert "<img src=x" not in html
    assert "<b>bold</b>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;b&gt;bold&lt;/b&gt;" in html
    assert html.lower().count("<script") == 0
    assert html.count("<img ") == 2


def test_render_is_deterministic(membership_run: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    shutil.copytree(FIXTURE, other)
    render_report(membership_run)
    first = {p.name: p.read_bytes() for p in membership_run.iterdir() if p.suffix in (".png", ".html")}
    render_report(other)
    second = {p.name: p.read_bytes() for p in other.iterdir() if p.suffix in (".png", ".html")}
    render_report(membership_run)  # re-render in place (overwrites)
    third = {p.name: p.read_bytes() for p in membership_run.iterdir() if p.suffix in (".png", ".html")}
    assert set(first) == {"roc.png", "tradeoff.png", "report.html"}
    assert first == second == third
    for name, data in first.items():
        if name.endswith(".png"):
            assert b"tIME" not in data and b"matplotlib" not in data.lower(), name


def test_sections_only_when_data_present(tmp_path: Path) -> None:
    outcome = typed_outcome({
        "kind": "membership", "target": "nonprivate_mnist", "delta": 1e-5,
        "epsilon_theory": None, "accountant": None, "params": {}, "tradeoff": None, "lower_bounds": [],
        "best_lower_bound": None, "lower_bound_tradeoff": None, "attacks": {},
        "verdict": {"status": "no-claim", "text": "non-private target: nothing to check"},
    })
    run = tmp_path / "np"
    run.mkdir()
    html = render_report(run, outcome).read_text(encoding="utf-8")
    assert "makes no privacy claim" in html
    assert "no statistically valid lower bound" in html
    for absent in ("Every lower bound", "<h2>Attacks", "More figures", "Parameters", "config.json",
                   "data:image/png"):
        assert absent not in html, absent
    assert not list(run.glob("*.png"))
    assert "#e8e8e8" in html  # no-claim verdict colour


def test_tradeoff_without_attacks_makes_only_tradeoff_plot(membership_run: Path) -> None:
    results = read_json(membership_run / "results.json")
    for key in ("attacks", "sweep"):
        results.pop(key)
    render_report(membership_run, typed_outcome(results), config={})
    assert (membership_run / "tradeoff.png").exists()
    assert not (membership_run / "roc.png").exists() and not (membership_run / "epsilon.png").exists()
    assert "Configuration (config.json)" not in (membership_run / "report.html").read_text(encoding="utf-8")


def test_plot_functions_return_written_paths(tmp_path: Path) -> None:
    outcome = load_outcome(FIXTURE)
    roc = plots.roc_plot(outcome.attacks, tmp_path / "a" / "roc.png", outcome.judged.tradeoff)
    trade = plots.tradeoff_plot(outcome, tmp_path / "t.png")
    points = [SweepPoint.from_dict(p) for p in read_json(FIXTURE / "results.json")["sweep"]]
    eps = plots.epsilon_plot(points, tmp_path / "e.png")
    for path in (roc, trade, eps):
        assert path.exists()
        _decode_png(path.read_bytes())
    # ROC with no FPR=0-safe points and "inf"/None values must not crash (JSON writes inf as a string).
    weird = {"x": AttackMetrics.from_dict({"auc": None, "roc": {"fpr": [0, 0, "inf", 1], "tpr": [0, 0.5, None, 1]},
                                           "tpr_at_fpr": {}, "tpr_at_fpr_ci": {}})}
    _decode_png(plots.roc_plot(weird, tmp_path / "w.png").read_bytes())
    no_bound = SweepPoint(epsilon_theory=1, epsilon_lb=None, series="s", method="m")
    _decode_png(plots.epsilon_plot([no_bound], tmp_path / "n.png").read_bytes())


def test_missing_or_corrupt_results_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="does not exist"):
        render_report(tmp_path / "nope")
    with pytest.raises(UserError, match="results.json not found"):
        render_report(tmp_path)
    (tmp_path / "results.json").write_text('{"target": "x", ', encoding="utf-8")
    with pytest.raises(UserError, match="not valid JSON"):
        render_report(tmp_path)
    (tmp_path / "results.json").write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(UserError, match="JSON object"):
        render_report(tmp_path)
    (tmp_path / "results.json").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(UserError):
        render_report(tmp_path)
    results = read_json(FIXTURE / "results.json")
    results["verdict"].pop("text")
    write_json(tmp_path / "results.json", results)
    with pytest.raises(UserError, match=r"does not follow the results schema \(at verdict: 'text' is a required"):
        render_report(tmp_path)


def _report_parser() -> argparse.ArgumentParser:
    from audit.commands import report

    parser = argparse.ArgumentParser(prog="python -m audit")
    report.register(parser.add_subparsers(dest="command", required=True))
    return parser


def test_report_command(membership_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parser = _report_parser()
    args = parser.parse_args(["report", str(membership_run)])
    assert args.func(args) == 0
    assert str(membership_run / "report.html") in capsys.readouterr().out
    assert (membership_run / "report.html").exists()
    for bad in (tmp_path / "missing", membership_run / "results.json"):
        args = parser.parse_args(["report", str(bad)])
        with pytest.raises(UserError) as info:
            args.func(args)
        assert "\n" not in str(info.value)
    empty = tmp_path / "empty"
    empty.mkdir()
    args = parser.parse_args(["report", str(empty)])
    with pytest.raises(UserError, match="results.json"):
        args.func(args)


def test_runner_figures_and_tables_are_embedded_but_confined(membership_run: Path) -> None:
    results = read_json(membership_run / "results.json")
    plots.epsilon_plot([SweepPoint(epsilon_theory=1.0, epsilon_lb=0.5, series="x", method="m")],
                       membership_run / "grid.png")
    (membership_run.parent / "outside.png").write_bytes((membership_run / "grid.png").read_bytes())
    results["figures"] = [{"file": "grid.png", "title": "Runner grid", "caption": EVIL},
                          {"file": "../outside.png", "title": "Escaped", "caption": ""},
                          {"file": "missing.png", "title": "Missing", "caption": ""}]
    results["tables"] = [{"title": "Per-class figures", "columns": ["class", EVIL], "rows": [[0, 0.123456]]}]
    html = render_report(membership_run, typed_outcome(results)).read_text(encoding="utf-8")
    assert "Runner grid" in html and "(grid.png)" in html
    assert "Escaped" not in html and "Missing" not in html
    assert "Per-class figures" in html and "0.123" in html
    assert EVIL not in html and "&lt;script&gt;" in html
