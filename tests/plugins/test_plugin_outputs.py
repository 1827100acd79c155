"""Third-party code as plugins, without a run: the randomness a function takes (targets.plugins.rng), the
flattening and encoding of its outputs (targets.plugins.outputs), claims checked on load, the thread limit
and the packages a plugin imports (the audits of such plugins: tests/e2e/mechanism/test_third_party.py)."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from audit.errors import UserError
from targets.plugins.loading import load_plugin, plugin_from_dict
from targets.plugins.outputs import OutputEncoder, flatten_numeric
from targets.plugins.rng import rng_kind
from targets.threads import THREADS_ENV, plugin_threads, thread_limit


def test_rng_kind_from_declaration_signature_and_default():
    def gen(data, rng): ...
    def legacy(data, random_state): ...
    def annotated(data, r: np.random.RandomState): ...
    def seeded(data, s: int): ...
    def data_only(data): ...
    def train(X, y, seed): ...
    def train_no_rng(X, y): ...

    assert rng_kind(gen, None, 1, "generator", "p") == "generator"
    assert rng_kind(legacy, None, 1, "generator", "p") == "random_state"
    assert rng_kind(annotated, None, 1, "generator", "p") == "random_state"
    assert rng_kind(seeded, None, 1, "generator", "p") == "seed"
    assert rng_kind(data_only, None, 1, "generator", "p") == "none"
    assert rng_kind(train, None, 2, "seed", "p") == "seed"
    assert rng_kind(train_no_rng, None, 2, "seed", "p") == "none"
    assert rng_kind(gen, "seed", 1, "generator", "p") == "seed"
    with pytest.raises(UserError, match="field 'rng' must be one of"):
        rng_kind(gen, "secure", 1, "generator", "p")


def test_flattening_rule():
    import torch

    counts, edges = np.array([3, 4]), np.array([0.0, 0.5, 1.0])
    np.testing.assert_array_equal(flatten_numeric((counts, edges)), [3, 4, 0.0, 0.5, 1.0])
    np.testing.assert_array_equal(flatten_numeric({"b": 2.0, "a": [1, np.float32(1.5)]}), [1.0, 1.5, 2.0])
    np.testing.assert_array_equal(flatten_numeric(torch.tensor([[1.0, 2.0]])), [1.0, 2.0])
    assert flatten_numeric("alice") is None and flatten_numeric(("a", 1)) is None
    encoder = OutputEncoder("p")
    first = encoder.encode(["bob", "alice", "bob"])
    second = encoder.encode(["alice", ("a", 1), None])
    np.testing.assert_array_equal(first.ravel(), [0, 1, 0])
    np.testing.assert_array_equal(second.ravel(), [1, 2, 3])


@pytest.mark.parametrize("outputs, message", [
    ([{1, 2}], "cannot audit an output of type set"),
    ([["a", "b"]], "cannot audit an output of type list"),
    ([np.zeros(2), np.zeros(3)], "same number of values every call"),
    ([object()], "cannot audit an output of type object"),
])
def test_unusable_outputs_say_what_to_return(outputs, message):
    with pytest.raises(UserError, match=message) as info:
        OutputEncoder("plugin p").encode(outputs)
    assert "\n" not in str(info.value)


def test_numbers_then_a_category_is_an_error():
    encoder = OutputEncoder("plugin p")
    encoder.encode([1.0, 2.0])
    with pytest.raises(UserError, match="mix numbers and other values"):
        encoder.encode(["alice"])


@pytest.mark.parametrize("claim, message", [
    ({"epsilon": 1.0, "mu": 1.0}, "exactly one of"),
    ({"mu": 1.0, "delta": 0}, "delta .* must lie in \\(0, 1\\)"),
    ({"rho": -1.0}, "rho must be a positive number"),
    ({"mu": "big"}, "must be numbers"),
])
def test_bad_claims_are_one_line_errors(claim, message):
    made = {"kind": "mechanism", "mechanism": lambda d, rng: 0.0, "neighbours": (0, 1), "claim": claim}
    with pytest.raises(UserError, match=message):
        plugin_from_dict("p", made)


def test_thread_limit_applies_and_restores(monkeypatch):
    import torch
    from threadpoolctl import threadpool_info

    before = torch.get_num_threads()
    with thread_limit(1):
        assert torch.get_num_threads() == 1
        assert all(pool["num_threads"] == 1 for pool in threadpool_info())
    assert torch.get_num_threads() == before
    monkeypatch.setenv(THREADS_ENV, "0")
    assert plugin_threads() == 0
    with thread_limit():
        assert torch.get_num_threads() == before
    monkeypatch.setenv(THREADS_ENV, "many")
    with pytest.raises(UserError, match=THREADS_ENV):
        plugin_threads()


def test_packages_a_plugin_imported_on_load_are_recorded(tmp_path, monkeypatch):
    (tmp_path / "uses_scipy.py").write_text(textwrap.dedent('''
        from scipy import stats

        def factory():
            return {"kind": "mechanism", "mechanism": lambda d, rng: float(stats.laplace.rvs(random_state=rng)),
                    "neighbours": (0, 1), "claim": {"epsilon": 1.0}}
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    plugin = load_plugin("uses_scipy:factory")
    assert "scipy" in plugin.packages and "numpy" not in plugin.packages
