"""Plugin targets (`--target module:factory`): loading, validation, one-line errors of their outputs (their
mechanism audits: tests/e2e/mechanism/test_mechanism_plugin_audit.py)."""

from __future__ import annotations

import numpy as np
import pytest

from audit.cli import main
from audit.errors import TargetCodeError, UserError
from audit.stats.score_fit import fit_log_ratio_score
from targets.plugins.loading import MechanismPlugin, TrainerPlugin, load_plugin


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
