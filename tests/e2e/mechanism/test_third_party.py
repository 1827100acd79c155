"""Third-party code as plugins, audited: randomness it prefers, seeds it ignores, non-numeric outputs,
GDP/zCDP/pure claims, the thread policy, package provenance and run names. Every plugin here uses numpy
only; the OpenDP and diffprivlib examples are in tests/e2e/test_examples.py, the checks without a run in
tests/plugins/test_plugin_outputs.py."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest

from audit.cli import main
from audit.testing import assert_private
from targets.plugins.loading import load_plugin

#: Draws per world of the mechanism audits here (the learned test uses as many again).
DRAWS = 20_000

PLUGIN_SOURCE = textwrap.dedent('''
    import numpy as np

    PAIR = (np.zeros(10), np.r_[np.zeros(10), 1.0])
    NAMES = ("alice", "bob", "carol")
    _OWN = np.random.default_rng(20261126)  # the workbench cannot seed it (fixed: a deterministic test)

    def _claim(release, **extra):
        return {"kind": "mechanism", "mechanism": release, "neighbours": PAIR,
                "claim": {"epsilon": 1.0, "delta": 0}} | extra

    def random_state():
        def release(data, random_state: np.random.RandomState):
            return float(np.sum(data) + random_state.laplace(0.0, 1.0))
        return _claim(release)

    def seed():
        def release(data, seed):
            return float(np.sum(data) + np.random.default_rng(seed).laplace(0.0, 1.0))
        return _claim(release)

    def declared():
        return _claim(lambda data, r: float(np.sum(data) + r.laplace(0.0, 1.0)), rng="random_state")

    def own_generator():
        def release(data):
            return float(np.sum(data) + _OWN.laplace(0.0, 1.0))
        return _claim(release, name="own_generator")

    def exponential(epsilon=1.0, claimed=1.0):
        def release(data, rng):  # exponential mechanism over named candidates, utility sensitivity 1
            utility = np.array([np.sum(data), 0.0, -1.0])
            p = np.exp(epsilon * utility / 2.0)
            return NAMES[rng.choice(3, p=p / p.sum())]
        return _claim(release) | {"claim": {"epsilon": claimed}}

    def leaky_exponential():
        return exponential(epsilon=4.0, claimed=1.0)

    def histogram():
        edges = np.linspace(0.0, 1.0, 3)
        def release(data, rng):
            counts, _ = np.histogram(data, bins=edges)
            return counts + rng.laplace(0.0, 2.0, size=counts.size), edges
        return _claim(release)

    def gaussian(mu=1.0, claim=None):
        def release(data, rng):
            return float(np.sum(data) + rng.normal(0.0, 1.0 / mu))
        return _claim(release) | {"claim": claim or {"mu": mu}}

    def gaussian_claims_less():
        return gaussian(mu=2.0, claim={"mu": 0.5})

    def gaussian_zcdp():
        return gaussian(mu=1.0, claim={"rho": 0.5})

    def set_output():
        return _claim(lambda data, rng: {1, 2})

    def trainer(ignore_seed=False):
        def train(X, y, random_state: np.random.RandomState):
            noise = (_OWN if ignore_seed else random_state).normal(0.0, 1.0, size=(int(y.max()) + 1, X.shape[1]))
            means = np.stack([X[y == k].mean(0) if np.any(y == k) else np.zeros(X.shape[1])
                              for k in range(int(y.max()) + 1)]) + noise
            def predict_proba(Z):
                logits = -((Z[:, None, :] - means[None]) ** 2).sum(-1) / X.shape[1]
                e = np.exp(logits - logits.max(1, keepdims=True))
                return e / e.sum(1, keepdims=True)
            return predict_proba
        return {"kind": "trainer", "dataset": "digits", "train": train, "name": "nearest_mean",
                "claim": {"epsilon": 8.0, "delta": 0}}

    def trainer_ignoring_seed():
        return trainer(ignore_seed=True)
''')


@pytest.fixture()
def plugins(tmp_path, monkeypatch) -> str:
    (tmp_path / "third_party_code.py").write_text(PLUGIN_SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "third_party_code"


def _run(argv: list[str], out) -> tuple[int, dict, dict, object]:
    out = out / "runs"
    code = main(argv + ["--quiet", "--out", str(out)])
    (run,) = [p for p in out.iterdir() if p.is_dir() and p.name != "cache"]
    return code, json.loads((run / "results.json").read_text()), json.loads((run / "config.json").read_text()), run


# ---------------------------------------------------------------------------------------------- 1. randomness


@pytest.mark.parametrize("factory, kind", [("random_state", "random_state"), ("seed", "seed"),
                                           ("declared", "random_state")])
def test_mechanism_gets_the_randomness_it_takes_and_is_reproducible(plugins, factory, kind, tmp_path):
    outcome = assert_private(f"{plugins}:{factory}", runs=5000, out=tmp_path)
    assert outcome.audited.params["rng"] == kind
    assert outcome.verdict.status == "consistent"
    assert outcome.audited.reproducible is True


# ---------------------------------------------------------------------------------------------- 2. ignored seeds


def test_a_plugin_ignoring_its_seed_is_flagged_and_still_audited(plugins, tmp_path, capsys):
    code, results, config, run = _run(["run", "mechanism", "--target", f"{plugins}:own_generator",
                                       "--draws", str(DRAWS)], tmp_path)
    assert code == 0 and results["verdict"]["status"] == "consistent"
    assert results["reproducible"] is False and "ignores its seed" in results["reproducibility_note"]
    assert config["plugin"]["rng"] == "none"
    assert "not reproducible" in capsys.readouterr().out
    assert "Reproducibility of the plugin" in (run / "report.html").read_text()


def test_a_trainer_ignoring_its_seed_is_flagged(plugins, tmp_path, capsys):
    honest = assert_private(f"{plugins}:trainer", attack="black-box/mislabelled", runs=20, out=tmp_path)
    assert honest.audited.reproducible is True and honest.audited.params["rng"] == "random_state"
    code, results, config, _ = _run(["run", "dp", "--target", f"{plugins}:trainer_ignoring_seed", "--threat",
                                     "black-box", "--canary", "mislabelled", "--runs", "20"], tmp_path / "b")
    assert code == 0 and results["reproducible"] is False
    assert results["delta"] == 0 and results["epsilon_theory"] == 8.0
    assert "not reproducible" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------- 3. outputs


def test_string_outputs_are_audited_as_categories(plugins, tmp_path):
    outcome = assert_private(f"{plugins}:exponential", runs=10_000, out=tmp_path / "a")
    assert outcome.verdict.status == "consistent" and outcome.game.test_fitted_on.startswith("10000")
    with pytest.raises(AssertionError, match="exceeds the claimed epsilon 1.000"):
        assert_private(f"{plugins}:leaky_exponential", runs=10_000, out=tmp_path / "b")


def test_histogram_tuples_are_flattened(plugins, tmp_path):
    outcome = assert_private(f"{plugins}:histogram", runs=DRAWS, out=tmp_path)
    assert outcome.verdict.status == "consistent"


def test_unusable_output_exits_2_with_one_line(plugins, tmp_path, capsys):
    assert main(["run", "mechanism", "--target", f"{plugins}:set_output", "--quiet", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "return a number" in err and err.count("\n") == 1


# ---------------------------------------------------------------------------------------------- 4. claims


def test_pure_claim_is_audited_at_delta_zero(plugins, tmp_path, capsys):
    code, results, _, _ = _run(["run", "mechanism", "--target", f"{plugins}:seed", "--draws", str(DRAWS)], tmp_path)
    assert code == 0 and results["delta"] == 0.0 and results["epsilon_theory"] == 1.0
    rows = {b["method"]: b for b in results["lower_bounds"]}
    assert rows["clopper-pearson"]["details"]["delta"] == 0.0 and rows["clopper-pearson"]["epsilon"] > 0
    assert rows["gdp"]["epsilon"] is None and rows["gdp"]["details"]["mu_lb"] > 0
    assert "delta = 0" in capsys.readouterr().out


def test_gdp_claim_is_compared_in_mu(plugins, tmp_path):
    outcome = assert_private(f"{plugins}:gaussian", runs=DRAWS, out=tmp_path / "a")
    gdp = next(b for b in outcome.lower_bounds if b.method == "gdp")
    assert outcome.audited.accountant.startswith("1-GDP") and outcome.delta == 1e-5
    # the GDP row bounds mu rigorously, but its epsilon is an estimate: a mu-GDP claim does not make
    # the output Gaussian; the claim is tested through its own curve G_mu (FNR_ub < G_mu(FPR_ub) <=> mu_lb > mu)
    assert gdp.role == "estimate" and gdp.details["mu_claim"] == 1.0 and gdp.details["mu_lb"] < 1.0
    with pytest.raises(AssertionError, match=r"gaussian_claims_less: .*clopper-pearson"):
        assert_private(f"{plugins}:gaussian_claims_less", runs=DRAWS, out=tmp_path / "b")


def test_zcdp_claim(plugins, tmp_path):
    outcome = assert_private(f"{plugins}:gaussian_zcdp", runs=DRAWS, out=tmp_path)
    assert "zCDP" in outcome.audited.accountant and outcome.verdict.status == "consistent"
    gdp = next(b for b in outcome.lower_bounds if b.method == "gdp")
    assert gdp.role == "estimate" and gdp.details["mu_claim"] > 1.0  # rho-zCDP implies less than sqrt(2 rho)-GDP


# ---------------------------------------------------------------------------------------------- 5. threads


def test_the_projects_own_plugins_keep_the_projects_threads(plugins):
    assert load_plugin(f"{plugins}:seed").threads is None  # the plugin policy
    assert load_plugin("dpsgd_control_correct").threads == 0  # no limit: the project's own training code


def test_plugin_code_runs_under_the_thread_limit(tmp_path):
    import torch

    seen = tmp_path / "threads.txt"  # the audit runs in a child process: what the mechanism saw comes back in a file

    def release(data, rng):
        with seen.open("a") as record:
            record.write(f"{torch.get_num_threads()}\n")
        return float(np.sum(data) + rng.laplace(0.0, 1.0))

    made = {"kind": "mechanism", "name": "threads_seen", "mechanism": release,
            "neighbours": (np.zeros(3), np.r_[np.zeros(3), 1.0]), "claim": {"epsilon": 1.0}}
    assert_private(made, runs=200, out=tmp_path)
    assert set(seen.read_text().split()) == {"1"}


# ---------------------------------------------------------------------------------------------- 6. provenance, names


def test_config_records_plugin_packages_and_runs_are_named_alike(plugins, tmp_path):
    import importlib.metadata

    _, results, config, run = _run(["run", "mechanism", "--target", f"{plugins}:own_generator", "--draws", "200"],
                                   tmp_path / "m")
    assert config["plugin"]["packages"] == {"numpy": importlib.metadata.version("numpy")}
    assert config["plugin"]["spec"] == f"{plugins}:own_generator"
    assert results["target"] == "own_generator" and run.name.endswith("-mechanism-own_generator")
    _, results, config, run = _run(["run", "dp", "--target", f"{plugins}:trainer", "--threat", "black-box",
                                    "--canary", "mislabelled", "--runs", "4"], tmp_path / "t")
    assert results["target"] == "nearest_mean" and run.name.endswith("-dp-nearest_mean")
    assert config["plugin"]["packages"] == {"numpy": importlib.metadata.version("numpy")}
    _, results, _, run = _run(["run", "mechanism", "--target", f"{plugins}:seed", "--draws", "200"], tmp_path / "s")
    assert results["target"] == f"{plugins}:seed" and results["params"]["plugin"] == f"{plugins}:seed"
