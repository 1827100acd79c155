"""The language-model code on the run's device (targets/lm/device.py): the device set for a run reaches the
base's pretraining, the fine-tuning (Opacus DP-SGD) and the scoring; the cache keeps a base per kind of device.
The CUDA tests run where a GPU is (the GPU check, benchmarks/gpu/run.sh) and skip elsewhere. Tiny settings:
16-token sequences, 8 texts, one epoch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("opacus")

from targets.lm.base import BaseSpec, base_key, pretrained_base  # noqa: E402
from targets.lm.device import lm_device, using_lm_device  # noqa: E402
from targets.lm.model import model_device, token_logprobs, token_moments  # noqa: E402
from targets.lm.training import FineTune, fine_tune  # noqa: E402

SPEC = BaseSpec(n_texts=8, epochs=1, batch_size=4, n_reserved=3, max_length=16)
TEXTS = ["To be, or not", "Is this a dagger", "Friends, Romans", "O Romeo", "All the world's a stage",
         "Now is the winter", "Out, damned spot", "Cry havoc"]
CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _fine_tuned(device: str, cache) -> tuple[torch.nn.Module, bool]:
    with using_lm_device(device):
        base, cached = pretrained_base(SPEC, cache)
        assert model_device(base).type == device
        tuned = fine_tune(base, SPEC.tokenizer, TEXTS, FineTune(epochs=1, noise_multiplier=1.0, sample_rate=0.5,
                                                                 batch_size=4, seed=1))
    return tuned, cached


def test_the_device_is_the_runs_and_restored_after_it():
    assert lm_device() == torch.device("cpu")
    with using_lm_device("cpu") as device:
        assert lm_device() is device
    assert lm_device() == torch.device("cpu")
    assert base_key(SPEC, "cpu") != base_key(SPEC, "cuda")  # a CUDA base is not read back on the CPU


def test_cpu_run_trains_and_scores_on_the_cpu(tmp_path):
    tuned, cached = _fine_tuned("cpu", tmp_path)
    assert model_device(tuned).type == "cpu" and not cached
    logp = token_logprobs(tuned, SPEC.tokenizer, TEXTS[:2])
    assert all(isinstance(a, np.ndarray) and np.all(np.isfinite(a)) for a in logp)


@CUDA
def test_cuda_run_pretrains_fine_tunes_and_scores_on_the_gpu(tmp_path):
    tuned, cached = _fine_tuned("cuda", tmp_path)
    assert model_device(tuned).type == "cuda" and not cached
    logp = token_logprobs(tuned, SPEC.tokenizer, TEXTS)
    moments = token_moments(tuned, SPEC.tokenizer, TEXTS[:2])
    assert [len(a) for a in logp] == [len(SPEC.tokenizer.encode(t)) - 1 for t in TEXTS]
    assert all(np.all(np.isfinite(a)) for a in logp) and moments[0].shape[1] == 2
    _, again = _fine_tuned("cuda", tmp_path)
    assert again  # the CUDA base came from the cache
    with using_lm_device("cpu"):
        _, on_cpu = pretrained_base(SPEC, tmp_path)
    assert not on_cpu  # the CPU pretrains its own


@CUDA
def test_builtin_lm_plugin_trains_on_cuda_under_the_audits_instrumentation(tmp_path, monkeypatch):
    from targets.audit_hooks import UpdateRecorder
    from targets.lm.plugins import CACHE_ENV, lm_trainer
    from targets.lm.recipes import lm_recipe
    from targets.opacus_hooks import instrument_opacus

    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    made = lm_trainer(lm_recipe("dpsgd_tinygpt"), members=12, base=SPEC,
                      finetune=FineTune(epochs=1, noise_multiplier=1.0, sample_rate=0.25, seed=0))
    recorder = UpdateRecorder(None, 0)
    with using_lm_device("cuda"), instrument_opacus(recorder):
        logprobs = made["train"](made["texts"], 0)
    assert recorder.steps == 4 and recorder.noise is not None  # every DP step seen, its noise read off the GPU
    assert all(np.all(np.isfinite(a)) for a in logprobs(made["texts"][:3]))
