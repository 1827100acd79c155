"""What the JAX hooks cost a jitted DP-SGD step outside an audit (targets/jax_hooks.py; issue 41 asks at most
1.5x): the same step compiled by ``jax.jit`` without the hooks and by ``targets.jax_hooks.jit`` with them, timed
interleaved, on two sizes — the JAX zoo's softmax regression on 300 digits (650 parameters) and a tiny step (8
rows, 4 parameters) where the wrapper's fixed cost per call weighs most. Also the step during an audit (a probe
recorder: the hooks' host callbacks and the wait for them), for information.

Each repetition runs ``--steps`` steps and waits for the result (``block_until_ready``); the figure per step is
the median over ``--repeats`` repetitions. The machine's load average (``os.getloadavg``) is recorded before and
after: on a busy machine the ratio is noisy, and only a ratio measured on one machine at one time means anything.

Usage: ``python benchmarks/bench_jax_hooks.py --json OUT [--steps 200] [--repeats 9]``.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from audit.io import write_json  # noqa: E402
from targets import jax_hooks  # noqa: E402
from targets.audit_hooks import UpdateRecorder, recording  # noqa: E402
from targets.datasets import load_digits  # noqa: E402

CLIP, RATE, SIGMA, LR = 1.0, 0.1, 1.4, 2.0


def _loss(params: dict, x: jax.Array, label: jax.Array) -> jax.Array:
    return -jax.nn.log_softmax(params["w"] @ x + params["b"])[label]


def dp_step(params: dict, key: jax.Array, X: jax.Array, y: jax.Array, hooked: bool) -> dict:
    """One DP-SGD step (Poisson mask, per-example clipping, Gaussian noise), with or without the hooks."""
    k_mask, k_noise = jax.random.split(key)
    mask = jax.random.uniform(k_mask, (X.shape[0],)) < RATE
    grads = jax.vmap(jax.grad(_loss), in_axes=(None, 0, 0))(params, X, y)
    norms = jnp.sqrt(sum(jnp.sum(g.reshape(len(X), -1) ** 2, axis=1) for g in jax.tree.leaves(grads)))
    factor = mask * jnp.minimum(1.0, CLIP / (norms + 1e-12))
    summed = jax.tree.map(lambda g: jnp.tensordot(factor, g, axes=1), grads)
    if hooked:
        summed = jax_hooks.add_canary(summed, clip_norm=CLIP, sample_rate=RATE, batch=mask)
    keys = dict(zip(sorted(summed), jax.random.split(k_noise, len(summed)), strict=True))
    noisy = {k: g + SIGMA * CLIP * jax.random.normal(keys[k], g.shape) for k, g in summed.items()}
    if hooked:
        jax_hooks.report_update(noisy)
    return jax.tree.map(lambda p, g: p - LR * g / (RATE * X.shape[0]), params, noisy)


def _loop(step: Callable, params: dict, X: jax.Array, y: jax.Array, steps: int) -> float:
    """Seconds per step of ``steps`` steps, waiting for the last."""
    keys = jax.random.split(jax.random.key(0), steps)
    start = time.perf_counter()
    for t in range(steps):
        params = step(params, keys[t], X, y)
    jax.block_until_ready(params)
    return (time.perf_counter() - start) / steps


def measure(name: str, X: jax.Array, y: jax.Array, n_classes: int, steps: int, repeats: int) -> dict:
    """Median seconds per step of the plain and the hooked step, interleaved, and the audited step."""
    params = {"w": jnp.zeros((n_classes, X.shape[1])), "b": jnp.zeros(n_classes)}
    plain = jax.jit(functools.partial(dp_step, hooked=False))
    hooked = jax_hooks.jit(functools.partial(dp_step, hooked=True))
    for step in (plain, hooked):  # compile outside the timing
        _loop(step, params, X, y, 2)
    times = {"jax.jit": [], "jax_hooks.jit": []}
    for _ in range(repeats):
        times["jax.jit"].append(_loop(plain, params, X, y, steps))
        times["jax_hooks.jit"].append(_loop(hooked, params, X, y, steps))
    with recording(UpdateRecorder(None, 0)):
        _loop(hooked, params, X, y, 2)
        audited = [_loop(hooked, params, X, y, max(steps // 10, 5)) for _ in range(3)]
    base, hook = statistics.median(times["jax.jit"]), statistics.median(times["jax_hooks.jit"])
    return {"case": name, "rows": int(X.shape[0]), "parameters": int(X.shape[1] * n_classes + n_classes),
            "step_us": {"jax.jit": round(base * 1e6, 1), "jax_hooks.jit": round(hook * 1e6, 1),
                        "during_an_audit": round(statistics.median(audited) * 1e6, 1)},
            "ratio_hooked_over_plain": round(hook / base, 3),
            "all_us": {k: [round(v * 1e6, 1) for v in vs] for k, vs in times.items()}}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", required=True, help="where to write the results")
    parser.add_argument("--steps", type=int, default=200, help="steps per repetition (default 200)")
    parser.add_argument("--repeats", type=int, default=9, help="interleaved repetitions (default 9)")
    args = parser.parse_args(argv)
    digits = load_digits()
    load_before = os.getloadavg()
    cases = [measure("softmax regression, 300 digits", jnp.asarray(digits.X[:300]), jnp.asarray(digits.y[:300]), 10,
                     args.steps, args.repeats),
             measure("tiny: 8 rows, 4 parameters", jnp.asarray(np.linspace(0, 1, 8, dtype=np.float32)[:, None]),
                     jnp.asarray(np.arange(8) % 2), 2, args.steps, args.repeats)]
    result = {"cases": cases, "jax": jax.__version__, "steps": args.steps, "repeats": args.repeats,
              "load_average_before": load_before, "load_average_after": os.getloadavg(), "cpu_count": os.cpu_count(),
              "worst_ratio": max(c["ratio_hooked_over_plain"] for c in cases)}
    write_json(Path(args.json), result)
    for case in cases:
        print(f"{case['case']}: jax.jit {case['step_us']['jax.jit']} us/step, jax_hooks.jit "
              f"{case['step_us']['jax_hooks.jit']} us/step (x{case['ratio_hooked_over_plain']}), during an audit "
              f"{case['step_us']['during_an_audit']} us/step")
    print(f"load {load_before[0]:.1f} -> {result['load_average_after'][0]:.1f} on {os.cpu_count()} cores")
    return result


if __name__ == "__main__":
    main()
