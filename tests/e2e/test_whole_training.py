"""The whole training, not only the DP steps (issue 39, item 3): a non-private pass after DP-SGD fails both
``--check-config`` and ``--one-run`` through the final-model check (audit/plugins/final_model.py), and an EMA
of the DP iterates (post-processing) passes both. The zoo's Opacus loops (examples/zoo/opacus_loops.py):
softmax regression on 295 digits, 20 steps; each audit is a few seconds of training in-process."""

from __future__ import annotations

import json

import pytest

from audit.cli import main

pytest.importorskip("opacus")

MODES = {"check-config": ["--check-config"], "one-run": ["--one-run"]}


def _audit(target: str, mode: str, out) -> tuple[int, dict]:
    code = main(["run", "dp", "--target", f"examples.zoo.opacus_loops:{target}", *MODES[mode], "--fail-above-claim",
                 "-q", "--out", str(out)])
    (path,) = out.glob("*/results.json")
    return code, json.loads(path.read_text())


def _final(results: dict) -> dict:
    (found,) = [f for f in results["config_check"]["findings"] if f["check"] == "final-model"]
    return found


@pytest.mark.parametrize("mode", MODES)
def test_a_polish_epoch_after_dp_fails(mode, tmp_path):
    code, results = _audit("polish", mode, tmp_path)
    assert code == 1, results["verdict"]["text"]
    found = _final(results)
    assert found["violation"] and found["details"]["read"] and found["fix"]
    assert results["verdict"]["text"].startswith("accounting check violation, final-model:")


@pytest.mark.parametrize("mode", MODES)
def test_an_ema_of_the_dp_iterates_passes(mode, tmp_path):
    code, results = _audit("ema", mode, tmp_path)
    assert code == 0, results["verdict"]["text"]
    found = _final(results)
    assert not found["problem"] and found["details"]["read"]
    assert found["details"]["weights_sum"] == pytest.approx(1.0, abs=1e-4)


@pytest.mark.parametrize("target", ["warmup_sliced", "warmup_loader"])
def test_a_warmup_before_make_private_fails_the_one_run(target, tmp_path):
    """A non-private epoch before ``make_private`` leaves the DP steps and the model returned consistent; the
    input canaries that took part in it decide (590 rows of 256 features: 236 record canaries)."""
    code, results = _audit(target, "one-run", tmp_path)
    assert code == 1, results["verdict"]["text"]
    summary = results["game"]["input_canaries"]
    assert summary["claim_rejected"] and summary["epsilon_lower_bound"] > 2.0, summary
    if target == "warmup_sliced":  # the accounting check sees nothing of it: the input canaries decide
        assert results["config_check"]["status"] == "ok"
        assert results["verdict"]["source"] == "input_canaries"


def test_the_warmup_twin_passes_the_one_run(tmp_path):
    code, results = _audit("warmup_sliced_twin", "one-run", tmp_path)
    assert code == 0, results["verdict"]["text"]
    assert results["game"]["input_canaries"]["verdict"] != "violation"
