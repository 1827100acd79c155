"""The one DP-SGD step (targets.dpsgd_step): the audit runs of `run dp` train exactly what
train_models trains (that an audit of the step catches a mutation of its noise:
tests/e2e/dp/test_dpsgd_step_audit.py)."""

import numpy as np
import pytest
import torch

from targets.datasets import load_dataset
from targets.dpsgd_audit import CanaryPlan, dead_coordinate, flatten, param_shapes, train_audit_runs
from targets.dpsgd_step import StepHook, StepOptions
from targets.training import TrainConfig, train_models

SEEDS = [5, 6, 7]


def _config(arch, sampling):
    return TrainConfig(arch=arch, epochs=2, sample_rate=0.2, lr=0.5, expected_batch_size=8, clip_norm=1.0,
                       noise_multiplier=0.8, sampling=sampling)


@pytest.mark.parametrize("sampling", ["poisson", "shuffle"])
@pytest.mark.parametrize("arch", ["logreg", "mlp"])
def test_audit_runs_without_the_canary_are_the_trained_models(arch, sampling):
    """A canary that never joins (every run excluded) leaves each audit run bit for bit the model
    train_models trains with the same seed on the same rows: same initialisation, batches and noise
    (the gradient canary's Poisson coin has its own generator)."""
    data = load_dataset("digits")
    train_index = np.random.default_rng(0).permutation(len(data))[:40]  # unsorted on purpose
    mask = np.zeros((len(SEEDS), len(data)), dtype=bool)
    mask[:, train_index] = True
    config = _config(arch, sampling)
    trained = flatten(train_models(data, mask, config, SEEDS, progress=False))
    g = np.zeros(sum(int(np.prod(s)) for s in param_shapes(arch, data).values()), np.float32)
    g[3] = 1.0
    excluded = np.zeros(len(SEEDS), dtype=bool)
    canaries = {"grad_canary": g, "input_canary": (np.asarray(data.X[train_index[0]]), 3)}
    for name, canary in canaries.items():
        runs = train_audit_runs(data, train_index, config, SEEDS,
                                CanaryPlan(included=excluded, observe="updates", **{name: canary}))
        assert torch.equal(runs.final, trained), name
        assert np.all(runs.canary_steps == 0)


def test_audit_runs_with_the_canary_differ_only_where_it_joins():
    """With a Dirac gradient canary on a coordinate no data row reaches, the included runs move
    that coordinate by exactly the canary's steps; every other coordinate is the excluded twin's."""
    data = load_dataset("digits")
    train_index = np.arange(40)
    config = _config("logreg", "poisson")
    j = dead_coordinate("logreg", data, train_index)
    g = np.zeros(sum(int(np.prod(s)) for s in param_shapes("logreg", data).values()), np.float32)
    g[j] = 1.0
    seeds = list(range(8))
    inc = np.ones(8, dtype=bool)
    with_canary = train_audit_runs(data, train_index, config, seeds, CanaryPlan(included=inc, grad_canary=g))
    without = train_audit_runs(data, train_index, config, seeds, CanaryPlan(included=~inc, grad_canary=g))
    others = np.arange(g.size) != j
    assert torch.equal(with_canary.final[:, others], without.final[:, others])
    moved = (without.final - with_canary.final)[:, j].numpy()
    np.testing.assert_allclose(moved, config.lr / config.expected_batch_size * with_canary.canary_steps, atol=1e-5)
    assert with_canary.canary_steps.sum() > 0


def test_audit_runs_refuse_step_options_with_a_hook_of_their_own():
    """The audit runs' hook is their canary's: options that carry another hook are refused, not overridden."""
    data = load_dataset("digits")
    g = np.zeros(sum(int(np.prod(s)) for s in param_shapes("logreg", data).values()), np.float32)
    with pytest.raises(ValueError, match="step hook"):
        train_audit_runs(data, np.arange(40), _config("logreg", "poisson"), [0], CanaryPlan(included=np.ones(1, bool),
                         grad_canary=g), options=StepOptions(hook=StepHook()))
