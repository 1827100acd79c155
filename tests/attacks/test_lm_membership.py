"""Membership scores of a language model (attacks.lm_membership): each formula on hand-computed arrays, and
one-line errors (on a tiny fine-tuned GPT: tests/e2e/membership/test_tiny_gpt_membership.py)."""

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
