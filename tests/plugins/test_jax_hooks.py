"""The JAX hooks (targets/jax_hooks.py): functional, eager or inside targets.jax_hooks.jit, feeding the same
recorder as the torch hooks; nothing traced into the step outside an audit; a plain jax.jit refused."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

from audit.errors import TargetCodeError, UserError  # noqa: E402
from targets import jax_hooks  # noqa: E402
from targets.audit_hooks import CanaryRecorder, UpdateRecorder, recording  # noqa: E402

C, SIGMA = 2.0, 0.5


def _step(params: dict, key, batch):
    """A DP-SGD-shaped step on a two-leaf pytree: the clipped sum is fixed, the noise drawn from ``key``."""
    grads = {"b": jnp.ones(3), "w": jnp.full((2, 2), 0.5)}
    grads = jax_hooks.add_canary(grads, clip_norm=C, sample_rate=1.0, batch=batch, params=params)
    keys = jax.random.split(key, 2)
    noisy = {name: g + SIGMA * C * jax.random.normal(k, g.shape)
             for (name, g), k in zip(sorted(grads.items()), keys, strict=True)}
    new = jax.tree.map(lambda p, g: p - 0.1 * g, params, noisy)
    jax_hooks.report_update(noisy, params=new)
    return new


JITTED = jax_hooks.jit(_step)
PARAMS = {"b": jnp.zeros(3), "w": jnp.zeros((2, 2))}


def _train(step, steps: int = 3, batch=None) -> dict:
    params, key = PARAMS, jax.random.key(1)
    for _ in range(steps):
        key, sub = jax.random.split(key)
        params = step(params, sub, jnp.array([0, 2, -1, -1]) if batch is None else batch)
    return params


def test_outside_an_audit_the_hooks_return_their_argument_and_trace_nothing(monkeypatch):
    grads = {"w": jnp.ones(2)}
    assert jax_hooks.add_canary(grads, clip_norm=1.0, sample_rate=0.1) is grads
    assert jax_hooks.report_update(grads) is grads

    def no_callback(*args, **kwargs):
        raise AssertionError("a callback was traced into the step outside an audit")

    monkeypatch.setattr(jax_hooks, "io_callback", no_callback)
    jitted = jax_hooks.jit(_step)
    eager = _train(_step)
    np.testing.assert_allclose(np.asarray(_train(jitted)["w"]), np.asarray(eager["w"]), rtol=1e-6)


def test_a_plain_jax_jit_around_the_hooks_is_one_line():
    with pytest.raises(UserError, match="targets.jax_hooks.jit"):
        jax.jit(_step)(PARAMS, jax.random.key(0), jnp.array([0]))


@pytest.mark.parametrize("step", [_step, JITTED], ids=["eager", "jit"])
def test_the_canary_joins_the_sum_and_the_recorder_reads_it(step):
    coordinate = 4  # leaves in tree order: b (3 coordinates), then w: the second coordinate of w
    recorder = UpdateRecorder(coordinate, 0, include=True)
    with recording(recorder):
        _train(step)
    assert recorder.steps == 3 and recorder.joined == [1, 1, 1]
    assert recorder.source.kind == "jax" and recorder.source.sample_rate == 1.0 and recorder.clip_norm == C
    assert recorder.sizes == (3, 4)
    # the observation is (data sum + canary + noise) / C on the coordinate: 0.5 / C + 1 + noise / C
    obs = np.asarray(recorder.observations)
    assert np.all(np.abs(obs - (0.5 / C + 1.0)) < 6 * SIGMA)
    assert [b.tolist() for b in recorder.batches] == [[0, 2]] * 3  # the -1 padding dropped
    assert recorder.initial.tolist() == [0.0] * 7 and recorder.final.shape == (7,)


def test_a_probe_reads_the_same_noisy_sums_with_and_without_jit():
    probe_eager, probe_jit = UpdateRecorder(None, 0), UpdateRecorder(None, 0)
    with recording(probe_eager):
        _train(_step)
    with recording(probe_jit):
        _train(JITTED)
    np.testing.assert_allclose(probe_jit.observations, probe_eager.observations, rtol=1e-5)
    assert probe_jit.noise is not None
    assert probe_jit.touched.tolist() == [3.0] * 3 + [1.5] * 4  # |data sum| summed over the 3 steps
    assert [b.tolist() for b in probe_jit.batches] == [[0, 2]] * 3


def test_a_boolean_mask_is_the_batch():
    recorder = UpdateRecorder(None, 0)
    with recording(recorder):
        _train(JITTED, steps=1, batch=jnp.array([True, False, True, True]))
    assert recorder.batches[0].tolist() == [0, 2, 3]


def test_many_canaries_go_through_the_callback():
    recorder = CanaryRecorder(np.array([True, False, True]), 0, coordinates=np.array([0, 3, 6]))
    with recording(recorder):
        _train(JITTED)
    assert recorder.joined == [2, 2, 2] and recorder.canary_observations.shape == (3, 3)


def test_the_recorders_errors_leave_the_jitted_step_as_they_were_raised():
    @jax_hooks.jit
    def twice(params, key, batch):
        grads = jax_hooks.add_canary({"w": jnp.ones(2)}, clip_norm=1.0, sample_rate=0.5)
        return jax_hooks.add_canary(grads, clip_norm=1.0, sample_rate=0.5)

    with recording(UpdateRecorder(None, 0)), pytest.raises(TargetCodeError, match="twice"):
        twice(PARAMS, jax.random.key(0), None)

    class Stop(BaseException):
        pass

    class Stopping(UpdateRecorder):
        def _observe(self, tensors):
            super()._observe(tensors)
            if self.steps == 2:
                raise Stop

    recorder = Stopping(None, 0)
    with recording(recorder), pytest.raises(Stop):
        _train(JITTED, steps=5)
    assert recorder.steps == 2


def _scan_body(params: dict, key):
    return _step(params, key, jnp.array([0, 1])), None


@jax_hooks.jit
def _scanned(params: dict, keys):
    return jax.lax.scan(_scan_body, params, keys)[0]


def test_a_lax_scan_body_traced_outside_an_audit_is_traced_again_in_the_audit():
    keys = jax.random.split(jax.random.key(0), 4)
    _scanned(PARAMS, keys)  # JAX caches the scan body's trace, made here without the hooks
    recorder = UpdateRecorder(None, 0)
    with recording(recorder):
        _scanned(PARAMS, keys)
    assert recorder.steps == 4 and [b.tolist() for b in recorder.batches] == [[0, 1]] * 4


def test_numpy_arrays_come_back_as_numpy_and_a_list_is_a_batch():
    recorder = UpdateRecorder(0, 0, include=True)
    grads = {"w": np.zeros(3, dtype=np.float32)}
    with recording(recorder):
        out = jax_hooks.add_canary(grads, clip_norm=1.0, sample_rate=1.0, batch=[2, 0])
        jax_hooks.report_update(out)
    assert isinstance(out["w"], np.ndarray) and out["w"].tolist() == [1.0, 0.0, 0.0] and grads["w"][0] == 0.0
    assert recorder.batches[0].tolist() == [2, 0] and recorder.observations == [1.0]
