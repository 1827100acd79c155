"""Opacus accounting mismatches are caught by the update-level audit; the correct loop passes it.

Why these run counts. Each broken control runs DP-SGD with the noise multiplier, Poisson rate
(0.5) and number of steps the audit observes in its probe run; on the Dirac canary's dead
coordinate an observation is exactly ``Bernoulli(q) + N(0, sigma^2)``, so the per-run
log-likelihood ratio can be simulated exactly. The audit fixes its threshold in advance as the one
most likely to reject the claim's tradeoff curve under that mechanism
(:func:`audit.dp.canary_steps.rejection_threshold`); the probability that this very test rejects
with R runs is an exact binomial sum in its true rates (:func:`audit.stats.tradeoff_test.rejection_power`),
which 200,000 fresh simulated runs per world give to about 0.002. :data:`RUNS` is, on a grid of 25
runs, the smallest R at which it reaches 0.95 (extra epochs 0.951 at 500 runs, physical-batch rate
0.954 at 250, noise for epsilon 8 0.964 at 300; :func:`test_run_counts_are_the_smallest_the_maths_allows`
checks both sides). The claim is (2, 1e-5) throughout; the true epsilons (PLD, delta 1e-5) are
4.53, 6.20 and 7.98. With a fixed seed each test is deterministic.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

pytest.importorskip("opacus")

from audit.dp.canary_steps import rejection_threshold, simulate_llr  # noqa: E402
from audit.dp.options import DPOptions
from audit.dp.runner import run_dp  # noqa: E402
from audit.plugins.probe import StepMechanism
from audit.stats.outcome import Outcome
from audit.stats.tradeoff_test import rejection_power  # noqa: E402
from audit.testing import assert_private  # noqa: E402
from targets import opacus_controls as oc  # noqa: E402
from targets.plugins.loading import load_plugin  # noqa: E402

#: Runs per broken control (module docstring); the correct loop is audited with the largest.
RUNS = {"extra_epochs": 500, "physical_batch_rate": 250, "noise_for_larger_epsilon": 300}
STEPS_RUN = {"extra_epochs": oc.STEPS * oc.EXTRA_EPOCHS // oc.EPOCHS, "physical_batch_rate": oc.STEPS,
             "noise_for_larger_epsilon": oc.STEPS}


def _noise(control: str) -> float:
    return {"extra_epochs": oc.claimed_noise(), "physical_batch_rate": oc.claimed_noise(oc.PHYSICAL_BATCH / oc.N_TRAIN),
            "noise_for_larger_epsilon": oc.larger_epsilon_noise()}[control]


def _power(control: str, runs: tuple[int, ...]) -> list[float]:
    """Rejection probability of the audit's own test with each number of runs (half with the canary)."""
    claim = load_plugin(f"targets.opacus_controls:{control}").claim
    mech = StepMechanism(_noise(control), oc.SAMPLE_RATE, STEPS_RUN[control])
    rng = np.random.default_rng(7)
    sim_in, sim_out = simulate_llr(mech, 200_000, True, rng), simulate_llr(mech, 200_000, False, rng)
    out = []
    for r in runs:
        threshold, _ = rejection_threshold(claim, mech, 0.95).design(r // 2, r - r // 2)
        out.append(float(rejection_power(np.mean(sim_out >= threshold), np.mean(sim_in < threshold), r // 2,
                                         r - r // 2, 0.025, claim.tradeoff)[0]))
    return out


def test_run_counts_are_the_smallest_the_maths_allows():
    for control, runs in RUNS.items():
        assert oc.true_epsilon(control) >= 2 * oc.EPSILON
        fewer, chosen = _power(control, (runs - 25, runs))
        assert fewer < 0.95 <= chosen, control
    assert oc.true_epsilon("correct") == pytest.approx(oc.EPSILON, abs=1e-3)


def _audit(target: str, runs: int, tmp_path) -> Outcome:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return run_dp(DPOptions(target=target, runs=runs, out=str(tmp_path), quiet=True, threat="updates",
                                canary="dirac"))[1]


@pytest.mark.parametrize("control", sorted(RUNS))
def test_broken_control_is_flagged(control, tmp_path):
    """Through ``assert_private``, as a user's CI would run it: the failure names the rejecting test,
    the bound, the claim and the run directory."""
    with warnings.catch_warnings(), pytest.raises(AssertionError) as failure:
        warnings.simplefilter("ignore")
        assert_private(f"opacus_control_{control}", attack="updates/dirac", runs=RUNS[control], out=tmp_path)
    message = str(failure.value)
    assert "rejects the claim's own tradeoff curve" in message and "lower bound" in message
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir() and p.name != "cache"]
    assert "claimed epsilon 2.000 at delta 1e-05" in message and str(run) in message
    results = json.loads((run / "results.json").read_text())
    assert results["verdict"]["status"] == "violation"
    code = results["params"]["code"]
    assert code["steps"] == STEPS_RUN[control] and code["sample_rate"] == oc.SAMPLE_RATE
    assert code["epsilon_pld"] == pytest.approx(oc.true_epsilon(control), rel=1e-6)
    assert results["game"]["threshold_strategy"] == "fixed"


def test_correct_loop_passes_the_same_audit(tmp_path):
    outcome = _audit("opacus_control_correct", max(RUNS.values()), tmp_path)
    assert outcome.verdict.status == "consistent"
    assert outcome.audited.params["code"]["epsilon_pld"] == pytest.approx(outcome.epsilon_theory, rel=1e-6)
    assert outcome.audited.reproducible is True


def test_opacus_claim_is_what_its_accountant_reports(tmp_path):
    outcome = _audit("targets.opacus_controls:correct_opacus_claim", 40, tmp_path)
    reported = outcome.audited.params["opacus_reported"]
    assert reported["accountant"] == "prv" and outcome.epsilon_theory == pytest.approx(reported["epsilon"])
    assert outcome.audited.params["code"]["epsilon_pld"] == pytest.approx(reported["epsilon"], abs=0.05)
    assert outcome.verdict.status == "consistent"


def test_white_box_reads_the_final_parameters(tmp_path):
    """White-box: the score is the initial minus the final parameter on the canary's coordinate (read
    from the optimizer's parameters after ``train`` returns), bounded with the Bonferroni grid."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outcome = run_dp(DPOptions(target="opacus_control_correct", runs=40, out=str(tmp_path), quiet=True,
                                   threat="white-box", canary="dirac"))[1]
    assert outcome.game.threat == "white-box" and outcome.game.threshold_strategy == "bonferroni-grid"
    assert outcome.verdict.status == "consistent" and outcome.audited.params["code"]["steps"] == oc.STEPS
