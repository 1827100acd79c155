"""`sweep dp`: audits at several claimed epsilons, epsilon-vs-theory plot in the report."""

import json

from audit.cli import main


def test_sweep_dp_writes_plot_and_rows(tmp_path, capsys):
    code = main(["sweep", "dp", "--target", "dpgd_logreg_digits", "--epsilons", "2,8", "--threats",
                 "updates,white-box", "--runs", "120", "--out", str(tmp_path), "--quiet", "--device", "cpu",
                 "--confidence", "0.999"])
    assert code == 0
    sweeps = [p for p in tmp_path.iterdir() if "-sweep-" in p.name]
    assert len(sweeps) == 1
    run_dir = sweeps[0]
    results = json.loads((run_dir / "results.json").read_text())
    assert results["kind"] == "sweep"
    rows = results["rows"]
    assert [(r["threat"], r["epsilon_claimed"]) for r in rows] == [("updates", 2.0), ("updates", 8.0),
                                                                  ("white-box", 2.0), ("white-box", 8.0)]
    for r in rows:  # 4 audits x 3 bounds at confidence 0.999: false alarm <= 1.2%
        assert abs(r["epsilon_theory"] - r["epsilon_claimed"]) < 0.01 * r["epsilon_claimed"]
        assert 0 <= r["epsilon_lb_valid"] <= r["epsilon_lb"] <= r["epsilon_theory"] + 1e-9
        assert r["runs"] == 120 and results["timing"][f"audit_{r['run_dir']}_s"] > 0
        assert (run_dir / "audits" / r["run_dir"] / "results.json").is_file()
    series = {p["series"] for p in results["sweep"]}
    assert {"updates", "white-box", "updates (best valid)"} <= series
    assert all(r["verdict"] == "consistent" for r in rows) and results["verdict"]["status"] == "consistent"
    html = (run_dir / "report.html").read_text()
    assert "Empirical ε lower bound vs theoretical ε" in html
    assert (run_dir / "audits").is_dir()
    assert "eps_theory" in capsys.readouterr().out


def test_sweep_rejects_bad_epsilons(tmp_path):
    assert main(["sweep", "dp", "--target", "dpgd_logreg_digits", "--epsilons", "0,-1", "--out", str(tmp_path)]) == 2


def test_sweep_counts_a_rejected_tradeoff_curve_as_a_violation(tmp_path):
    """Shuffled batches accounted as Poisson: at 1,000 runs the audit's valid epsilon bound stays
    below the claim, but its test rejects the claim's own tradeoff curve — a violation at 95%; the
    sweep says so and exits 1 under --fail-above-claim (it ignored such rejections before)."""
    code = main(["sweep", "dp", "--target", "dpsgd_control_shuffle_as_poisson", "--threats", "updates",
                 "--epsilons", "1", "--runs", "1000", "--out", str(tmp_path), "--quiet", "--device", "cpu",
                 "--fail-above-claim"])
    results = json.loads(next(tmp_path.glob("*-sweep-*/results.json")).read_text())
    (row,) = results["rows"]
    assert row["epsilon_lb_valid"] < row["epsilon_theory"] and row["verdict"] == "violation"
    assert results["verdict"]["status"] == "violation" and code == 1
