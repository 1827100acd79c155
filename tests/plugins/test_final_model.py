"""The final-model check (audit/plugins/final_model.py, targets/final_params.py): the model a training returns
against its DP iterates, on small torch trainings with a plain optimizer standing for the DP one."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from audit.plugins.final_model import MIN_TOLERANCE, explained, final_model_check, tolerance
from targets.final_params import IterateSketch, normalised_name, returned_parameters

pytestmark = pytest.mark.usefixtures("one_thread")

STEPS = 12


def _training(steps: int = STEPS, width: int = 64, seed: int = 0, budget: int | None = None):
    """A linear model trained ``steps`` steps of SGD with the sketch attached (the optimizer standing for
    Opacus's ``original_optimizer``); returns (model, sketch, the parameters after each step)."""
    torch.manual_seed(seed)
    model = torch.nn.Linear(width, 10)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    sketch = IterateSketch(steps, seed=7, **({"budget": budget} if budget else {}))
    sketch.attach(model, opt)
    X, y = torch.randn(200, width), torch.randint(0, 10, (200,))
    iterates = [copy.deepcopy(model)]
    for t in range(steps):
        batch = slice(10 * t, 10 * t + 10)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(X[batch]), y[batch]).backward()
        opt.step()
        iterates.append(copy.deepcopy(model))
    sketch.detach()
    return model, sketch, iterates, (X, y)


def _predict(module):
    return lambda Z: torch.softmax(module(torch.as_tensor(Z, dtype=torch.float32)), 1).detach().numpy()


def test_the_last_iterate_passes():
    model, sketch, _, _ = _training()
    found = final_model_check(sketch, _predict(model), "opacus")
    assert not found.problem and found.details["read"]
    assert found.details["steps"] == STEPS and found.details["relative_gap_to_last"] == 0.0
    assert sketch.projection is not None and sketch.projection.shape == (STEPS + 17, 650)  # sketched, not identity


@pytest.mark.parametrize("decay", [0.5, 0.9, 0.99])
def test_an_ema_of_the_iterates_in_float32_passes(decay):
    model, sketch, iterates, _ = _training()
    ema = copy.deepcopy(iterates[0]).requires_grad_(False)
    with torch.no_grad():
        for it in iterates[1:]:
            for a, p in zip(ema.parameters(), it.parameters(), strict=True):
                a.mul_(decay).add_(p, alpha=1 - decay)
    found = final_model_check(sketch, _predict(ema), "opacus")
    assert not found.problem and found.details["read"], found.message
    assert found.details["relative_residual"] <= found.details["tolerance"]
    assert found.details["weights_sum"] == pytest.approx(1.0, abs=1e-4)


def test_a_tail_average_passes():
    model, sketch, iterates, _ = _training()
    avg = copy.deepcopy(model).requires_grad_(False)
    with torch.no_grad():
        for name, p in avg.named_parameters():
            p.copy_(torch.stack([dict(it.named_parameters())[name] for it in iterates[6:]]).mean(0))
    found = final_model_check(sketch, _predict(avg), "opacus")
    assert not found.problem and found.details["read"], found.message


def test_a_plain_pass_after_the_dp_steps_is_a_violation():
    model, sketch, _, (X, y) = _training()
    plain = torch.optim.SGD(model.parameters(), lr=0.5)  # a second optimizer: no hook, no noise
    plain.zero_grad()
    torch.nn.functional.cross_entropy(model(X[-20:]), y[-20:]).backward()
    plain.step()
    found = final_model_check(sketch, _predict(model), "opacus")
    assert found.problem and found.fix and "changed outside DP-SGD" in found.message
    assert found.details["relative_residual"] > 100 * found.details["tolerance"]


def test_a_raw_step_of_the_wrapped_optimizer_is_not_an_iterate():
    """``original_optimizer.step()`` called by the loop on a raw gradient (no noisy step since the last iterate) is
    counted, not kept as an iterate: the model it moved fails, naming it (issue 50: it passed as a DP iterate)."""
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 10)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    noisy = [0]  # the recorder's count of noisy steps
    sketch = IterateSketch(STEPS, seed=7)
    sketch.attach(model, opt, lambda: noisy[0])
    X, y = torch.randn(200, 64), torch.randint(0, 10, (200,))
    for t in range(STEPS + 1):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(X[10 * t:10 * t + 10]), y[10 * t:10 * t + 10]).backward()
        noisy[0] += t < STEPS  # the last step: the wrapped optimizer called directly, no noisy step
        opt.step()
    sketch.detach()
    assert sketch.steps == STEPS and sketch.raw_steps == 1
    found = final_model_check(sketch, _predict(model), "opacus")
    assert found.problem and found.details["raw_steps"] == 1 and "original_optimizer.step()" in found.message


