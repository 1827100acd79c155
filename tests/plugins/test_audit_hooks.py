"""The update-level hooks: no-ops outside an audit, the canary and observations inside one, the tutorial's
loop as the page shows it (Opacus instrumented and the loop audited end to end: tests/e2e/dp/test_opacus_hooks.py)."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch
from helpers import ROOT

from audit.errors import UserError
from targets import audit_hooks
from targets.audit_hooks import UpdateRecorder, add_canary, recording, report_update
from targets.datasets import load_digits

sys.path.insert(0, str(ROOT / "examples"))
import hooked_dpsgd  # noqa: E402  (the Opacus tutorial's loop)


def test_opacus_tutorial_shows_the_tested_loop():
    import inspect

    tutorial = (ROOT / "docs" / "tutorials" / "opacus.md").read_text()
    assert inspect.getsource(hooked_dpsgd.train).replace("  # noqa: E731", "") in tutorial


def test_hooks_do_nothing_outside_an_audit(monkeypatch):
    grad_sum = [torch.ones(3), torch.zeros(2, 2)]
    assert add_canary(grad_sum, clip_norm=1.0, sample_rate=0.5) is grad_sum
    assert report_update(grad_sum) is None
    assert torch.equal(grad_sum[0], torch.ones(3)) and torch.equal(grad_sum[1], torch.zeros(2, 2))
    digits = load_digits()
    with_hooks = hooked_dpsgd.train(digits.X[:300], digits.y[:300], 3)(digits.X[:20])
    monkeypatch.setattr(hooked_dpsgd, "add_canary", lambda g, **_: g)
    monkeypatch.setattr(hooked_dpsgd, "report_update", lambda n: None)
    np.testing.assert_array_equal(with_hooks, hooked_dpsgd.train(digits.X[:300], digits.y[:300], 3)(digits.X[:20]))


def test_recorder_adds_the_canary_and_reads_its_coordinate():
    rec = UpdateRecorder(4, [0, 3])
    with recording(rec):
        for _ in range(50):
            grad_sum = [np.zeros(3), np.zeros((2, 2))]
            add_canary(grad_sum, clip_norm=2.0, sample_rate=0.5)
            assert grad_sum[1][0, 1] == 2.0 * rec.joined[-1] and grad_sum[0].sum() == 0
            report_update([g + 1.0 for g in grad_sum])
    np.testing.assert_allclose(rec.observations, np.array(rec.joined) + 0.5)
    assert 10 < sum(rec.joined) < 40 and audit_hooks.active() is None
    with recording(UpdateRecorder(0, 0)), pytest.raises(UserError, match="without add_canary"):
        report_update(torch.zeros(2))


def test_probe_records_which_coordinates_the_data_reach():
    rec = UpdateRecorder(None, 0)
    with recording(rec):
        for value in (1.0, -2.0):
            add_canary(torch.tensor([0.0, value, 0.0]), clip_norm=1.0, sample_rate=1.0)
            report_update(torch.tensor([3.0, 4.0, 0.0]))
    np.testing.assert_array_equal(rec.touched, [0.0, 3.0, 0.0])
    assert rec.joined == [0, 0] and rec.observations == [5.0, 5.0]


opacus = pytest.importorskip("opacus")


def test_untested_opacus_version_is_one_line(monkeypatch):
    from targets.opacus_hooks import require_opacus

    monkeypatch.setattr(opacus, "__version__", "1.7.0")
    with pytest.raises(UserError, match=r"found 1.7.0: pip install 'opacus>=1.4,<1.7'"):
        require_opacus()
