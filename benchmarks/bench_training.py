"""Training benchmark: non-private SGD, our DP-SGD, Opacus DP-SGD, many models at once, contention,
executors, and the projected wall time of a large LiRA audit.

One process drives everything; every timed figure is the median of ``--repeats`` (at least 3)
repeats, the idle measurements interleaved round-robin so that a change in machine load hits all
of them alike. Every job runs under the training thread policy (:mod:`targets.threads`).

* ``nonprivate_s`` — one epoch of non-private SGD on the MNIST CNN (``targets.models`` ``cnn``) at
  expected batch 256 with Poisson batches: the faster of our trainer (``nonprivate_ours_s``) and a
  plain ``torch.nn.Module`` + ``torch.optim.SGD`` loop (``nonprivate_torch_s``).
* ``dpsgd_s`` — one epoch of our DP-SGD (``targets.training.train_models``: Poisson sampling,
  per-example clipping with ghost norms / book-keeping, Gaussian noise), same CNN, data and batch.
* ``opacus_s`` — one epoch of Opacus DP-SGD (``PrivacyEngine.make_private``, Poisson sampling,
  default hook-based per-sample gradients), same CNN (``targets.models.to_module``), data, batch.
* ``models_vectorised_s`` / ``models_sequential_s`` — R small DP models (the ``dpsgd_digits`` MLP on
  scikit-learn digits) trained in one ``train_models`` call, and one call per model.
* ``contended_s`` / ``contended_slowdown`` — our DP-SGD epoch while one busy-loop process that the
  benchmark starts and stops runs beside it, and its ratio to ``dpsgd_s``;
  ``parallel_s`` / ``parallel_slowdown`` — the same epoch in two processes at once (two audits).
* ``threads_identical`` — the DP-SGD epoch with 1 thread equals it with the policy's thread count.
* ``executor_*_s`` — the same training chunks (``audit.executors.train_cached_models``, a fresh
  cache) in this process, on a local process pool and on a local Ray (when installed; not with
  ``--quick``), start-up included; ``executors_identical`` — the same models on each.
* ``chunk_s`` — one chunk (``audit.executors.MODEL_CHUNK`` models) of the flagship target
  (``dpsgd_mnist`` in ``targets.registry``) trained on one thread, as a worker trains it;
  ``lira256_projected_s`` — the training wall time of a LiRA audit of that target with 256 reference
  models (and the flagship's shadow models) on N workers, one CPU each: ``ceil(chunks / N)`` rounds
  of ``chunk_s`` (a projection, not a measurement).

Usage: ``python benchmarks/bench_training.py --json OUT [--quick] [--device auto|cpu|cuda]``.
``--quick`` shrinks the data, the model count and the chunk (for CI); its numbers are not the
reported ones. Take the reported figures on an idle machine (``load_at_start`` is recorded).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from audit.executors import (  # noqa: E402
    MODEL_CHUNK,
    CachedExecutor,
    TrainingCall,
    chunk_slices,
    make_executor,
    train_cached_models,
)
from audit.io import write_json  # noqa: E402
from audit.membership.runner import GAME_SIZES  # noqa: E402
from targets.catalogue import trained_target  # noqa: E402
from targets.datasets import Dataset, load_dataset  # noqa: E402
from targets.models import get_architecture, init_params, to_module  # noqa: E402
from targets.threads import TRAINING_THREADS_ENV, TrainingThreads, training_threads, usable_cpus  # noqa: E402
from targets.training import TrainConfig, resolve_device, train_models  # noqa: E402

#: Performance targets on a 2-core CPU.
TARGETS = {"dpsgd_over_nonprivate_max": 1.3, "opacus_over_ours_min": 2.0, "vectorised_speedup_min": 5.0,
           "contended_slowdown_max": 2.0, "flagship_peak_rss_gib_max": 4.0}
FULL = {"n_images": 5000, "batch": 256, "models": 32, "model_epochs": 5, "repeats": 3, "executor_chunks": 4,
        "chunk_epochs": None, "ray": True}
QUICK = {"n_images": 512, "batch": 128, "models": 4, "model_epochs": 1, "repeats": 3, "executor_chunks": 2,
         "chunk_epochs": 1.0, "ray": False}
CLIP, SIGMA, LR = 1.0, 1.0, 2.0
#: Worker counts of the LiRA projection.
PROJECTED_WORKERS = (1, 2, 4, 8, 16, 32, 64)
LIRA_REFERENCES = 256
#: Shadow models of the projected audit: the flagship preset's.
LIRA_SHADOWS = GAME_SIZES["default"][1]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(fn: Callable[[], object], device: torch.device) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process: all its threads) of one call."""
    _sync(device)
    start, cpu_start = time.perf_counter(), time.process_time()
    fn()
    _sync(device)
    return time.perf_counter() - start, time.process_time() - cpu_start


