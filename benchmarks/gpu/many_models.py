"""Reference models trained many at once: ``R`` DP-SGD models of a built-in target's architecture (the
flagship's CNN on MNIST by default) in one call of :func:`targets.training.train_models` (stacked parameters,
``torch.func.vmap`` over the model axis, chunked by the memory plan), each on a random half of the target's
training rows, for ``--steps`` steps; prints one JSON line with the wall seconds of the training alone (the
data loaded and the first call's set-up excluded by a one-step warm-up).

Usage: ``python benchmarks/gpu/many_models.py --device cuda --models 64 --steps 20``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from targets.catalogue import trained_target  # noqa: E402
from targets.datasets import load_dataset  # noqa: E402
from targets.training import resolve_device, train_models  # noqa: E402


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="dpsgd_mnist")
    parser.add_argument("--models", type=int, default=64)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    args = parser.parse_args(argv)
    device = resolve_device(args.device)
    target = trained_target(args.target)
    data = load_dataset(target.dataset)
    data = data.subset(np.arange(min(len(data), target.n_train)))
    full = target.train_config(target.noise_multiplier())
    config = dataclasses.replace(full, epochs=args.steps * full.sample_rate)  # args.steps steps
    masks = np.random.default_rng(0).random((args.models, len(data))) < 0.5
    seeds = list(range(args.models))
    warm = dataclasses.replace(config, epochs=full.sample_rate)
    train_models(data, masks[:1], warm, seeds[:1], device=device, progress=False)
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    train_models(data, masks, config, seeds, device=device, progress=False)
    if device.type == "cuda":
        torch.cuda.synchronize()
    out = {"device": device.type, "target": args.target, "models": args.models, "steps": args.steps,
           "wall_s": time.perf_counter() - start}
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
