"""Plugin targets (`--target module:factory`): loading, validation, mechanism audits."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest

from audit.cli import main
from audit.errors import TargetCodeError, UserError
from audit.stats.score_fit import fit_log_ratio_score
from targets.plugins.loading import MechanismPlugin, TrainerPlugin, load_plugin

PLUGIN_SOURCE = textwrap.dedent('''
    import numpy as np

    PAIR = (np.zeros(10), np.r_[np.zeros(10), 1.0])

    def laplace(scale):
        def release(data, rng):
            return float(np.sum(data) + rng.laplace(0.0, scale))
        return release

    def correct():
        return {"kind": "mechanism", "mechanism": laplace(1.0), "neighbours": PAIR,
                "claim": {"epsilon": 1.0, "delta": 0}}

    def half_scale():
        return {"kind": "mechanism", "mechanism": laplace(0.5), "neighbours": PAIR,
                "claim": {"epsilon": 1.0, "delta": 0}}

    def trainer():
        return {"kind": "trainer", "dataset": "digits", "train": lambda X, y, seed: (lambda Z: Z),
                "claim": {"epsilon": 2.0, "delta": 1e-5}}

    def not_a_dict():
        return [1, 2]

    def bad_kind():
        return {"kind": "database", "claim": {"epsilon": 1.0}}

    def bad_claim():
        return {"kind": "mechanism", "mechanism": laplace(1.0), "neighbours": PAIR, "claim": {"epsilon": -1}}

    def bad_neighbours():
        return {"kind": "mechanism", "mechanism": laplace(1.0), "neighbours": PAIR[0], "claim": {"epsilon": 1}}

    def bad_dataset():
        return {"kind": "trainer", "dataset": "imagenet", "train": lambda X, y, s: None, "claim": {"epsilon": 1}}

    def bad_train():
        return {"kind": "trainer", "dataset": "digits", "train": 3, "claim": {"epsilon": 1}}

    def raises():
        raise RuntimeError("boom")

    def bad_output():
        return {"kind": "mechanism", "mechanism": lambda d, rng: float("nan"), "neighbours": PAIR,
                "claim": {"epsilon": 1.0}}
''')


@pytest.fixture()
def plugin_module(tmp_path, monkeypatch) -> str:
    (tmp_path / "user_dp_code.py").write_text(PLUGIN_SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "user_dp_code"


def test_valid_plugins_load(plugin_module):
    mech = load_plugin(f"{plugin_module}:correct")
    assert isinstance(mech, MechanismPlugin) and mech.delta == 0.0 and mech.claim.epsilon(0.0) == 1.0
    trainer = load_plugin(f"{plugin_module}:trainer")
    assert isinstance(trainer, TrainerPlugin) and trainer.dataset == "digits" and trainer.delta == 1e-5


@pytest.mark.parametrize("factory, message", [
    ("not_a_dict", "must return a dict"),
    ("bad_kind", "field 'kind'"),
    ("bad_claim", "claim epsilon must be a positive"),
    ("bad_neighbours", "field 'neighbours'"),
    ("bad_dataset", "unknown dataset 'imagenet'"),
    ("bad_train", "field 'train'"),
    ("missing", "no callable 'missing'"),
])
def test_malformed_plugins_name_the_bad_field(plugin_module, factory, message):
    with pytest.raises(UserError, match=message.replace("(", r"\(")):
        load_plugin(f"{plugin_module}:{factory}")


def test_a_factory_that_raises_is_the_targets_own_error(plugin_module):
    with pytest.raises(TargetCodeError, match="raised RuntimeError: boom"):
        load_plugin(f"{plugin_module}:raises")


def test_unimportable_plugin_module():
    with pytest.raises(UserError, match="cannot import plugin module"):
        load_plugin("no_such_module_here:factory")
    with pytest.raises(UserError, match="package.module:factory"):
        load_plugin("not a spec:")


@pytest.mark.slow  # runs an audit end to end
@pytest.mark.parametrize("factory, status, code", [("correct", "consistent", 0), ("half_scale", "violation", 1)])
def test_mechanism_plugin_audit(plugin_module, factory, status, code, tmp_path, capsys):
    out = tmp_path / "runs"
    assert main(["run", "mechanism", "--target", f"{plugin_module}:{factory}", "--quiet", "--fail-above-claim",
                 "--out", str(out)]) == code
    (run,) = [p for p in out.iterdir() if p.is_dir() and p.name != "cache"]
    results = json.loads((run / "results.json").read_text())
    assert results["verdict"]["status"] == status
    assert results["game"]["test_fitted_on"].startswith("20000 separate draws")
    assert (run / "report.html").is_file()
    capsys.readouterr()


def test_plugin_output_errors_are_one_line(plugin_module, tmp_path, capsys):
    assert main(["run", "mechanism", "--target", f"{plugin_module}:bad_output", "--quiet",
                 "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "NaN" in err and err.count("\n") == 1


def test_learned_score_orders_like_the_likelihood_ratio():
    rng = np.random.default_rng(0)
    # Categorical outputs: the exact log-ratio per category is recovered.
    p0, p1 = np.array([0.5, 0.3, 0.2]), np.array([0.2, 0.3, 0.5])
    score = fit_log_ratio_score(rng.choice(3, 50_000, p=p0), rng.choice(3, 50_000, p=p1))
    np.testing.assert_allclose(score(np.arange(3)), np.log(p1 / p0), atol=0.05)
    # Vector outputs: Fisher projection then bins; the score separates the two worlds.
    x0 = rng.normal(0, 1, (20_000, 3))
    x1 = rng.normal(0, 1, (20_000, 3)) + np.array([0.0, 1.0, 0.0])
    score = fit_log_ratio_score(x0, x1)
    assert score(x1).mean() > score(x0).mean() + 0.5
