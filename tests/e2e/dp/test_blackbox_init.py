"""Black-box DP-SGD audits from worst-case initial parameters (Annamalai & De Cristofaro 2024): the blank
canary, --init pretrained (one public starting point, trained by the project's trainer without privacy
on data disjoint from the training set), and a threshold fixed on separate calibration runs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from audit.dp.canaries import input_canary
from audit.dp.dpsgd_setup import pretrained_init
from audit.dp.options import DPOptions
from audit.dp.runner import run_dp
from audit.errors import UserError
from reports.summary import headline_sentences
from targets.catalogue import trained_target
from targets.datasets import load_dataset
from targets.dpsgd_audit import CanaryPlan, train_audit_runs
from targets.dpsgd_step import StepOptions
from targets.training import log_softmax, predict_logits


def test_blank_canary_is_the_zero_input_with_the_last_label():
    data = load_dataset("digits")
    x, label, info = input_canary("blank", data, np.arange(10), np.arange(10, 20), np.random.default_rng(0))
    assert x.shape == data.shape and not x.any() and label == data.n_classes - 1 == info["label"]


def test_pretrained_init_is_shared_by_every_run_and_fits_its_own_data():
    data = load_dataset("digits")
    target = trained_target("dpgd_logreg_digits")
    config = target.train_config(2.0)
    rows = np.arange(100, 400)
    init = pretrained_init(data, rows, config, seed=0, device="cpu")
    pred = log_softmax(predict_logits("logreg", {k: v[None] for k, v in init.items()}, data.X[rows]))[0]
    assert (pred.argmax(axis=1) == data.y[rows]).mean() > 0.9  # trained without privacy
    runs = train_audit_runs(data, np.arange(32), config, [1, 2, 3],
                            CanaryPlan(included=np.array([True, False, True]),
                                       input_canary=(np.zeros(data.shape, np.float32), 9)),
                            options=StepOptions(init=init))
    flat = torch.cat([v.reshape(-1) for v in init.values()])
    for r in range(3):  # every run starts from the public point, whatever its seed
        torch.testing.assert_close(runs.initial[r], flat)


def test_black_box_audit_from_pretrained_init_with_calibrated_threshold(tmp_path):
    opts = DPOptions(target="dpgd_logreg_digits", out=str(tmp_path), runs=40, calibration_runs=40, canary="blank",
                     threat="black-box", init="pretrained", quiet=True, device="cpu")
    _, outcome = run_dp(opts)
    assert outcome.audited.params["init"] == "pretrained" and "disjoint" in outcome.audited.params["pretrained_on"]
    game = outcome.game
    assert game.threshold_strategy == "fixed" and game.observation["calibration_runs"] == 40
    bounds = {b.method: b for b in outcome.lower_bounds}
    assert set(bounds) == {"clopper-pearson", "gdp", "gaussian-fit"}
    assert "40 separate calibration runs" in bounds["clopper-pearson"].details["choice"]
    assert bounds["clopper-pearson"].role == "verdict" and bounds["gdp"].role == "estimate"
    fit = bounds["gaussian-fit"].details
    assert fit["n_pos"] + fit["n_neg"] == 40 and 0 <= fit["shapiro_p_in"] <= 1
    assert float(bounds["clopper-pearson"].epsilon) <= outcome.epsilon_theory
    assert outcome.verdict.status == "consistent"
    # the report says how the runs started and who fixed the threshold
    audited = headline_sentences(outcome)[0]
    assert "pre-trained without privacy" in audited and "fixed on 40 separate calibration runs" in audited
    assert len(outcome.attacks["black-box/blank"].advantage_ci) == 2
    # the black box sees the final model only: the last-iterate reference, which for full-batch DP-GD is the
    # Gaussian mechanism of sqrt(T) / sigma, the claim's own epsilon
    reference = outcome.judged.last_iterate
    assert reference.sample_rate == 1.0 and reference.epsilon == pytest.approx(outcome.epsilon_theory, rel=1e-3)


def test_init_and_calibration_options_are_checked(tmp_path):
    with pytest.raises(UserError, match="initialisation"):
        run_dp(DPOptions(target="dpgd_logreg_digits", out=str(tmp_path), runs=8, canary="blank", threat="black-box",
                         init="zeros"))
    with pytest.raises(UserError, match="calibration-runs"):
        run_dp(DPOptions(target="dpgd_logreg_digits", out=str(tmp_path), runs=8, canary="dirac", threat="updates",
                         calibration_runs=8))
    with pytest.raises(UserError, match="DP-SGD targets, not to dperm_digits"):
        run_dp(DPOptions(target="dperm_digits", out=str(tmp_path), runs=8, init="pretrained"))
    with pytest.raises(UserError, match="0 or more"):
        run_dp(DPOptions(target="dpgd_logreg_digits", out=str(tmp_path), runs=8, calibration_runs=-1))