def test_a_change_on_one_coordinate_is_seen_through_the_sketch():
    model, sketch, _, _ = _training()
    with torch.no_grad():
        model.bias[3] += 1e-2 * float(model.weight.abs().max())
    found = final_model_check(sketch, _predict(model), "opacus")
    assert found.problem, found.details


def test_iterates_that_span_every_direction_are_not_read():
    model, sketch, _, (X, y) = _training(width=1)  # 20 parameters, 12 steps: the identity, 13 of 20 directions
    assert sketch.projection is None
    small, small_sketch, _, _ = _training(steps=30, width=1)  # 31 iterates in 20 dimensions
    with torch.no_grad():
        small.bias += 1.0
    found = final_model_check(small_sketch, _predict(small), "opacus")
    assert not found.problem and not found.details["read"] and "span every direction" in found.message
    with torch.no_grad():
        model.bias += 1.0
    assert final_model_check(sketch, _predict(model), "opacus").problem  # 13 iterates of 20 dimensions: checked


def test_what_cannot_be_read_is_said_not_passed():
    model, sketch, _, _ = _training()
    hooked = final_model_check(None, _predict(model), "hooks")
    numpy_model = final_model_check(sketch, lambda Z: np.ones((len(Z), 10)) / 10, "opacus")
    other = final_model_check(sketch, _predict(torch.nn.Linear(3, 10)), "opacus")
    over = _training(budget=100)[1]
    for found in (hooked, numpy_model, other, final_model_check(over, _predict(model), "opacus")):
        assert not found.problem and found.details["read"] is False and found.message.startswith("Could not read")
    assert "hooked loop" in hooked.message and "above" in over.unreadable


class _Predictor:
    def __init__(self, net):
        self.net = net

    def predict_proba(self, Z):
        return _predict(self.net)(Z)


def test_the_returned_model_is_found_where_users_keep_it():
    model, sketch, _, _ = _training()
    wrapped = torch.optim.swa_utils.AveragedModel(model)  # names under "module."
    decorated = torch.no_grad()(lambda Z: model(Z))
    for trained in (_predict(model), _Predictor(model).predict_proba, decorated, _predict(wrapped),
                    lambda Z, w=model.weight, b=model.bias: Z @ w.T + b):
        theta, how = returned_parameters(trained, sketch.names, sketch.shapes)
        assert theta is not None, how
        np.testing.assert_array_equal(theta, sketch.last)
    assert normalised_name("_module.module.encoder.weight") == "encoder.weight"


def test_explained_is_the_distance_to_the_span():
    rng = np.random.default_rng(0)
    basis = rng.normal(size=(40, 6))
    inside = basis @ rng.normal(size=6)
    outside = rng.normal(size=40)
    assert explained(basis, inside, tolerance(5))["relative_residual"] < 1e-12
    q, _ = np.linalg.qr(basis)
    distance = np.linalg.norm(outside - q @ (q.T @ outside))
    scale = max(np.linalg.norm(outside), np.linalg.norm(basis, axis=0).max())
    assert explained(basis, outside, tolerance(5))["relative_residual"] == pytest.approx(distance / scale, rel=1e-9)
    assert tolerance(0) == MIN_TOLERANCE and tolerance(10 ** 6) > MIN_TOLERANCE
    assert tolerance(20, float(torch.finfo(torch.bfloat16).eps)) > 100 * tolerance(20)  # half precision rounds more


def test_lora_adapters_merged_into_the_returned_weights_are_told_apart_from_a_mismatch() -> None:
    """merge_and_unload: the DP optimizer trained only adapters and the returned model holds none of them (not
    applicable, said so); a returned model that still holds adapters, or optimizer names that are not adapters,
    is no merge (the check stays could-not-read)."""
    from targets.final_params import merged_adapters

    merged = torch.nn.Linear(3, 2)
    adapters = ["layer.lora_A.default.weight", "layer.lora_B.default.weight"]
    assert merged_adapters(lambda z: merged(z), adapters)
    assert not merged_adapters(lambda z: merged(z), ["weight", "bias"])
    unmerged = torch.nn.Module()
    unmerged.lora_A = torch.nn.ModuleDict({"default": torch.nn.Linear(3, 1, bias=False)})
    assert not merged_adapters(unmerged, adapters)
    assert not merged_adapters(lambda z: z, adapters)  # no module at all: nothing merged to read
