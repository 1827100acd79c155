"""The findings of the language-model training checks (audit/plugins/lm_checks.py) from what a watched
call recorded, without training: the coupling tolerance, the ghost-clipping case (no per-sample
gradients: not checked), and weights that did not move or moved outside the DP optimizer."""

from __future__ import annotations

import torch

from audit.plugins.lm_checks import COUPLING_TOL, Watch, _coupling_finding, _position_finding, _weight_findings


def _replay(*rows: list[float]) -> Watch:
    return Watch(replay=True, rows=[torch.tensor(r, dtype=torch.float64) for r in rows])


def test_a_gradient_that_scales_with_the_batch_is_coupling_and_float_noise_is_not():
    assert not _coupling_finding(_replay([1.0, 2.0], [1.0, 2.0], [1.0, 2.0 + COUPLING_TOL]))["problem"]
    coupled = _coupling_finding(_replay([1.0, 2.0], [0.5, 1.0], [1.0, 2.0]))
    assert coupled["violation"] and coupled["details"]["relative_change"][0] == 0.5


def test_without_per_sample_gradients_nothing_is_claimed():
    assert _coupling_finding(_replay([], [], []))["message"].startswith("Not checked")
    assert _coupling_finding(_replay([1.0]))["message"].startswith("Not checked")
    assert _position_finding(Watch())["message"].startswith("Not checked")
    assert not _position_finding(Watch(sampled=3))["problem"]


def test_a_mismatch_names_the_tensor_and_the_batch():
    found = _position_finding(Watch(mismatch={"transformer.wpe.weight": 1}, batch=8, sampled=1))
    assert found["violation"] and "transformer.wpe.weight" in found["message"] and found["details"]["batch"] == 8


def test_unmoved_tensors_are_a_note_and_tensors_moved_outside_dp_a_violation():
    module = torch.nn.Linear(2, 2)
    before = {name: p.detach().clone() for name, p in module.named_parameters()}
    watch = Watch(module=module, before=before, in_dp={"weight"})
    outside, frozen = _weight_findings(watch)
    assert not outside["problem"] and frozen["problem"] and not frozen["violation"]
    assert frozen["details"]["did_not_move"] == ["bias", "weight"]
    with torch.no_grad():
        module.weight.add_(1.0)
        module.bias.add_(1.0)
    outside, frozen = _weight_findings(watch)
    assert outside["violation"] and outside["details"]["moved_outside_dp"] == ["bias"] and not frozen["problem"]
