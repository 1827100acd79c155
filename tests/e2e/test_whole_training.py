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
