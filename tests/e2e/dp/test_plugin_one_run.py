"""The one-run audit of a user's DP-SGD code (``run dp --target module:factory --one-run``,
audit.dp.plugins.one_run; ``assert_private(..., one_run=True)``) on small hooked loops: softmax regression
(200 parameters) on 1,200 rows — more than the many-run games' 1,000-row cap, so the whole-dataset
training is visible — and the tutorial-style Opacus CNN of examples/ at its CI size (500 rows, 1 epoch).
Each audit is 5 trainings of a few seconds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hooked_softmax import CLASSES, EPOCHS, EPS, FEATURES, STEPS, N, hooked_plugin

from audit.cli import main
from audit.plugins.training import MAX_TRAIN
from audit.testing import assert_private

MODULE = Path(__file__).stem


def correct() -> dict:
    return hooked_plugin("one_run_correct")


def _results(out: Path) -> dict:
    (path,) = out.glob("*/results.json")
    return json.loads(path.read_text())


def test_one_run_of_a_hooked_loop_trains_once_on_the_whole_dataset(tmp_path, capsys):
    code = main(["run", "dp", "--target", f"{MODULE}:correct", "--one-run", "--quick", "-q", "--fail-above-claim",
                 "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.splitlines()[0].startswith("config:    as claimed")  # the accounting check is printed first
    res = _results(tmp_path)
    game = res["game"]
    assert game["one_run"] and game["trainings"] == 6 and game["n_train"] == N > MAX_TRAIN
    assert game["canary_kind"] == "dirac" and game["canaries"] == FEATURES * CLASSES  # capped by the parameters
    assert game["observation"]["steps_audited_run"] == STEPS
    assert res["config_check"]["status"] == "ok" and res["verdict"]["status"] == "consistent"
    one = res["one_run"]
    assert 0 <= one["correct"] <= one["k_pos"] + one["k_neg"] and one["canaries"] == game["canaries"]
    assert res["best_lower_bound"]["epsilon"] <= EPS
    assert {row["mistake"].split(" (")[0] for row in res["threat_coverage"]} >= {"no per-example clipping"}
    assert any(t["title"].startswith("What each part") for t in res["tables"])


def test_more_canaries_than_the_model_holds_is_one_line_exit_2(tmp_path, capsys):
    code = main(["run", "dp", "--target", f"{MODULE}:correct", "--one-run", "--canaries", "1000000", "-q",
                 "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--canaries 1000000 is more than" in err[0]
    assert not list(tmp_path.glob("*/results.json"))


def test_white_box_of_a_hooked_loop_is_one_line_exit_2(tmp_path, capsys):
    code = main(["run", "dp", "--target", f"{MODULE}:correct", "--one-run", "--threat", "white-box", "-q",
                 "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "hooked loop" in err[0] and "--threat updates" in err[0]


def test_assert_private_one_run_passes_a_correct_loop(tmp_path):
    outcome = assert_private(hooked_plugin("one_run_correct"), one_run=True, out=tmp_path)
    assert outcome.game.trainings == 6 and outcome.verdict.status == "consistent"


def test_assert_private_one_run_flags_a_loop_that_trains_three_times_the_epochs(tmp_path):
    found = r"accounting check found the code less private than claimed \((noise-level|epsilon)"
    with pytest.raises(AssertionError, match=found):
        assert_private(hooked_plugin("one_run_three_epochs", epochs=3 * EPOCHS), one_run=True, out=tmp_path)
    assert _results(tmp_path)["config_check"]["config"]["steps"] == 3 * STEPS


def test_opacus_tutorial_cnn_one_run_at_ci_size(tmp_path, capsys):
    pytest.importorskip("opacus")
    code = main(["run", "dp", "--target", "examples.opacus_tutorial_cnn:small_trainer", "--one-run", "--quick",
                 "-q", "--fail-above-claim", "--out", str(tmp_path)])
    assert code == 0, capsys.readouterr()
    res = _results(tmp_path)
    assert res["game"]["trainings"] == 6 and res["game"]["n_train"] == 500
    assert res["model"]["parameters"] > 20_000 and res["params"]["code"]["driver"] == "opacus"
    assert res["config_check"]["status"] == "ok"
