"""Executors and the training thread policy: the same seed gives the same results.json on every
executor (in-process, a local process pool, a local Ray on 2 CPUs — every run kind that trains) and
with any torch thread count (the chunks and the thread policy without a run: tests/core/test_chunks.py,
tests/targets/test_threads.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import results_in, without_volatile

import audit.executors as executors
from audit.cli import main
from audit.executors import make_executor
from targets.datasets import Dataset, load_dataset
from targets.threads import TRAINING_THREADS_ENV
from targets.training import TrainConfig, train_models

MEMBERSHIP = ["run", "membership", "--target", "dpsgd_digits", "--quick", "--attack", "loss,lira", "--seed", "5",
              "--canaries", "60", "--shadows", "2", "--references", "10", "--quiet"]
DP = ["run", "dp", "--target", "dpgd_logreg_digits", "--quick", "--runs", "300", "--seed", "2", "--quiet"]
#: One small run of every kind that trains models, each through the run's executor (``run mechanism``
#: trains nothing: it samples the mechanism in this process and has no executor).
KIND_RUNS = {
    "membership": MEMBERSHIP,
    "dp": DP,
    "inversion": ["run", "inversion", "--target", "dpsgd_logreg_digits", "--quick", "--steps", "20",
                  "--black-box-steps", "1", "--seed", "3", "--quiet"],
    "extraction": ["run", "extraction", "--target", "dpsgd_logreg_digits", "--quick", "--round", "3",
                   "--label-queries", "100", "--seed", "4", "--quiet"],
    "sweep": ["sweep", "dp", "--target", "dpgd_logreg_digits", "--quick", "--epsilons", "2", "--threats", "white-box",
              "--runs", "200", "--seed", "6", "--quiet"],
}
#: The training chunks of each run with ``RUN_CHUNK = 100``: membership the target, the shadows and 10
#: reference models in 2; dp 300 runs; inversion the target and the reference model; extraction the
#: DP-SGD target and its non-private comparison; sweep 200 runs.
CHUNKS = {"membership": 4, "dp": 3, "inversion": 2, "extraction": 2, "sweep": 2}
RAY_FLAGS = ["--executor", "ray", "--workers", "2"]


def _log(out: Path) -> str:
    return "".join(p.read_text() for p in out.glob("*/log.txt"))


def _run_in_process(root: Path, kinds: tuple[str, ...]) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(executors, "RUN_CHUNK", 100)
        for kind in kinds:
            assert main(KIND_RUNS[kind] + ["--out", str(root / kind)]) == 0, kind


@pytest.fixture(scope="module")
def in_process(tmp_path_factory):
    """Reference results of the membership (4 chunks) and dp (3 chunks) runs in this process."""
    root = tmp_path_factory.mktemp("in-process")
    _run_in_process(root, ("membership", "dp"))
    return root


@pytest.fixture(scope="module")
def in_process_every_kind(in_process):
    """The reference results of :func:`in_process` and of the other kinds' runs in this process."""
    _run_in_process(in_process, ("inversion", "extraction", "sweep"))
    return in_process


@pytest.fixture(scope="module")
def ray_session():
    """One local Ray on 2 CPUs for every Ray run of this module, started by an executor held open: the
    runs' executors find it started, use it and leave it running (audit.executors.RayExecutor), so Ray
    starts once instead of once per training call."""
    pytest.importorskip("ray", reason="ray is not installed (pip install 'privacy-audit[ray]')")
    executor = make_executor("ray", 2)
    yield executor
    executor.close()


def test_same_seed_same_results_on_a_process_pool(in_process, tmp_path, monkeypatch):
    monkeypatch.setattr(executors, "RUN_CHUNK", 100)  # 300 runs in 3 chunks
    for kind in ("membership", "dp"):
        assert main(KIND_RUNS[kind] + ["--workers", "2", "--out", str(tmp_path / kind)]) == 0
        assert without_volatile(results_in(tmp_path / kind)) == without_volatile(results_in(in_process / kind)), kind
    assert "chunk 4 of 4 trained" in _log(tmp_path / "membership")  # target, shadows, 2 of references


@pytest.mark.parametrize("kind", list(KIND_RUNS))
def test_every_kind_same_results_on_ray(kind, ray_session, in_process_every_kind, tmp_path, monkeypatch):
    """Each kind's small run gives the same results.json (volatile keys aside) with ``--executor ray
    --workers 2`` as in this process. ``run mechanism`` is not here: it trains no model (it samples the
    mechanism in this process), so it has no executor."""
    monkeypatch.setattr(executors, "RUN_CHUNK", 100)
    on_ray: list[int] = []
    ray_map = executors.RayExecutor.map

    def counted_map(self, jobs, on_done=None):
        on_ray.append(len(jobs))
        return ray_map(self, jobs, on_done)

    monkeypatch.setattr(executors.RayExecutor, "map", counted_map)
    assert main(KIND_RUNS[kind] + RAY_FLAGS + ["--out", str(tmp_path / kind)]) == 0
    assert sum(on_ray) == CHUNKS[kind]  # every model was trained by a Ray task
    assert without_volatile(results_in(tmp_path / kind)) == without_volatile(results_in(in_process_every_kind / kind))


def test_a_rerun_reuses_every_chunk(in_process, tmp_path):
    out = tmp_path / "again"
    (out / "cache").mkdir(parents=True)
    for entry in (in_process / "membership" / "cache").iterdir():
        (out / "cache" / entry.name).write_bytes(entry.read_bytes())
    assert main(MEMBERSHIP + ["--out", str(out)]) == 0
    assert "reused cached models for 4 of 4 chunk(s)" in _log(out)
    assert without_volatile(results_in(out)) == without_volatile(results_in(in_process / "membership"))


def _images(n=48, seed=0) -> Dataset:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 1, 28, 28)).astype(np.float32)
    return Dataset(X, rng.integers(0, 10, n).astype(np.int64), "noise", 10, (1, 28, 28), "test images")


@pytest.mark.parametrize("arch", ["cnn", "mlp"])
@pytest.mark.parametrize("private", [True, False])
def test_training_is_bit_identical_with_one_and_two_threads(arch, private, monkeypatch):
    data = _images() if arch == "cnn" else load_dataset("digits")
    masks = np.random.default_rng(1).random((3, len(data))) < 0.7
    config = TrainConfig(arch=arch, epochs=1, sample_rate=0.25, lr=0.5, expected_batch_size=0.25 * masks[0].sum(),
                         clip_norm=1.0 if private else None, noise_multiplier=1.0 if private else 0.0, momentum=0.5)
    out = {}
    for threads in ("1", "2"):
        monkeypatch.setenv(TRAINING_THREADS_ENV, threads)
        out[threads] = train_models(data, masks, config, [4, 5, 6], progress=False)
    for k in out["1"]:
        assert torch.equal(out["1"][k], out["2"][k]), k
