"""The noise checks end to end: small hooked DP-SGD loops (softmax regression on 300 rows of digits, a weight
and a bias tensor, 40 steps) through ``run dp --check-config --fail-above-claim``. A bias without noise and
noise drawn once and reused exit 1 (both passed the pooled noise measurement they replace); the correct twin
exits 0. Each check is 3 trainings of about a second."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from audit.cli import main
from audit.theory.dpsgd import calibrate_noise_multiplier
from targets.audit_hooks import add_canary, report_update
from targets.datasets import load_digits

EPS, DELTA, Q, EPOCHS, C, N = 2.0, 1e-5, 0.1, 4, 1.0, 300
STEPS = int(round(EPOCHS / Q))


def sigma() -> float:
    """The claim's noise multiplier (PLD, cached): computed when a loop trains, not when the tests are collected."""
    return float(calibrate_noise_multiplier(EPS, DELTA, Q, STEPS))


MODULE = Path(__file__).stem


def _loop(mistake: str | None):
    """Softmax regression by DP-SGD (Poisson rate Q, per-example clipping to C, the noisy sum) with the two
    hooks; ``mistake``: "bias" (no noise on the bias), "reused" (one noise draw added at every step)."""
    def train(X, y, seed):
        gen = torch.manual_seed(seed)
        X, y = torch.as_tensor(X, dtype=torch.float32), torch.as_tensor(y)
        w, b = torch.zeros(X.shape[1], 10), torch.zeros(10)
        once = [sigma() * C * torch.randn(w.shape, generator=gen), sigma() * C * torch.randn(b.shape, generator=gen)]
        for _ in range(STEPS):
            batch = torch.nonzero(torch.rand(len(X), generator=gen) < Q).reshape(-1)
            err = torch.softmax(X[batch] @ w + b, 1) - torch.nn.functional.one_hot(y[batch], 10)
            gw, gb = X[batch][:, :, None] * err[:, None, :], err
            norms = torch.sqrt(gw.flatten(1).pow(2).sum(1) + gb.pow(2).sum(1)).clamp(min=1e-12)
            factor = (C / norms).clamp(max=1.0)
            sums = [(gw * factor[:, None, None]).sum(0), (gb * factor[:, None]).sum(0)]
            add_canary(sums, clip_norm=C, sample_rate=Q, batch=batch)
            noise = once if mistake == "reused" else [sigma() * C * torch.randn(s.shape, generator=gen) for s in sums]
            if mistake == "bias":
                noise[1] = torch.zeros_like(noise[1])
            noisy = [s + n for s, n in zip(sums, noise, strict=True)]
            report_update(noisy)
            w, b = w - 2.0 * noisy[0] / (Q * N), b - 2.0 * noisy[1] / (Q * N)
        return lambda Z: torch.softmax(torch.as_tensor(Z, dtype=torch.float32) @ w + b, 1).numpy()

    return train


def _plugin(name: str, mistake: str | None) -> dict:
    data = load_digits()
    return {"kind": "trainer", "name": name, "dataset": (data.X[:N].reshape(N, -1), data.y[:N]),
            "train": _loop(mistake), "claim": {"epsilon": EPS, "delta": DELTA}}


def correct() -> dict:
    return _plugin("noise_correct", None)


def bias_without_noise() -> dict:
    return _plugin("noise_bias_without_noise", "bias")


def noise_reused() -> dict:
    return _plugin("noise_reused", "reused")


def _check(factory: str, out: Path, *extra: str) -> tuple[int, dict]:
    code = main(["run", "dp", "--target", f"{MODULE}:{factory}", "--fail-above-claim", "-q", "--out", str(out),
                 *extra])
    (path,) = out.glob("*/results.json")
    return code, json.loads(path.read_text())


def _violations(results: dict) -> set[str]:
    return {f["check"] for f in results["config_check"]["findings"] if f["violation"]}


def test_the_correct_loop_passes(tmp_path):
    code, res = _check("correct", tmp_path, "--check-config")
    assert code == 0 and not _violations(res), res["config_check"]["findings"]
    noise = res["config_check"]["noise_measured"]
    assert [t["coordinates"] for t in noise["tensors"]] == [640, 10]
    assert noise["upper"] >= sigma() * 0.98 and set(noise["tests"].values()) == {"ok"}


def test_a_bias_without_noise_is_a_violation(tmp_path):
    code, res = _check("bias_without_noise", tmp_path, "--check-config")
    assert code == 1 and "noise-level" in _violations(res)
    level = next(f for f in res["config_check"]["findings"] if f["check"] == "noise-level")
    assert level["details"]["tensors_below"] == [1] and "tensor 1 (10 coordinates)" in level["message"]


def test_noise_reused_at_every_step_is_a_violation(tmp_path):
    code, res = _check("noise_reused", tmp_path, "--check-config")
    assert code == 1 and "noise-independence" in _violations(res)
