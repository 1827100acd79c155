"""`python -m audit run mechanism`: sampling audit of every mechanism target."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from audit.cli import main
from audit.mechanism.runner import MechanismOptions, run_mechanism
from audit.report_step import write_report
from audit.target_defaults import load_catalogue

MECHANISM_TARGETS = [name for name, use in load_catalogue().items()
                     if use.family in ("mechanism", "dp-erm") and "mechanism" in use.run_kinds]
CONTROLS = [name for name, use in load_catalogue().items() if use.family == "control"]
#: Draws per world in the all-targets check: the run's default.
DRAWS = 100_000


def _run_dir(root: Path) -> Path:
    (run,) = [p for p in root.iterdir() if p.is_dir() and p.name != "cache"]
    return run


@pytest.mark.parametrize("name", MECHANISM_TARGETS)
def test_every_mechanism_audited_at_its_claim_stays_below_it(name, tmp_path):
    run_dir, outcome = run_mechanism(MechanismOptions(target=name, out=str(tmp_path), quiet=True, draws=DRAWS))
    assert outcome.game.draws_per_world == DRAWS
    cp = [b for b in outcome.lower_bounds if b.method == "clopper-pearson"][0]
    gdp = [b for b in outcome.lower_bounds if b.method == "gdp"][0]
    # Each bound fails with probability <= 5% for a correct mechanism; seeds are fixed.
    assert cp.valid and 0 < cp.epsilon <= outcome.epsilon_theory
    assert cp.epsilon <= outcome.game.pair_epsilon + 1e-9
    assert gdp.details["mu_lb"] <= gdp.details["mu_claim"] + 1e-9
    if gdp.valid:  # Gaussian output: the GDP bound is exact in shape, hence a valid epsilon bound
        assert gdp.epsilon <= outcome.epsilon_theory
    assert outcome.verdict.status == "consistent"
    assert outcome.best_lower_bound.epsilon == max(b.epsilon for b in (cp, gdp) if b.valid)
    assert (run_dir / "results.json").is_file() and not (run_dir / "report.html").exists()  # the runner's part
    assert write_report(run_dir, outcome).is_file() and (run_dir / "tradeoff.png").is_file()  # asked for


@pytest.mark.parametrize("name", CONTROLS)
def test_every_broken_control_is_flagged(name, tmp_path, capsys):
    code = main(["run", "mechanism", "--target", name, "--quiet", "--fail-above-claim", "--out", str(tmp_path)])
    results = json.loads((_run_dir(tmp_path) / "results.json").read_text())
    assert results["verdict"]["status"] == "violation" and code == 1
    best = results["best_lower_bound"]
    assert best["valid"] and best["epsilon"] > results["epsilon_theory"]
    if name == "broken_gaussian_classic_eps20":
        # Clopper-Pearson from 1e5 draws cannot reach 20; the exact-shape GDP bound does (module docstring).
        cp = [b for b in results["lower_bounds"] if b["method"] == "clopper-pearson"][0]
        assert cp["epsilon"] < results["epsilon_theory"] < best["epsilon"] and best["method"] == "gdp"
    capsys.readouterr()


def test_same_seed_same_results_and_cli_summary(tmp_path, capsys):
    argv = ["run", "mechanism", "--target", "laplace_count", "--draws", "20000", "--quiet"]
    assert main([*argv, "--out", str(tmp_path / "a")]) == 0
    text = capsys.readouterr().out
    assert "theory:" in text and "clopper-pearson" in text and "mu >=" in text
    assert main([*argv, "--out", str(tmp_path / "b")]) == 0
    a, b = (json.loads((_run_dir(tmp_path / x) / "results.json").read_text()) for x in "ab")
    for key in a["volatile"]:
        a.pop(key), b.pop(key)
    assert a == b
    # Laplace is not Gaussian-shaped: the GDP row reports mu only, never a misleading epsilon.
    gdp = [x for x in a["lower_bounds"] if x["method"] == "gdp"][0]
    assert gdp["epsilon"] is None and "epsilon_omitted" in gdp["details"]


@pytest.mark.parametrize("argv, message", [
    (["--target", "dpsgd_mnist"], "not a mechanism"),
    (["--target", "nope"], "unknown mechanism target"),
    (["--target", "laplace_count", "--epsilon", "0"], "epsilon must be a positive"),
    (["--target", "laplace_count", "--delta", "1"], "delta must lie in (0, 1)"),
    (["--target", "laplace_count", "--device", "cuda"], "does not apply"),
])
def test_bad_input_is_one_line_exit_2(argv, message, tmp_path, capsys):
    assert main(["run", "mechanism", *argv, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []  # rejected before any run directory is made
