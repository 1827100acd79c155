"""The multi-run DP audit's game and statistics, without a run: the subsampled-Gaussian inversion, fair coins,
the designed threshold, the canary trainer, DP-ERM's crafted pair and the summary lines (``run dp`` end to
end and the Monte-Carlo checks of the bounds: tests/e2e/dp/test_dp_audit.py).

Validity tests use fixed seeds and a stated failure probability: each bound holds with its
confidence, so with confidence c per bound and B bounds checked the test fails with probability
at most B (1 - c) for a correct implementation (union bound); we use c = 0.999.
"""


import numpy as np
import pytest
from scipy import stats

from audit.dp.game import fair_coins
from audit.errors import UserError
from audit.stats.per_step import subsampled_mu_from_rates
from targets.datasets import load_dataset
from targets.dpsgd_audit import CanaryPlan, dead_coordinate, param_shapes, train_audit_runs
from targets.dpsgd_step import StepOptions
from targets.training import TrainConfig

DELTA = 1e-5


def test_subsampled_mu_inverts_the_mixture_tradeoff():
    for q in (1.0, 0.3, 0.05):
        for mu in (0.5, 1.5):
            tau = 1.2
            fpr = stats.norm.sf(tau)
            fnr = (1 - q) * stats.norm.cdf(tau) + q * stats.norm.cdf(tau - mu)
            assert subsampled_mu_from_rates(fpr, fnr, q) == pytest.approx(mu, abs=1e-9)
    # rates that refute nothing give 0
    assert subsampled_mu_from_rates(0.5, 0.5, 1.0) == 0.0
    assert subsampled_mu_from_rates(0.3, 0.7, 0.1) == pytest.approx(0.0, abs=1e-9)
    assert subsampled_mu_from_rates(0.3, 0.75, 0.1) == 0.0


def test_fair_coins_are_seeded_and_need_runs():
    assert np.array_equal(fair_coins(50, 3), fair_coins(50, 3))
    with pytest.raises(UserError):
        fair_coins(2, 0)


def test_designed_threshold_depends_only_on_the_claim():
    from audit.stats.per_step import designed_threshold

    t1, m1 = designed_threshold(1.0, 0.05, 80000, 80000, 0.95)
    t2, m2 = designed_threshold(1.0, 0.05, 80000, 80000, 0.95)
    assert (t1, m1) == (t2, m2) and 0 < m1 < 1.0  # expected bound below the true base mu 1/sigma = 1
    # more observations -> a larger expected bound, approaching 1/sigma
    assert designed_threshold(1.0, 0.05, 800000, 800000, 0.95)[1] > m1


def test_gradient_canary_trainer_observes_canary_plus_noise():
    data = load_dataset("digits")
    idx = np.arange(32)
    R, T, sigma = 64, 3, 0.5
    cfg = TrainConfig(arch="logreg", epochs=T, sample_rate=1.0, lr=0.5, expected_batch_size=32, clip_norm=1.0,
                      noise_multiplier=sigma)
    j = dead_coordinate("logreg", data, idx)
    assert np.all(data.X[idx].reshape(32, -1)[:, j] == 0)
    P = sum(int(np.prod(s)) for s in param_shapes("logreg", data).values())
    g = np.zeros(P, np.float32)
    g[j] = 1.0
    inc = np.arange(R) % 2 == 0
    # a 1 MiB budget trains the 64 runs in chunks of 17 (targets.training.memory_plan)
    runs = train_audit_runs(data, idx, cfg, list(range(R)), CanaryPlan(included=inc, grad_canary=g, observe="updates"),
                            options=StepOptions(max_memory="1MiB"))
    assert runs.step_obs.shape == (R, T)
    assert np.all(runs.canary_steps[inc] == T) and np.all(runs.canary_steps[~inc] == 0)
    # observation = canary (1 in units of C) + N(0, sigma^2): 5-sigma bounds on the means
    se = sigma / np.sqrt(R * T / 2)
    assert abs(runs.step_obs[inc].mean() - 1) < 5 * se and abs(runs.step_obs[~inc].mean()) < 5 * se
    # the dead coordinate moves only by canary + noise: final - initial = -lr/B * (sum obs * C)
    moved = (runs.final - runs.initial)[:, j].numpy()
    np.testing.assert_allclose(moved, -0.5 / 32 * runs.step_obs.sum(1), rtol=1e-4, atol=1e-6)
    # chunking does not change a run
    again = train_audit_runs(data, idx, cfg, list(range(R))[:5],
                             CanaryPlan(included=inc[:5], grad_canary=g, observe="updates"))
    np.testing.assert_allclose(again.step_obs, runs.step_obs[:5], rtol=1e-5, atol=1e-6)


def test_dperm_crafted_pair_beats_label_flip_and_respects_sensitivity():
    from targets.dperm import make_dperm

    flip = make_dperm("dperm_breast_cancer")
    pair = make_dperm("dperm_breast_cancer", pair="crafted-pair")
    assert flip.minimiser_shift() < pair.minimiser_shift() <= pair.sensitivity
    (x0, y0), (x1, y1) = pair.neighbouring_pair()
    assert x0.shape == x1.shape and np.sum(np.any(x0 != x1, axis=1)) == 1 and np.sum(y0 != y1) == 1


def test_few_runs_still_give_a_separating_test():
    """With few runs the held-out split's pessimistic selection values are all 0; its tie-break must
    still pick a separating threshold, and the grid always contains the zero-error test."""
    from audit.stats.thresholds import BonferroniGrid, HeldOutSplit, threshold_bounds

    inc = fair_coins(48, 0)
    scores = np.where(inc, 1.0, 0.0) + np.linspace(0, 0.1, 48)
    for strategy in (HeldOutSplit(), BonferroniGrid()):
        cp, gdp = threshold_bounds(scores, inc, DELTA, 0.95, strategy, 0)
        assert cp.details["fp"] == 0 and cp.details["fn"] == 0 and cp.epsilon > 0
        assert gdp.epsilon > 0


def test_summary_names_each_bounds_assumption(tmp_path):
    from helpers import typed_outcome

    from audit.dp.runner import summary_lines
    from audit.stats.lower_bound import LowerBound

    rows = [("clopper-pearson", True, {}), ("gdp", False, {"mu_lb": 0.5, "assumption": "Gaussian tradeoff"}),
            ("gaussian-fit", False, {"assumption": "Gaussian scores"}),
            ("per-step-composed", False, {"assumption": "step model"})]
    bounds = [LowerBound(method=method, epsilon=1.0, confidence=0.95, n=10, valid=valid,
                         details=details).block().to_dict() for method, valid, details in rows]
    lines = summary_lines(tmp_path, typed_outcome({"epsilon_theory": 2.0, "delta": 1e-5, "lower_bounds": bounds,
                                                   "verdict": {"status": "consistent", "text": "ok"}}))
    assert "valid bound on epsilon, no assumption" in lines[2]
    assert "bound on mu (valid) with epsilon read as Gaussian — estimate (Gaussian tradeoff)" in lines[3]
    assert "estimate of epsilon (Gaussian scores)" in lines[4] and "estimate of epsilon (step model)" in lines[5]
