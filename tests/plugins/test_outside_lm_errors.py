"""Mistakes an outside user makes in the LM plugin dicts (tests/fixtures/outside_lm.py, written from the user
docs alone): each is one line naming the field and what to give (exit status 2 on the command line; log-probabilities
of the wrong shape, which take a training: tests/e2e/test_outside_lm_shape.py)."""

from __future__ import annotations

import pytest

from audit.errors import UserError
from targets.plugins.loading import plugin_from_dict

outside = pytest.importorskip("tests.fixtures.outside_lm")


@pytest.mark.parametrize(("factory", "says"), [
    ("missing_train", "field 'train' must be a function train(texts, seed) -> logprobs"),
    ("texts_bytes", "field 'texts' must hold non-empty str; item 0 is b'"),
    ("empty_text", "field 'texts' must hold non-empty str; item 60 is ''"),
    ("claim_typo", "unknown key 'claims'; did you mean 'claim'?"),
    ("wrong_claim_type", "field 'claim' must be a dict"),
])
def test_lm_trainer_mistakes_are_one_line(factory, says, monkeypatch):
    monkeypatch.setattr(outside, "N", 60)
    with pytest.raises(UserError) as info:
        plugin_from_dict(f"outside:{factory}", getattr(outside, factory)())
    assert says in str(info.value) and "\n" not in str(info.value)
