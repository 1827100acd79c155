"""Thread-policy benchmark: a scikit-learn fit inside a trainer plugin, with the libraries' default
thread pools and with the plugin thread policy (:mod:`targets.threads`, 1 thread per pool).

Each fit goes through the path a ``run dp`` audit takes (:func:`audit.plugins.training.train_once`):
``LogisticRegression(max_iter=200)`` on 1,000 scikit-learn digits, the randomness adapted to the
plugin. ``PRIVACY_AUDIT_PLUGIN_THREADS`` is set to 0 (no limit) or 1 around each batch; batches are
interleaved, and each figure is the median over ``--repeats`` batches of the median fit time.

Usage: ``python benchmarks/bench_plugin_threads.py --json OUT [--fits N] [--repeats R]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from audit.io import write_json  # noqa: E402
from audit.plugins.training import train_once  # noqa: E402
from targets.datasets import load_dataset  # noqa: E402
from targets.plugins.loading import plugin_from_dict  # noqa: E402
from targets.threads import THREADS_ENV  # noqa: E402


def _train(X: np.ndarray, y: np.ndarray, random_state: int):
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(max_iter=200, random_state=random_state).fit(X / 16.0, y).predict_proba


def _batch(plugin, X: np.ndarray, y: np.ndarray, fits: int, threads: str) -> float:
    os.environ[THREADS_ENV] = threads
    times = []
    for seed in range(fits):
        t0 = time.perf_counter()
        train_once(plugin, X, y, seed)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", required=True)
    parser.add_argument("--fits", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    import torch
    from threadpoolctl import threadpool_info

    data = load_dataset("digits")
    X, y = data.X[:1000].reshape(1000, -1), data.y[:1000]
    plugin = plugin_from_dict("bench", {"kind": "trainer", "dataset": "digits", "train": _train,
                                        "claim": {"epsilon": 1.0}, "rng": "seed"})
    previous = os.environ.get(THREADS_ENV)
    _batch(plugin, X, y, 2, "1")  # warm-up
    runs: dict[str, list[float]] = {"default": [], "limited": []}
    for _ in range(args.repeats):
        runs["default"].append(_batch(plugin, X, y, args.fits, "0"))
        runs["limited"].append(_batch(plugin, X, y, args.fits, "1"))
    if previous is None:
        os.environ.pop(THREADS_ENV, None)
    else:
        os.environ[THREADS_ENV] = previous
    default, limited = statistics.median(runs["default"]), statistics.median(runs["limited"])
    out = {"fit_default_threads_s": default, "fit_one_thread_s": limited, "slowdown": default / limited,
           "batches": runs, "fits_per_batch": args.fits, "cpus": os.cpu_count(), "load_average": os.getloadavg(),
           "torch_threads": torch.get_num_threads(),
           "pools": [(p["internal_api"], p["num_threads"]) for p in threadpool_info()]}
    write_json(Path(args.json), out)
    print(f"sklearn fit in a trainer plugin: default threads {default:.3f} s, 1 thread {limited:.3f} s "
          f"({default / limited:.1f}x slower with the defaults; load average {out['load_average'][0]:.1f} "
          f"on {out['cpus']} cores)")
    return out


if __name__ == "__main__":
    main()
