"""The update-level hooks end to end: Opacus instrumented without changing its code, and the Opacus tutorial's
hand-written loop audited (the hooks themselves: tests/plugins/test_audit_hooks.py)."""

from __future__ import annotations

import sys
import warnings

import cloudpickle
import pytest
import torch
from helpers import ROOT

from audit.testing import assert_private
from targets import audit_hooks
from targets.audit_hooks import UpdateRecorder
from targets.datasets import load_digits

sys.path.insert(0, str(ROOT / "examples"))
import hooked_dpsgd  # noqa: E402  (the Opacus tutorial's loop)

opacus = pytest.importorskip("opacus")


def _opacus_train(X, y, seed, *, noise=0.0, epochs=2, physical=None, target_epsilon=None):
    from opacus.utils.batch_memory_manager import BatchMemoryManager

    torch.manual_seed(seed)
    model = torch.nn.Linear(64, 10)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.as_tensor(X), torch.as_tensor(y)),
                                         batch_size=len(X) // 2)
    engine = opacus.PrivacyEngine(accountant="rdp")
    kwargs = dict(module=model, optimizer=torch.optim.SGD(model.parameters(), lr=1.0), data_loader=loader,
                  max_grad_norm=1.0)
    model, optimizer, loader = (engine.make_private(noise_multiplier=noise, **kwargs) if target_epsilon is None else
                                engine.make_private_with_epsilon(target_epsilon=target_epsilon, target_delta=1e-5,
                                                                 epochs=epochs, **kwargs))
    for _ in range(epochs):
        with BatchMemoryManager(data_loader=loader, max_physical_batch_size=physical or len(X),
                                optimizer=optimizer) as batches:
            for xb, yb in batches:
                optimizer.zero_grad()
                torch.nn.functional.cross_entropy(model(xb), yb).backward()
                optimizer.step()
    return engine


@pytest.mark.parametrize("physical", [None, 7])
def test_opacus_steps_are_observed_without_changing_its_code(physical):
    """Noise 0 on a dead coordinate (digits' pixel 0 is always 0): every observation is exactly the
    number of canary copies; BatchMemoryManager's virtual steps are not steps."""
    from opacus.optimizers import DPOptimizer

    from targets.opacus_hooks import instrument_opacus

    digits = load_digits()
    original = DPOptimizer.add_noise
    rec = UpdateRecorder(0, [5, 3])
    with warnings.catch_warnings(), instrument_opacus(rec):
        warnings.simplefilter("ignore")
        _opacus_train(digits.X[:100], digits.y[:100], 0, physical=physical, epochs=3)
    assert DPOptimizer.add_noise is original
    assert rec.steps == 6 and rec.observations == [float(j) for j in rec.joined] and rec.source.sample_rate == 0.5
    assert rec.initial[0] - rec.final[0] == pytest.approx(sum(rec.joined) / 50, abs=1e-6)


def test_make_private_with_epsilon_is_instrumented_and_patches_are_undone_on_error():
    from opacus import PrivacyEngine
    from opacus.optimizers import DPOptimizer

    from targets.opacus_hooks import instrument_opacus

    digits = load_digits()
    rec = UpdateRecorder(0, 0)
    with warnings.catch_warnings(), instrument_opacus(rec):
        warnings.simplefilter("ignore")
        engine = _opacus_train(digits.X[:100], digits.y[:100], 0, target_epsilon=4.0, epochs=1)
    assert rec.steps == 2 and rec.engines == [engine] and rec.source.noise_multiplier > 0
    with pytest.raises(RuntimeError), instrument_opacus(UpdateRecorder(0, 0)):
        raise RuntimeError("user code failed")
    assert "make_private" in PrivacyEngine.__dict__ and DPOptimizer.add_noise.__module__.startswith("opacus")
    assert audit_hooks.active() is None


def test_readme_loop_passes_and_a_broken_copy_fails_with_bound_claim_and_run_dir(tmp_path, monkeypatch):
    """The hooked loop (claim (2, 1e-5) with its DP-SGD accounting) passes 60 update-level runs; the
    same loop with a tenth of the noise (sigma 0.239: its true epsilon is far above 2 — about 80 by
    the PLD accountant) is caught by the grid's tests of the claim's tradeoff curve."""
    results = assert_private("hooked_dpsgd:trainer", attack="updates/dirac", runs=60, out=tmp_path)
    assert results.verdict.status == "consistent" and results.game.threat == "updates"
    assert results.audited.params["code"]["steps"] == 4 and results.game.observation["coordinate"] == 0
    plugin = hooked_dpsgd.trainer()
    monkeypatch.setattr(hooked_dpsgd, "SIGMA", 0.239)
    # the audit runs in a child process, which imports modules afresh: the patched module is sent by value
    cloudpickle.register_pickle_by_value(hooked_dpsgd)
    try:
        with pytest.raises(AssertionError) as err:
            assert_private(plugin, attack="updates/dirac", runs=60, out=tmp_path)
    finally:
        cloudpickle.unregister_pickle_by_value(hooked_dpsgd)
    message = str(err.value)
    assert "lower bound" in message and "claimed epsilon 1.995" in message and str(tmp_path) in message
