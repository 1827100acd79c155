"""Which records a noisy step held (targets.audit_hooks.loader_indices): the batches whose per-sample gradients
reached the step, never a no-grad pass over a loader of the same size; examples from a dataset that is not the
records given are foreign (packed or split records). And what the accounting check makes of it: the records
finding, and checks that could not be read (never a pass)."""

from __future__ import annotations

import argparse

import numpy as np
import pytest
import torch

from audit.dp.plugins.config import config_verdict
from audit.plugins.accounting import (
    FIX_RECORDS,
    block_status,
    check_lines,
    rate_finding,
    records_finding,
    sampling_finding,
    unread_findings,
)
from audit.run_parser import gated_results
from audit.stats.outcome import ConfigCheck, Finding
from targets.audit_hooks import UpdateRecorder, add_canary, loader_indices, recording, report_update

N = 40


def _loader(n: int, batch: int = 8, seed: int = 0) -> torch.utils.data.DataLoader:
    data = torch.utils.data.TensorDataset(torch.randn(n, 1, 4), torch.randint(0, 3, (n,)))
    return torch.utils.data.DataLoader(data, batch_size=batch, shuffle=True,
                                       generator=torch.Generator().manual_seed(seed))


def _step(model: torch.nn.Module) -> None:
    """The noisy step of a hooked loop: the summed gradient, the hooks, no update (enough for the recorder)."""
    grads = [p.grad.detach().clone() for p in model.parameters()]
    add_canary(grads, clip_norm=1.0, sample_rate=0.2)
    report_update([g + torch.randn_like(g) for g in grads])
    model.zero_grad()


def _run(loop) -> UpdateRecorder:
    rec = UpdateRecorder(None, 0)
    with recording(rec), loader_indices(rec, N):
        loop()
    return rec


def test_a_step_holds_the_batches_its_gradients_came_from_and_no_no_grad_pass():
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(4, 3))
    train, validation = _loader(N), _loader(N, seed=1)

    def loop():
        with torch.no_grad():  # an evaluation over a loader of the training set's size, before training
            for xb, _ in validation:
                model(xb)
        for xb, yb in train:
            torch.nn.functional.cross_entropy(model(xb), yb).backward()
            _step(model)
            for vx, _ in validation:  # a validation loss: forward with autograd on, never a backward
                model(vx)
            for vx, _ in validation:  # and one under no_grad inside the loop
                with torch.no_grad():
                    model(vx)

    rec = _run(loop)
    assert rec.steps == len(train) and not rec.foreign
    assert [b.size for b in rec.batches] == [8] * 5  # the flatten (no parameters) passed the batch on
    assert np.array_equal(np.sort(np.concatenate(rec.batches)), np.arange(N))  # one epoch: each record once


def test_a_functional_loop_counts_what_it_yields_with_autograd_on():
    loader = _loader(N, batch=10)

    def loop():
        with torch.no_grad():
            for _ in loader:  # a no-grad pass with no module: never counted
                pass
        for xb, _ in loader:
            add_canary([xb.sum(0)], clip_norm=1.0, sample_rate=0.25)
            report_update([xb.sum(0) + 1.0])

    rec = _run(loop)
    assert [b.size for b in rec.batches] == [10] * 4
    assert np.array_equal(np.sort(np.concatenate(rec.batches)), np.arange(N))


def test_examples_of_another_dataset_are_not_the_records():
    model = torch.nn.Linear(4, 3)
    blocks = _loader(N + 7)  # e.g. the texts packed into N + 7 blocks

    def loop():
        for xb, yb in blocks:
            torch.nn.functional.cross_entropy(model(xb[:, 0]), yb).backward()
            _step(model)

    rec = _run(loop)
    assert rec.batches == [None] * rec.steps and rec.foreign[0] == (8, N + 7) and len(rec.foreign) == rec.steps
    found = records_finding([("the probe", rec, N)])
    assert found.violation and found.fix == FIX_RECORDS and f"{N + 7} items" in found.message
    clean = records_finding([("the probe", _run(lambda: None), N)])
    assert clean.check == "records" and not clean.problem and clean.read
    unseen = sampling_finding(rec, N, 0.01) + [rate_finding(rec, N, 0.2, 0.01)]
    assert all(f.read is False and not f.problem and "not the records" in f.message for f in unseen)


def _block(findings: list[Finding]) -> ConfigCheck:
    return ConfigCheck(findings=tuple(findings), status=block_status(findings), claimed_epsilon=2.0,
                       config={"epsilon": 1.9, "noise_multiplier": 1.0, "sample_rate": 0.1, "steps": 10})


def test_a_check_not_read_is_never_a_pass():
    ok = Finding.checked("epsilon", False, True, "as claimed")
    unread = Finding.checked("sampling", False, True, "Could not read: the records were not seen.", read=False)
    note_unread = Finding.checked("canary-ids", False, False, "Not checked: no canary tokens.", read=False)
    block = _block([ok, unread, note_unread])
    assert unread_findings(block) == [unread] and block.status == "could-not-read"
    lines = check_lines(block)
    assert lines == ["CONFIG NOT READ (sampling): Could not read: the records were not seen."]
    assert not any("as claimed" in line for line in lines)
    verdict = config_verdict(block)
    assert verdict.status == "could-not-read" and "sampling" in verdict.text
    assert check_lines(_block([ok, note_unread]))[0].startswith("config:    as claimed")
    violated = _block([Finding.checked("rate", True, True, "the rate is off", "sample at q"), unread])
    assert config_verdict(violated).status == "violation" and "Could not read" in config_verdict(violated).text


@pytest.mark.parametrize(("status", "gate", "code"), [("could-not-read", True, 2), ("could-not-read", False, 0),
                                                      ("violation", True, 1), ("consistent", True, 0)])
def test_exit_status_of_each_verdict(status, gate, code):
    outcome = argparse.Namespace(verdict=argparse.Namespace(status=status))
    assert gated_results(lambda _args: outcome)(argparse.Namespace(fail_above_claim=gate)) == code
