"""The training thread policy (targets.threads): usable CPUs, the thread count a training takes and restores,
a bad setting refused (bit-identical training with any thread count: tests/e2e/test_executors.py)."""

from __future__ import annotations

import pytest
import torch

from audit.errors import UserError
from targets.threads import TRAINING_THREADS_ENV, TrainingThreads, busy_cpus, training_threads, usable_cpus


def test_thread_policy(monkeypatch):
    monkeypatch.delenv(TRAINING_THREADS_ENV, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert usable_cpus() == 1 and training_threads() == 1
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert 1 <= training_threads() <= usable_cpus() and busy_cpus() >= 0
    monkeypatch.setenv(TRAINING_THREADS_ENV, "3")
    before = torch.get_num_threads()
    with TrainingThreads() as policy:
        assert torch.get_num_threads() == 3
        policy.tick()
    assert torch.get_num_threads() == before and policy.history == [3]
    monkeypatch.setenv(TRAINING_THREADS_ENV, "0")
    with pytest.raises(UserError, match=TRAINING_THREADS_ENV):
        training_threads()
