"""The JAX bug zoo (examples/zoo/jax_loops.py, docs/reference/bug-zoo.md): every JAX DP-SGD mistake fails
the accounting check in one run (``run dp --check-config --fail-above-claim``: exit 1) and its twin passes
(exit 0); the correct loop passes the one-run audit with a bound at most its claim.

The loops share one compiled step per (clip norm, declared rate) and dataset size, so the file pays about
nine XLA compilations in all, each a few seconds on the shared 2-core machine.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("jax")

from audit.cli import main  # noqa: E402
from examples.zoo import jax_loops  # noqa: E402

MISTAKES = [f"examples.zoo.jax_loops:{name}" for name in jax_loops.MISTAKES]


def _audit(target: str, out, *flags: str) -> tuple[int, dict]:
    code = main(["run", "dp", "--target", target, *flags, "-q", "--out", str(out)])
    (path,) = out.glob("*/results.json")
    return code, json.loads(path.read_text())


def _problems(results: dict) -> list[str]:
    return [f"{f['check']}: {f['message']}" for f in results["config_check"]["findings"] if f["problem"]]


@pytest.mark.parametrize("target", MISTAKES)
def test_the_jax_mistake_fails_the_audit(target, tmp_path):
    code, results = _audit(target, tmp_path, "--check-config", "--fail-above-claim")
    assert code == 1, (results["verdict"]["text"], _problems(results))
    assert results["verdict"]["status"] == "violation"
    assert any(f["violation"] and f["fix"] for f in results["config_check"]["findings"])
    assert results["config_check"]["driver"] == "jax"


@pytest.mark.parametrize("target", [f"{t}_twin" for t in MISTAKES] + ["examples.zoo.jax_loops:ok"])
def test_the_jax_twin_passes(target, tmp_path):
    code, results = _audit(target, tmp_path, "--check-config", "--fail-above-claim")
    assert code == 0, (results["verdict"]["text"], _problems(results))
    assert results["config_check"]["status"] == "ok", _problems(results)


@pytest.mark.parametrize("threat", ["updates", "white-box"])
def test_the_correct_jax_loop_passes_the_one_run_audit(threat, tmp_path):
    code, results = _audit("examples.zoo.jax_loops:ok", tmp_path, "--one-run", "--threat", threat)
    assert code == 0, results["verdict"]["text"]
    best = results["best_lower_bound"]
    assert best["valid"] and 0.0 <= best["epsilon"] <= results["epsilon_theory"] == pytest.approx(2.0)
    assert results["game"]["threat"] == threat and results["params"]["code"]["driver"] == "jax"
    assert results["config_check"]["status"] == "ok"
