"""The gate: every finding that voids the accounting fails the audit (exit 1 with --fail-above-claim), in
``--check-config`` and in ``--one-run``, and each mistake's correct twin passes (exit 0).

The loops are small (a linear model, a few hundred synthetic rows, seconds per training):

* the Opacus ``examples/mnist.py`` pattern — ``DataLoader(shuffle=True)``, ``make_private``, an epoch loop —
  with the commonest mistake: iterating the original (shuffled) loader, not the one ``make_private``
  returns. Its twin iterates the returned Poisson loader. 302 rows at batch 64 sit off a batch boundary
  (5 batches and a normaliser ``int(n/5) = 60`` with one record more or less);
* the same correct loop on 320 rows (a boundary: one record more makes 6 batches, rate 1/6) and on 321
  rows (one record fewer makes 5 batches), not DP for add/remove neighbours at that size;
* a hooked loop that samples at 0.5 while it declares (and accounts) 0.05.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from audit.cli import main
from audit.dp.plugins.config import plugin_accounting
from audit.theory.config_check import FIX_RATE_STEPS
from audit.theory.dpsgd import calibrate_noise_multiplier
from targets.audit_hooks import add_canary, report_update
from targets.plugins.loading import plugin_from_dict

EPS, DELTA, C, FEATURES, CLASSES = 2.0, 1e-5, 1.0, 20, 10
#: The Opacus loops: batch 64, 2 epochs; at 302 (or 320) rows Opacus takes q = 1/5, T = 10.
BATCH, EPOCHS, N_OFF, N_ON_ADD, N_ON_REMOVE = 64, 2, 302, 320, 321


def sigma() -> float:
    """The claim's noise multiplier (PLD, cached): computed when a loop trains, not when the tests are collected."""
    return float(calibrate_noise_multiplier(EPS, DELTA, 1 / 5, EPOCHS * 5))


#: The hooked loop of the rate mistake: declares 0.05 (T = 20), samples at 0.5.
DECLARED, REAL, N_HOOKED = 0.05, 0.5, 400


def sigma_hooked() -> float:
    """The hooked loop's noise multiplier for its declared rate (PLD, cached)."""
    return float(calibrate_noise_multiplier(EPS, DELTA, DECLARED, 20))


MODULE = Path(__file__).stem


def _data(n: int):
    rng = np.random.default_rng(0)
    return rng.normal(size=(n, FEATURES)).astype(np.float32), rng.integers(0, CLASSES, n)


def _opacus_mnist_style(iterate_returned: bool):
    """Opacus's examples/mnist.py, in small: a shuffled DataLoader handed to make_private, then epochs over a
    loader — the one make_private returns (correct) or the original one (the mistake)."""
    def train(X, y, seed):
        from opacus import PrivacyEngine  # optional dependency (the opacus extra, in dev)

        torch.manual_seed(seed)
        data = torch.utils.data.TensorDataset(torch.as_tensor(X), torch.as_tensor(y))
        train_loader = torch.utils.data.DataLoader(data, batch_size=BATCH, shuffle=True)
        model = torch.nn.Sequential(torch.nn.Linear(FEATURES, CLASSES))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        model, optimizer, private_loader = PrivacyEngine().make_private(
            module=model, optimizer=optimizer, data_loader=train_loader, noise_multiplier=sigma(), max_grad_norm=C)
        for _ in range(EPOCHS):
            for xb, yb in private_loader if iterate_returned else train_loader:
                optimizer.zero_grad()
                if len(xb):
                    torch.nn.functional.cross_entropy(model(xb), yb).backward()
                optimizer.step()
        return lambda Z: torch.softmax(model(torch.as_tensor(Z, dtype=torch.float32)), 1).detach().numpy()

    return train


def _opacus_plugin(name: str, n: int, iterate_returned: bool = True) -> dict:
    return {"kind": "trainer", "name": name, "dataset": _data(n), "train": _opacus_mnist_style(iterate_returned),
            "claim": {"epsilon": EPS, "delta": DELTA}}


