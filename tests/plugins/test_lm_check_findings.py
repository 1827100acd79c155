"""The findings of the language-model training checks (audit/plugins/lm_checks.py) from what a watched
call recorded, without training: the coupling tolerance, the ghost-clipping case (no per-sample
gradients: could not read), the replay under BatchMemoryManager, and weights that did not move or moved
outside the DP optimizer."""

from __future__ import annotations

import pytest
import torch

from audit.plugins.lm_checks import (
    COUPLING_TOL,
    Watch,
    _coupling_finding,
    _position_finding,
    _replay_step,
    _Stop,
    _weight_findings,
)


def _replay(*rows: list[float]) -> Watch:
    return Watch(replay=True, rows=[torch.tensor(r, dtype=torch.float64) for r in rows])


def test_a_gradient_that_scales_with_the_batch_is_coupling_and_float_noise_is_not():
    assert not _coupling_finding(_replay([1.0, 2.0], [1.0, 2.0], [1.0, 2.0 + COUPLING_TOL])).problem
    coupled = _coupling_finding(_replay([1.0, 2.0], [0.5, 1.0], [1.0, 2.0]))
    assert coupled.violation and coupled.details["relative_change"][0] == 0.5


class _Optimizer:
    """What the replay reads of a DP optimizer: its parameters' per-sample gradients, and zero_grad."""

    def __init__(self) -> None:
        self.params = [torch.nn.Parameter(torch.zeros(2))]

    def feed(self, records: list[int]) -> None:
        self.params[0].grad_sample = torch.tensor([[float(r), 1.0] for r in records])

    def zero_grad(self, set_to_none: bool) -> None:
        self.params[0].grad_sample = None


def test_the_replay_compares_only_the_batches_it_chose_however_they_are_split():
    """BatchMemoryManager splits the replay's batches [0], [0..7], [0, 8..14] into physical batches of 4: the rows
    compared are those of the steps led by the first record (alone, then with partners), never record 4's."""
    watch, optimizer = Watch(replay=True), _Optimizer()
    with pytest.raises(_Stop):
        for physical in ([0], [0, 1, 2, 3], [4, 5, 6, 7], [0, 8, 9, 10], [11, 12, 13, 14]):
            watch.fetched = list(physical)
            optimizer.feed(physical)
            _replay_step(watch, optimizer)
    assert watch.held == [[0], [0, 1, 2, 3], [0, 8, 9, 10]]
    assert not _coupling_finding(watch).problem and _coupling_finding(watch).read
    unfed = Watch(replay=True)  # a loop that iterates its own loader: the replay's batches never reach a step
    for physical in ([5, 2], [0, 3]):
        unfed.fetched = []
        optimizer.feed(physical)
        _replay_step(unfed, optimizer)
    assert _coupling_finding(unfed).read is False


def test_without_per_sample_gradients_nothing_is_claimed():
    """A check that could not read what it compares says so and is could-not-read, never a pass."""
    for found in (_coupling_finding(_replay([], [], [])), _coupling_finding(_replay([1.0])),
                  _position_finding(Watch())):
        assert found.message.startswith("Could not read") and found.read is False and not found.problem
    assert "reached 1 of the 3 steps" in _coupling_finding(_replay([1.0])).message
    assert not _position_finding(Watch(sampled=3)).problem and _position_finding(Watch(sampled=3)).read


def test_a_mismatch_names_the_tensor_and_the_batch():
    found = _position_finding(Watch(mismatch={"transformer.wpe.weight": 1}, batch=8, sampled=1))
    assert found.violation and "transformer.wpe.weight" in found.message and found.details["batch"] == 8


def test_unmoved_tensors_are_a_note_and_tensors_moved_outside_dp_a_violation():
    module = torch.nn.Linear(2, 2)
    before = {name: p.detach().clone() for name, p in module.named_parameters()}
    watch = Watch(module=module, before=before, in_dp={"weight"})
    outside, frozen = _weight_findings(watch)
    assert not outside.problem and frozen.problem and not frozen.violation
    assert frozen.details["did_not_move"] == ["bias", "weight"]
    with torch.no_grad():
        module.weight.add_(1.0)
        module.bias.add_(1.0)
    outside, frozen = _weight_findings(watch)
    assert outside.violation and outside.details["moved_outside_dp"] == ["bias"] and not frozen.problem