def _poisson_batches(n: int, q: float, steps: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [np.flatnonzero(rng.random(n) < q) for _ in range(steps)]


def nonprivate_torch_epoch(data: Dataset, batch: int, device: torch.device, seed: int) -> None:
    """One epoch of a plain PyTorch loop (nn.Module, mean loss, torch.optim.SGD), Poisson batches."""
    arch = get_architecture("cnn")
    model = to_module(arch, init_params(arch, data.shape, data.n_classes, torch.Generator().manual_seed(seed)))
    model.to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    X = torch.as_tensor(data.X).to(device)
    y = torch.as_tensor(data.y).to(device)
    n = len(data)
    for index in _poisson_batches(n, batch / n, max(1, round(n / batch)), seed):
        idx = torch.as_tensor(index).to(device)
        optimizer.zero_grad(set_to_none=True)
        F.cross_entropy(model(X[idx]), y[idx]).backward()
        optimizer.step()


def opacus_setup(data: Dataset, batch: int, device: torch.device, seed: int):
    """Opacus' standard recipe: make_private with Poisson sampling (set-up is not timed)."""
    from opacus import PrivacyEngine

    # Opacus warns that secure RNG is off and that hooks fire without input gradients; both expected.
    warnings.filterwarnings("ignore", category=UserWarning, module=r"opacus\.")
    warnings.filterwarnings("ignore", message="Full backward hook is firing")

    arch = get_architecture("cnn")
    model = to_module(arch, init_params(arch, data.shape, data.n_classes, torch.Generator().manual_seed(seed)))
    model.to(device)
    dataset = torch.utils.data.TensorDataset(torch.as_tensor(data.X), torch.as_tensor(data.y))
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch)
    engine = PrivacyEngine(accountant="prv")
    model, optimizer, loader = engine.make_private(module=model, optimizer=torch.optim.SGD(model.parameters(), lr=LR),
                                                   data_loader=loader, noise_multiplier=SIGMA, max_grad_norm=CLIP,
                                                   poisson_sampling=True)
    return model, optimizer, loader


def opacus_epoch(model, optimizer, loader, device: torch.device) -> None:
    """One epoch of Opacus DP-SGD (its Poisson data loader included: that is how it is used)."""
    for xb, yb in loader:
        optimizer.zero_grad(set_to_none=True)
        F.cross_entropy(model(xb.to(device, non_blocking=True)), yb.to(device, non_blocking=True)).backward()
        optimizer.step()