def opacus_original_loader() -> dict:
    return _opacus_plugin("opacus_original_loader", N_OFF, iterate_returned=False)


def opacus_returned_loader() -> dict:
    return _opacus_plugin("opacus_returned_loader", N_OFF)


def opacus_on_a_boundary() -> dict:
    return _opacus_plugin("opacus_on_a_boundary", N_ON_ADD)


def _hooked(real_rate: float, pass_batch: bool = True):
    """A hand-written DP-SGD loop with the two hooks, Poisson at ``real_rate``, declaring DECLARED; without
    ``pass_batch`` it slices its batches off tensors and never tells the hooks which records they hold."""
    def train(X, y, seed):
        gen = torch.manual_seed(seed)
        X, y = torch.as_tensor(X), torch.as_tensor(y)
        w = torch.zeros(FEATURES, CLASSES)
        for _ in range(20):
            batch = torch.nonzero(torch.rand(len(X), generator=gen) < real_rate).reshape(-1)
            p = torch.softmax(X[batch] @ w, 1)
            g = X[batch][:, :, None] * (p - torch.nn.functional.one_hot(y[batch], CLASSES))[:, None, :]
            norms = g.flatten(1).norm(dim=1).clamp(min=1e-12)
            summed = (g * (C / norms).clamp(max=1.0)[:, None, None]).sum(0)
            add_canary(summed, clip_norm=C, sample_rate=DECLARED, batch=batch if pass_batch else None)
            noisy = summed + sigma_hooked() * C * torch.randn(summed.shape, generator=gen)
            report_update(noisy)
            w = w - 0.5 * noisy / (DECLARED * N_HOOKED)
        return lambda Z: torch.softmax(torch.as_tensor(Z, dtype=torch.float32) @ w, 1).numpy()

    return train


def rate_above_declared() -> dict:
    return {"kind": "trainer", "name": "rate_above_declared", "dataset": _data(N_HOOKED), "train": _hooked(REAL),
            "claim": {"epsilon": EPS, "delta": DELTA}}


def rate_as_declared() -> dict:
    return rate_above_declared() | {"name": "rate_as_declared", "train": _hooked(DECLARED)}


def records_unseen() -> dict:
    return rate_above_declared() | {"name": "records_unseen", "train": _hooked(DECLARED, pass_batch=False)}


def _cli(tmp_path: Path, capsys, factory: str, *flags: str) -> tuple[int, str, dict]:
    """(exit code, stdout, results.json) of ``run dp`` on this module's ``factory`` with ``flags``."""
    out = tmp_path / f"{factory}{''.join(flags)}"
    code = main(["run", "dp", "--target", f"{MODULE}:{factory}", *flags, "-q", "--fail-above-claim",
                 "--out", str(out)])
    (path,) = out.glob("*/results.json")
    return code, capsys.readouterr().out, json.loads(path.read_text())


def _verdict_line(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("verdict:"))


