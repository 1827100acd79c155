"""Training benchmark: non-private SGD, our DP-SGD, Opacus DP-SGD, and many models at once.

One process, one run; every figure is the median of ``--repeats`` (at least 3) timed repeats, the
measurements interleaved round-robin so that a change in machine load hits all of them alike.

* ``nonprivate_s`` — one epoch of non-private SGD on the MNIST CNN (``targets.models`` ``cnn``) at
  expected batch 256 with Poisson batches: the faster of our trainer (``nonprivate_ours_s``) and a
  plain ``torch.nn.Module`` + ``torch.optim.SGD`` loop (``nonprivate_torch_s``).
* ``dpsgd_s`` — one epoch of our DP-SGD (``targets.training.train_models``: Poisson sampling,
  per-example clipping with ghost norms / book-keeping, Gaussian noise), same CNN, data and batch.
* ``opacus_s`` — one epoch of Opacus DP-SGD (``PrivacyEngine.make_private``, Poisson sampling,
  default hook-based per-sample gradients), same CNN (``targets.models.to_module``), data, batch.
* ``models_vectorised_s`` / ``models_sequential_s`` — R small DP models (the ``dpsgd_digits`` MLP on
  scikit-learn digits) trained in one ``train_models`` call, and one call per model.

Usage: ``python benchmarks/bench_training.py --json OUT [--quick] [--device auto|cpu|cuda]``.
``--quick`` shrinks the data and the model count (for CI); its numbers are not the reported ones.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from audit.io import write_json  # noqa: E402
from targets.datasets import Dataset, load_dataset  # noqa: E402
from targets.models import get_architecture, init_params, to_module  # noqa: E402
from targets.training import TrainConfig, resolve_device, train_models  # noqa: E402

#: Performance targets (2-core CPU): DP-SGD / non-private <= 1.3, Opacus / ours >= 1.5, R models >= 5x.
TARGETS = {"dpsgd_over_nonprivate_max": 1.3, "opacus_over_ours_min": 1.5, "vectorised_speedup_min": 5.0,
           "flagship_peak_rss_gib_max": 4.0}
FULL = {"n_images": 5000, "batch": 256, "models": 32, "model_epochs": 5, "repeats": 3}
QUICK = {"n_images": 512, "batch": 128, "models": 4, "model_epochs": 1, "repeats": 3}
CLIP, SIGMA, LR = 1.0, 1.0, 2.0


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


def run(quick: bool, device: torch.device, repeats: int | None, flagship: bool) -> dict:
    """All measurements; returns the JSON-ready results."""
    preset = QUICK if quick else FULL
    repeats = max(3, repeats or preset["repeats"])
    load_start = os.getloadavg()
    mnist = load_dataset("mnist")
    rng = np.random.default_rng(0)
    if preset["n_images"] < len(mnist):
        mnist = mnist.subset(np.sort(rng.choice(len(mnist), preset["n_images"], replace=False)))
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

    jobs: dict[str, Callable[[], object]] = {
        "nonprivate_ours_s": lambda: train_models(mnist, all_rows, np_config, [0], device=device, progress=False),
        "nonprivate_torch_s": lambda: nonprivate_torch_epoch(mnist, batch, device, seed=0),
        "dpsgd_s": lambda: train_models(mnist, all_rows, dp_config, [0], device=device, progress=False),
        "models_vectorised_s": lambda: train_models(digits, masks, small, seeds, device=device, progress=False),
        "models_sequential_s": sequential,
    }
    if opacus_state is not None:
        jobs["opacus_s"] = lambda: opacus_epoch(*opacus_state, device)
    samples: dict[str, list[float]] = {name: [] for name in jobs}
    cpu_samples: dict[str, list[float]] = {name: [] for name in jobs}
    for fn in jobs.values():  # warm-up: first-call costs (kernel selection, allocator) are not timed
        fn()
    for _ in range(repeats):
        for name, fn in jobs.items():
            wall, cpu = _timed(fn, device)
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
    out["repeats"] = repeats
    out["quick"] = quick
    out["setup"] = {"cnn_data": f"MNIST, {n} images (embedded sample)", "batch": batch, "steps_per_epoch": dp_config.steps,
                    "clip_norm": CLIP, "noise_multiplier": SIGMA, "models": r_models,
                    "small_models": f"mlp on digits, {n_train} training rows each, batch {model_batch}, "
                                    f"{small.steps} steps ({preset['model_epochs']} epochs), DP-SGD",
                    "opacus": "PrivacyEngine.make_private, poisson_sampling=True, grad_sample_mode=hooks"
                    if opacus_state is not None else "not installed"}
    out["peak_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1024**3
    if flagship:
        with tempfile.TemporaryDirectory() as tmp:
            out.update(flagship_peak(tmp))
    out["machine"] = machine_info(device) | {"load_average_start": list(load_start),
                                              "load_average_end": list(os.getloadavg())}
    out["targets"] = TARGETS
    met = {"dpsgd_over_nonprivate": out["dpsgd_over_nonprivate"] <= TARGETS["dpsgd_over_nonprivate_max"],
           "opacus_over_ours": out["opacus_over_ours"] >= TARGETS["opacus_over_ours_min"],
           "vectorised_speedup": out["vectorised_speedup"] >= TARGETS["vectorised_speedup_min"]}
    if "flagship_peak_rss_gib" in out:
        met["flagship_peak_rss_gib"] = out["flagship_peak_rss_gib"] <= TARGETS["flagship_peak_rss_gib_max"]
    out["targets_met"] = met
    return out


def table(results: dict) -> str:
    """The README performance table (Markdown) for these results."""
    m, r = results["machine"], results
    n_models = r["setup"]["models"]
    rows = [("non-private SGD, 1 epoch (faster of ours and plain PyTorch)", "nonprivate", None),
            ("our DP-SGD, 1 epoch", "dpsgd", ("dpsgd_over_nonprivate", "x non-private", "<= 1.3")),
            ("Opacus DP-SGD, 1 epoch", "opacus", ("opacus_over_ours", "x ours", ">= 1.5")),
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
    if "flagship_peak_rss_gib" in r:
        lines.append(f"| flagship audit (dpsgd_mnist), whole run | {r['flagship_wall_s']:.0f} s | | peak RSS "
                     f"{r['flagship_peak_rss_gib']:.2f} GiB | < 4 GiB |")
    machine = (f"{m.get('cpu_model') or m['processor']}, {m['cpus_usable']} cores, {m['torch_threads']} torch threads, "
               f"torch {m['torch']}, {m['device']}{' ' + m['gpu'] if m.get('gpu') else ''}; load average "
               f"{m['load_average_start'][0]:.1f} at start, {m['load_average_end'][0]:.1f} at end")
    return "\n".join(lines) + f"\n\nMachine: {machine}. {r['repeats']} repeats each."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", required=True, help="where to write the results (JSON)")
    parser.add_argument("--quick", action="store_true", help="small sizes for CI (seconds); not the reported numbers")
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--repeats", type=int, default=None, help="timed repeats per measurement (at least 3)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--no-flagship", action="store_true",
                        help="skip timing the flagship audit's wall time and peak memory (always skipped with --quick)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    results = run(args.quick, device, args.repeats, flagship=not (args.quick or args.no_flagship))
    results["table_markdown"] = table(results)
    write_json(args.json, results)
    print(results["table_markdown"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