def machine_info(device: torch.device) -> dict:
    """What the numbers were measured on."""
    info = {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
            "python": platform.python_version(), "torch": torch.__version__, "cpus": os.cpu_count(),
            "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
            "torch_threads": torch.get_num_threads(), "device": device.type,
            "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None}
    try:
        from importlib.metadata import version

        info["opacus"] = version("opacus")
    except Exception:  # opacus is optional  # noqa: BLE001
        info["opacus"] = None
    try:
        with open("/proc/cpuinfo") as fh:
            names = [line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")]
        info["cpu_model"] = names[0] if names else None
    except OSError:
        info["cpu_model"] = None
    return info


def flagship_peak(out_dir: str) -> dict:
    """Wall time and peak RSS of the flagship audit (``audit run membership --target dpsgd_mnist``)."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "audit", "run", "membership", "--target", "dpsgd_mnist", "--quiet",
                           "--out", out_dir], capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"flagship run failed: {proc.stderr.strip()[-500:]}")
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {"flagship_wall_s": wall, "flagship_peak_rss_gib": peak_kib * 1024 / 1024**3}


def _timed_under_policy(fn: Callable[[], object], device: torch.device) -> tuple[float, float]:
    """:func:`_timed` with torch's threads set by the training policy (as ``train_models`` sets them)."""
    with TrainingThreads():
        return _timed(fn, device)


def _mnist(preset: dict) -> Dataset:
    mnist = load_dataset("mnist")
    if preset["n_images"] < len(mnist):
        rng = np.random.default_rng(0)
        mnist = mnist.subset(np.sort(rng.choice(len(mnist), preset["n_images"], replace=False)))
    return mnist


def _dp_epoch(mnist: Dataset, batch: int, device: torch.device):
    """One DP-SGD epoch of the CNN on ``mnist`` (a callable returning the trained parameters)."""
    config = TrainConfig(arch="cnn", epochs=1.0, sample_rate=batch / len(mnist), lr=LR, expected_batch_size=batch,
                         clip_norm=CLIP, noise_multiplier=SIGMA)
    rows = np.ones((1, len(mnist)), dtype=bool)
    return lambda: train_models(mnist, rows, config, [0], device=device, progress=False)


def contended(epoch: Callable[[], object], device: torch.device, repeats: int) -> dict:
    """Times of ``epoch`` while one busy-loop process (started and stopped here) takes a CPU."""
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)
        threads = training_threads()
        times = [_timed(epoch, device)[0] for _ in range(repeats)]
    finally:
        busy.kill()
        busy.wait()
    return {"contended_s": statistics.median(times), "contended_samples_s": times, "contended_threads": threads}


def epoch_worker(barrier_dir: str, quick: bool, repeats: int, device: str) -> None:
    """``--epoch-worker``: one of the parallel processes: warm up, wait for the other, time ``repeats``
    DP-SGD epochs, print their wall times (JSON)."""
    preset = QUICK if quick else FULL
    dev = resolve_device(device)
    epoch = _dp_epoch(_mnist(preset), preset["batch"], dev)
    epoch()
    barrier = Path(barrier_dir)
    (barrier / f"ready-{os.getpid()}").write_text("ready")
    while len(list(barrier.glob("ready-*"))) < 2:
        time.sleep(0.01)
    print(json.dumps([_timed(epoch, dev)[0] for _ in range(repeats)]))


def parallel(quick: bool, repeats: int, device: torch.device) -> dict:
    """Our DP-SGD epoch in two processes at once (two audits side by side): their median times."""
    with tempfile.TemporaryDirectory() as barrier:
        args = [sys.executable, str(Path(__file__).resolve()), "--json", os.devnull, "--epoch-worker", barrier,
                "--repeats", str(repeats), "--device", device.type] + (["--quick"] if quick else [])
        procs = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
        outs = [p.communicate() for p in procs]
    for proc, (_, err) in zip(procs, outs, strict=True):
        if proc.returncode != 0:
            raise RuntimeError(f"parallel epoch worker failed: {err.strip()[-500:]}")
    samples = [json.loads(out) for out, _ in outs]
    return {"parallel_s": max(statistics.median(times) for times in samples), "parallel_samples_s": samples}


def threads_identical(epoch: Callable[[], dict]) -> dict:
    """Whether the DP-SGD epoch gives the same parameters on 1 thread and on the policy's thread count."""
    previous = os.environ.get(TRAINING_THREADS_ENV)
    counts = {1: None, max(2, usable_cpus()): None}
    try:
        for threads in counts:
            os.environ[TRAINING_THREADS_ENV] = str(threads)
            counts[threads] = epoch()
    finally:
        os.environ.pop(TRAINING_THREADS_ENV, None)
        if previous is not None:
            os.environ[TRAINING_THREADS_ENV] = previous
    one, many = counts.values()
    return {"threads_identical": all(torch.equal(one[k], many[k]) for k in one),
            "threads_compared": list(counts)}


def executors(preset: dict, device: torch.device) -> dict:
    """The same training chunks (small DP MLPs) on each executor, each with a fresh cache: wall time
    with start-up, and whether the models are identical."""
    digits = load_dataset("digits")
    rng = np.random.default_rng(1)
    n_models = preset["executor_chunks"] * MODEL_CHUNK
    masks = np.zeros((n_models, len(digits)), dtype=bool)
    for r in range(n_models):
        masks[r, rng.choice(len(digits), 800, replace=False)] = True
    config = TrainConfig(arch="mlp", epochs=float(preset["model_epochs"]), sample_rate=128 / 800, lr=LR,
                         expected_batch_size=128, clip_norm=CLIP, noise_multiplier=SIGMA)
    calls = [TrainingCall("models", masks, list(range(n_models)))]
    workers = max(2, usable_cpus())
    kinds = [("inprocess", "local", 1), ("pool", "local", workers)]
    try:
        import ray  # noqa: F401

        if preset["ray"]:
            kinds.append(("ray", "ray", workers))
    except ImportError:
        pass
    out: dict = {"executor_models": n_models, "executor_chunks": len(chunk_slices(n_models, MODEL_CHUNK)),
                 "executor_workers": workers}
    models = {}
    for name, kind, n in kinds:
        with tempfile.TemporaryDirectory() as cache:
            start = time.perf_counter()
            with make_executor(kind, n) as executor:
                runner = CachedExecutor(executor=executor, cache_dir=Path(cache))
                (models[name],) = train_cached_models(runner, digits, config, calls, device, progress=False)
            out[f"executor_{name}_s"] = time.perf_counter() - start
    first = models["inprocess"]
    out["executors_identical"] = all(torch.equal(first[k], m[k]) for m in models.values() for k in first)
    return out


def chunk_cost(preset: dict, device: torch.device) -> dict:
    """One chunk of the flagship target's models trained on one thread (as a worker trains it), and the
    projected training wall time of a 256-reference-model LiRA audit of that target on N workers."""
    target = trained_target("dpsgd_mnist")
    config = target.train_config(target.noise_multiplier())
    if preset["chunk_epochs"] is not None:  # --quick: a fraction of the epochs, scaled up below
        config = dataclasses.replace(config, epochs=preset["chunk_epochs"])
    mnist = load_dataset("mnist")
    rng = np.random.default_rng(2)
    masks = np.zeros((MODEL_CHUNK, len(mnist)), dtype=bool)
    for r in range(MODEL_CHUNK):
        masks[r, rng.choice(len(mnist), target.n_train, replace=False)] = True
    previous = os.environ.get(TRAINING_THREADS_ENV)
    os.environ[TRAINING_THREADS_ENV] = "1"
    try:
        wall, _ = _timed(lambda: train_models(mnist, masks, config, list(range(MODEL_CHUNK)), device=device,
                                              progress=False), device)
    finally:
        os.environ.pop(TRAINING_THREADS_ENV, None)
        if previous is not None:
            os.environ[TRAINING_THREADS_ENV] = previous
    full_steps = target.steps
    chunk = wall * full_steps / config.steps
    # the target, the shadow models and the reference models are separate training calls, each chunked
    chunks = 1 + len(chunk_slices(LIRA_SHADOWS, MODEL_CHUNK)) + len(chunk_slices(LIRA_REFERENCES, MODEL_CHUNK))
    return {"chunk_models": MODEL_CHUNK, "chunk_steps": full_steps, "chunk_steps_timed": config.steps,
            "chunk_s": chunk, "chunk_target": target.name, "lira256_chunks": chunks,
            "lira256_projected_s": {str(n): math.ceil(chunks / n) * chunk for n in PROJECTED_WORKERS}}


def run(quick: bool, device: torch.device, repeats: int | None, flagship: bool) -> dict:
    """All measurements; returns the JSON-ready results."""
    preset = QUICK if quick else FULL
    repeats = max(3, repeats or preset["repeats"])
    load_start = os.getloadavg()
    mnist = _mnist(preset)
    rng = np.random.default_rng(0)
    n, batch = len(mnist), preset["batch"]
    q = batch / n
    epoch = dict(arch="cnn", epochs=1.0, sample_rate=q, lr=LR, expected_batch_size=batch)
    np_config = TrainConfig(**epoch)
    dp_config = TrainConfig(**epoch, clip_norm=CLIP, noise_multiplier=SIGMA)
    all_rows = np.ones((1, n), dtype=bool)

    digits = load_dataset("digits")
    r_models, n_train, model_batch = preset["models"], 800, 128
    masks = np.zeros((r_models, len(digits)), dtype=bool)
    for r in range(r_models):
        masks[r, rng.choice(len(digits), n_train, replace=False)] = True
    small = TrainConfig(arch="mlp", epochs=float(preset["model_epochs"]), sample_rate=model_batch / n_train, lr=LR,
                        expected_batch_size=model_batch, clip_norm=CLIP, noise_multiplier=SIGMA)
    seeds = list(range(100, 100 + r_models))

    opacus_state = None
    try:
        opacus_state = opacus_setup(mnist, batch, device, seed=0)
    except ImportError:
        pass

    def sequential():
        for r, seed in enumerate(seeds):
            train_models(digits, masks[r:r + 1], small, [seed], device=device, progress=False)

    dp_epoch = _dp_epoch(mnist, batch, device)
    jobs: dict[str, Callable[[], object]] = {
        "nonprivate_ours_s": lambda: train_models(mnist, all_rows, np_config, [0], device=device, progress=False),
        "nonprivate_torch_s": lambda: nonprivate_torch_epoch(mnist, batch, device, seed=0),
        "dpsgd_s": dp_epoch,
        "models_vectorised_s": lambda: train_models(digits, masks, small, seeds, device=device, progress=False),
        "models_sequential_s": sequential,
    }
    if opacus_state is not None:
        jobs["opacus_s"] = lambda: opacus_epoch(*opacus_state, device)
    samples: dict[str, list[float]] = {name: [] for name in jobs}
    cpu_samples: dict[str, list[float]] = {name: [] for name in jobs}
    for fn in jobs.values():  # warm-up: first-call costs (kernel selection, allocator) are not timed
        fn()
    threads_idle = training_threads()
    for _ in range(repeats):
        for name, fn in jobs.items():
            wall, cpu = _timed_under_policy(fn, device)
            samples[name].append(wall)
            cpu_samples[name].append(cpu)
    out: dict = {}
    for suffix, table_ in (("", samples), ("_cpu", cpu_samples), ("_min", samples)):
        pick = min if suffix == "_min" else statistics.median
        med = {name: pick(values) for name, values in table_.items()}
        fig = {f"{name[:-2]}{suffix}_s": value for name, value in med.items()}
        fig[f"nonprivate{suffix}_s"] = min(med["nonprivate_ours_s"], med["nonprivate_torch_s"])
        fig.setdefault(f"opacus{suffix}_s", float("nan"))
        fig[f"dpsgd_over_nonprivate{suffix}"] = fig[f"dpsgd{suffix}_s"] / fig[f"nonprivate{suffix}_s"]
        fig[f"opacus_over_ours{suffix}"] = fig[f"opacus{suffix}_s"] / fig[f"dpsgd{suffix}_s"]
        fig[f"vectorised_speedup{suffix}"] = fig[f"models_sequential{suffix}_s"] / fig[f"models_vectorised{suffix}_s"]
        out.update(fig)
    out["samples_s"] = samples
    out["cpu_samples_s"] = cpu_samples
    out["figures_note"] = ("plain keys: medians of wall time; *_cpu: medians of this process's CPU time (all threads); "
                           "*_min: fastest wall-time repeat (least disturbed by other load)")
    out["threads_idle"] = threads_idle
    out["threads_pinned"] = TRAINING_THREADS_ENV in os.environ
    out |= contended(dp_epoch, device, repeats)
    out["contended_slowdown"] = out["contended_s"] / out["dpsgd_s"]
    out |= parallel(quick, repeats, device)
    out["parallel_slowdown"] = out["parallel_s"] / out["dpsgd_s"]
    out |= threads_identical(dp_epoch)
    out |= executors(preset, device)
    out |= chunk_cost(preset, device)
    out["repeats"] = repeats
    out["quick"] = quick
    out["setup"] = {"cnn_data": f"MNIST, {n} images (embedded sample)", "batch": batch,
                    "steps_per_epoch": dp_config.steps, "clip_norm": CLIP, "noise_multiplier": SIGMA,
                    "models": r_models,
                    "small_models": f"mlp on digits, {n_train} training rows each, batch {model_batch}, "
                                    f"{small.steps} steps ({preset['model_epochs']} epochs), DP-SGD",
                    "opacus": "PrivacyEngine.make_private, poisson_sampling=True, grad_sample_mode=hooks"
                    if opacus_state is not None else "not installed",
                    "contention": "one busy-loop process (python -c 'while True: pass') started by the benchmark",
                    "parallel": "two processes, each timing the DP-SGD epoch after both warmed up"}
    out["peak_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1024**3
    if flagship:
        with tempfile.TemporaryDirectory() as tmp:
            out.update(flagship_peak(tmp))
    out["load_at_start"] = list(load_start)
    out["machine"] = machine_info(device) | {"load_average_start": list(load_start),
                                              "load_average_end": list(os.getloadavg())}
    out["targets"] = TARGETS
    met = {"dpsgd_over_nonprivate": out["dpsgd_over_nonprivate"] <= TARGETS["dpsgd_over_nonprivate_max"],
           "opacus_over_ours": out["opacus_over_ours"] >= TARGETS["opacus_over_ours_min"],
           "vectorised_speedup": out["vectorised_speedup"] >= TARGETS["vectorised_speedup_min"],
           "contended_slowdown": out["contended_slowdown"] <= TARGETS["contended_slowdown_max"]}
    if "flagship_peak_rss_gib" in out:
        met["flagship_peak_rss_gib"] = out["flagship_peak_rss_gib"] <= TARGETS["flagship_peak_rss_gib_max"]
    out["targets_met"] = met
    return out


def table(results: dict) -> str:
    """The performance table of docs/performance.md (Markdown) for these results."""
    m, r = results["machine"], results
    n_models = r["setup"]["models"]
    rows = [("non-private SGD, 1 epoch (faster of ours and plain PyTorch)", "nonprivate", None),
            ("our DP-SGD, 1 epoch", "dpsgd", ("dpsgd_over_nonprivate", "x non-private", "<= 1.3")),
            ("Opacus DP-SGD, 1 epoch", "opacus", ("opacus_over_ours", "x ours", ">= 2")),
            (f"{n_models} small DP models, one call", "models_vectorised", None),
            (f"{n_models} small DP models, one by one", "models_sequential",
             ("vectorised_speedup", "x slower than one call", ">= 5"))]
    lines = ["| measurement | wall time, median | CPU time, median | ratio: wall (CPU) | target |",
             "| --- | --- | --- | --- | --- |"]
    for label, key, ratio in rows:
        text, target = ("", "")
        if ratio:
            text = f"{r[ratio[0]]:.2f}{ratio[1]} ({r[ratio[0] + '_cpu']:.2f})"
            target = ratio[2]
        lines.append(f"| {label} | {r[key + '_s']:.2f} s | {r[key + '_cpu_s']:.2f} s | {text} | {target} |")
    lines.append(f"| our DP-SGD, 1 epoch, one busy-loop process beside it | {r['contended_s']:.2f} s | | "
                 f"{r['contended_slowdown']:.2f}x idle ({r['contended_threads']} thread(s)) | <= 2 |")
    lines.append(f"| our DP-SGD, 1 epoch, in two processes at once | {r['parallel_s']:.2f} s | | "
                 f"{r['parallel_slowdown']:.2f}x idle | no collapse |")
    executors_ = [("in this process", "inprocess"), (f"process pool, {r['executor_workers']} workers", "pool"),
                  (f"local Ray, {r['executor_workers']} CPUs", "ray")]
    for label, key in executors_:
        if f"executor_{key}_s" in r:
            lines.append(f"| {r['executor_models']} small DP models in {r['executor_chunks']} chunks, {label} "
                         f"(start-up included) | {r[f'executor_{key}_s']:.2f} s | | | |")
    lines.append(f"| one chunk of {r['chunk_target']} ({r['chunk_models']} CNNs, {r['chunk_steps']} steps, "
                 f"1 thread) | {r['chunk_s']:.1f} s | | | |")
    if "flagship_peak_rss_gib" in r:
        lines.append(f"| flagship audit (dpsgd_mnist), whole run | {r['flagship_wall_s']:.0f} s | | peak RSS "
                     f"{r['flagship_peak_rss_gib']:.2f} GiB | < 4 GiB |")
    projected = ", ".join(f"{n} worker(s) {s:.0f} s" if s < 90 else f"{n} worker(s) {s / 60:.0f} min"
                          for n, s in r["lira256_projected_s"].items())
    chosen_by = "pinned by --threads" if r.get("threads_pinned") else "policy, idle"
    machine = (f"{m.get('cpu_model') or m['processor']}, {m['cpus_usable']} usable cores, torch {m['torch']}, "
               f"{m['device']}{' ' + m['gpu'] if m.get('gpu') else ''}; training threads {r['threads_idle']} "
               f"({chosen_by}); load average {m['load_average_start'][0]:.1f} at start, "
               f"{m['load_average_end'][0]:.1f} at end")
    return ("\n".join(lines) + f"\n\nMachine: {machine}. {r['repeats']} repeats each. Results identical with 1 and "
            f"{r['threads_compared'][1]} threads: {r['threads_identical']}; on every executor: "
            f"{r['executors_identical']}. Projected training time of a LiRA audit of {r['chunk_target']} with "
            f"{LIRA_REFERENCES} reference models ({r['lira256_chunks']} chunks): {projected}.")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", required=True, help="where to write the results (JSON)")
    parser.add_argument("--quick", action="store_true", help="small sizes for CI (seconds); not the reported numbers")
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--repeats", type=int, default=None, help="timed repeats per measurement (at least 3)")
    parser.add_argument("--threads", type=int, default=None,
                        help=f"pin torch's training threads (sets {TRAINING_THREADS_ENV}; default: the thread policy)")
    parser.add_argument("--no-flagship", action="store_true",
                        help="skip timing the flagship audit's wall time and peak memory (always skipped with --quick)")
    parser.add_argument("--epoch-worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.epoch_worker:
        epoch_worker(args.epoch_worker, args.quick, max(3, args.repeats or 3), args.device)
        return 0
    if args.threads:
        os.environ[TRAINING_THREADS_ENV] = str(args.threads)
    device = resolve_device(args.device)
    results = run(args.quick, device, args.repeats, flagship=not (args.quick or args.no_flagship))
    results["table_markdown"] = table(results)
    write_json(args.json, results)
    print(results["table_markdown"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
