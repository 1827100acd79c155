"""An outside user's LM plugin (tests/fixtures/outside_lm.py, written from the user docs alone) whose trained model
returns log-probabilities of the wrong shape: one line naming what to return, found after a training (the plugin
dicts' other mistakes: tests/plugins/test_outside_lm_errors.py)."""

from __future__ import annotations

import pytest

from audit.errors import UserError
from targets.lm.contract import lm_from_dict

outside = pytest.importorskip("tests.fixtures.outside_lm")


def test_logprobs_of_the_wrong_shape_are_one_line(monkeypatch):
    monkeypatch.setattr(outside, "N", 40)
    with pytest.raises(UserError, match=r"returned shape \(\d+, 1\) for text 0; return one 1-D array") as info:
        lm_from_dict("outside:bad_shape_lm", outside.bad_shape_lm())
    assert "\n" not in str(info.value)
