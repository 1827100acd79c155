"""The bug zoo (examples/zoo, docs/reference/bug-zoo.md): every DP-SGD mistake fails the audit in one
run (``run dp --check-config --fail-above-claim``: exit 1) and its correct twin passes (exit 0), as do the
twins of the mistakes only ``--one-run`` sees; the correct loops that are no twin (``opacus_loops.CORRECT``: what
the Opacus docs recommend, and an EMA of the DP iterates) pass in ``--check-config`` and ``--one-run``.

Each audit is four calls of the training of softmax regression on 300 digits (the probe, the first
steps of its repeat, the dataset plus one record and less one record) and the accounting check's PLD
epsilons: about a second in-process once torch and Opacus are imported.
"""

from __future__ import annotations

import json

import pytest

from audit.cli import main
from examples.zoo import hooked, opacus_loops

HOOKED = [f"examples.zoo.hooked:{name}" for name in hooked.MISTAKES]
OPACUS = [f"examples.zoo.opacus_loops:{name}" for name in opacus_loops.MISTAKES]
#: Mistakes only ``--one-run`` can see: their twins must pass the check too.
ONE_RUN_TWINS = [f"examples.zoo.opacus_loops:{name}_twin" for name in opacus_loops.ONE_RUN_MISTAKES]
#: Correct trainings without a mistake beside them: two steps at n 37 and 300, rate 0.99 (the sampling test's edges).
TWINS_ONLY = [f"examples.zoo.hooked:{name}" for name in hooked.TWINS_ONLY]


def _audit(target: str, out, seed: int = 0) -> tuple[int, dict]:
    code = main(["run", "dp", "--target", target, "--check-config", "--fail-above-claim", "-q", "--out", str(out),
                 "--seed", str(seed)])
    (path,) = out.glob("*/results.json")
    return code, json.loads(path.read_text())


def _problems(results: dict) -> list[str]:
    return [f"{f['check']}: {f['message']}" for f in results["config_check"]["findings"] if f["problem"]]


@pytest.mark.parametrize("target", HOOKED + OPACUS)
def test_the_mistake_fails_the_audit(target, tmp_path):
    if target in OPACUS:
        pytest.importorskip("opacus")
    code, results = _audit(target, tmp_path)
    assert code == 1, (results["verdict"]["text"], _problems(results))
    assert results["verdict"]["status"] == "violation"
    assert any(f["violation"] and f["fix"] for f in results["config_check"]["findings"])


@pytest.mark.parametrize("target", [f"examples.zoo.opacus_loops:{name}" for name in opacus_loops.CORRECT])
@pytest.mark.parametrize("mode", ["--check-config", "--one-run"])
def test_the_loops_the_opacus_docs_recommend_pass(target, mode, tmp_path):
    """BatchMemoryManager, a no-grad validation loss over a held-out loader of the training set's size, a no-grad
    evaluation over the training rows: their records are what reached the gradients; an EMA of the DP iterates
    is post-processing: each exits 0 in both modes with every check read."""
    pytest.importorskip("opacus")
    code = main(["run", "dp", "--target", target, mode, "--fail-above-claim", "-q", "--out", str(tmp_path)])
    (path,) = tmp_path.glob("*/results.json")
    results = json.loads(path.read_text())
    assert code == 0, (results["verdict"]["text"], _problems(results))
    assert results["config_check"]["status"] == "ok", _problems(results)
    assert all(f.get("read", True) for f in results["config_check"]["findings"])


def test_mean_reduction_on_the_boundary_names_opacus_expected_batch_size(tmp_path):
    """Opacus #571: the fix printed names int(N q) and is the twin (a normaliser that does not move), which passes."""
    pytest.importorskip("opacus")
    code, results = _audit("examples.zoo.opacus_loops:mean_reduction_boundary", tmp_path)
    (first,) = [f for f in results["config_check"]["findings"] if f["violation"]]
    assert code == 1 and first["check"] == "world-dependence" and "int(N q)" in first["message"]
    assert "expected_batch_size = int(N * q)" in first["fix"] and "#571" in first["fix"]


@pytest.mark.parametrize("target", [f"{t}_twin" for t in HOOKED + OPACUS] + ONE_RUN_TWINS + TWINS_ONLY)
def test_the_twin_passes(target, tmp_path):
    if target.startswith("examples.zoo.opacus_loops"):
        pytest.importorskip("opacus")
    code, results = _audit(target, tmp_path)
    assert code == 0, (results["verdict"]["text"], _problems(results))
    assert results["config_check"]["status"] == "ok", _problems(results)


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize(("name", "check"), [("cross_tensor_noise", "noise-cross-tensor"),
                                             ("partly_noised", "noise-coverage")])
def test_infinite_epsilon_noise_mistakes_fail_at_other_seeds(name, check, seed, tmp_path):
    """Noise reused across tensors and a partly noised tensor (epsilon infinite) fail at seeds 1 and 2 too (seed 0:
    above), decided by their own check."""
    code, results = _audit(f"examples.zoo.hooked:{name}", tmp_path, seed)
    assert code == 1, (results["verdict"]["text"], _problems(results))
    assert check in {f["check"] for f in results["config_check"]["findings"] if f["violation"]}