def test_opacus_loop_iterating_the_original_loader_fails_and_its_twin_passes(tmp_path, capsys):
    pytest.importorskip("opacus")
    code, out, res = _cli(tmp_path, capsys, "opacus_original_loader", "--check-config")
    line = _verdict_line(out)
    assert code == 1, out
    assert line.startswith("verdict:   violation: accounting check violation, sampling: ")
    assert "iterate the data loader make_private returns" in line and "Fix:" in line
    assert res["config_check"]["alpha"] == pytest.approx(0.05)
    assert res["family"]["split"] == pytest.approx({"config_check": 0.05})
    code, out, res = _cli(tmp_path, capsys, "opacus_original_loader", "--one-run", "--quick")
    assert code == 1, out
    assert _verdict_line(out).startswith("verdict:   violation: accounting check violation, sampling: ")
    assert "One-run bound (alone): " in _verdict_line(out)
    family = res["family"]
    # 302 rows: 120 input canaries (audit.dp.plugins.input_canaries), a quarter of alpha each to both bounds
    assert family["split"] == pytest.approx({"config_check": 0.025, "input_canaries": 0.0125, "one_run": 0.0125})
    assert family["one_run_confidence"] == pytest.approx(0.9875)
    assert res["config_check"]["alpha"] == pytest.approx(0.025)
    assert res["best_lower_bound"]["family_confidence"] == pytest.approx(0.9875)
    assert res["game"]["input_canaries"]["canaries"] == 120
    for flags in (("--check-config",), ("--one-run", "--quick")):
        code, out, res = _cli(tmp_path, capsys, "opacus_returned_loader", *flags)
        assert code == 0 and res["config_check"]["status"] == "ok", out
        assert res["config_check"]["config"]["sample_rate"] == pytest.approx(0.2)
        assert res["config_check"]["config"]["steps"] == EPOCHS * 5


def test_a_configuration_on_a_batch_boundary_fails(tmp_path, capsys):
    pytest.importorskip("opacus")
    code, out, res = _cli(tmp_path, capsys, "opacus_on_a_boundary", "--check-config")
    assert code == 1, out
    line = _verdict_line(out)
    assert line.startswith("verdict:   violation: accounting check violation, world-dependence: Adding one record")
    assert FIX_RATE_STEPS in line
    worlds = next(f for f in res["config_check"]["findings"] if f["check"] == "world-dependence")
    assert [d["field"] for d in worlds["details"]["adding"]["differences"]][:2] == ["sample rate", "steps"]
    # one record fewer moves a dataset one row past the boundary: the removal world sees it
    removed = plugin_accounting(plugin_from_dict("test:remove", _opacus_plugin("remove", N_ON_REMOVE)), None, 0,
                                0.05).block.to_dict()
    worlds = next(f for f in removed["findings"] if f["check"] == "world-dependence")
    assert worlds["violation"] and worlds["message"].startswith("Removing one record")
    assert not worlds["details"]["adding"]["differences"]


def test_a_loop_sampling_faster_than_it_declares_fails(tmp_path, capsys):
    code, out, res = _cli(tmp_path, capsys, "rate_above_declared", "--check-config")
    assert code == 1, out
    assert _verdict_line(out).startswith("verdict:   violation: accounting check violation, rate: ")
    rate = next(f for f in res["config_check"]["findings"] if f["check"] == "rate")
    assert rate["details"]["observed"] == pytest.approx(REAL, abs=0.03) and rate["details"]["declared"] == DECLARED
    code, out, _ = _cli(tmp_path, capsys, "rate_above_declared", "--one-run", "--quick")
    assert code == 1 and "violation, rate: " in _verdict_line(out), out
    code, out, res = _cli(tmp_path, capsys, "rate_as_declared", "--check-config")
    assert code == 0 and res["config_check"]["status"] == "ok", out


def test_a_loop_whose_records_are_unseen_is_never_a_pass(tmp_path, capsys):
    """Nothing unread passes: sampling, periodicity, truncation, rate and clipping cannot be read (no batch=, no
    DataLoader), so the check says so on the terminal and in the verdict, never "as claimed", and the gate exits 2
    in both modes."""
    for flags in (("--check-config",), ("--one-run", "--quick")):
        code, out, res = _cli(tmp_path, capsys, "records_unseen", *flags)
        assert code == 2 and res["verdict"]["status"] == "could-not-read", res["verdict"]["text"]
        assert "as claimed" not in out and "CONFIG NOT READ (sampling)" in out
        unread = {f["check"] for f in res["config_check"]["findings"] if f.get("read") is False}
        assert unread == {"sampling", "periodicity", "truncation", "rate", "clipping"}
        assert res["config_check"]["status"] == "could-not-read"
