"""How often float32 Gaussian generators return an exact 0.0 (issue 50, item 5), measured on this machine.

The noise-coverage test of :mod:`audit.stats.noise_check` counts the coordinates whose noise is exactly 0 at
every step; under a correct loop that count is governed by the per-draw probability of an exact zero of the
generator, which rounding of ``N(0, s^2)`` to float32 alone makes negligible (``|x| < 2^-150``: about
``0.8 x 2^-150 / s``) but which the generators' algorithms make far larger:

* ``torch.randn`` / ``torch.normal`` on the CPU (float32, tensors of at least 16 elements): Box-Muller on
  blocks of 16 uniforms on the 2^-24 grid, ``u1 = 1 - U_j``, ``u2 = U_{j+8}``, output ``j`` =
  ``sqrt(-2 log u1) cos(2 pi u2)``, output ``j + 8`` = ``sqrt(-2 log u1) sin(2 pi u2)``: ``U_j = 0`` zeroes
  both outputs of the pair, ``U_{j+8} = 0`` the sine; ``1.5 x 2^-24 = 8.94e-8`` per draw on average,
  zeros coming in pairs (``j``, ``j + 8``) half of the time.
* ``jax.random.normal`` (float32): ``sqrt(2) erfinv(u)``, ``u`` uniform on a grid that does not hold 0.
* ``numpy.random.Generator.standard_normal(dtype=float32)``: the float32 ziggurat.

Writes ``benchmarks/results_float32_zeros.json``: per generator the draws, the zeros, the rate, its
one-sided 99.9% Clopper-Pearson upper limit, and for torch how many zeros had their Box-Muller partner
zero too. Usage: ``python benchmarks/float32_zeros.py [--draws 1e9] [--chunk 1e8]``.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np
from scipy import stats

OUT = Path(__file__).with_name("results_float32_zeros.json")


def _upper(zeros: int, draws: int, level: float = 0.999) -> float:
    """One-sided Clopper-Pearson upper limit of the rate at ``level``."""
    return float(stats.beta.ppf(level, zeros + 1, draws - zeros)) if zeros < draws else 1.0


def _torch(kind: str, draws: int, chunk: int) -> dict:
    import torch

    gen = torch.Generator().manual_seed(20260)
    zeros = partnered = 0
    done = 0
    while done < draws:
        n = min(chunk, draws - done)
        x = (torch.randn(n, generator=gen) if kind == "randn" else
             torch.normal(0.0, 1.7, size=(n,), generator=gen))
        idx = torch.nonzero(x == 0).flatten().numpy()
        zeros += idx.size
        block = (n // 16) * 16
        inside = idx[idx < block]
        partner = np.where(inside % 16 < 8, inside + 8, inside - 8)
        partnered += int(np.isin(partner, idx).sum())
        done += n
    return {"generator": f"torch.{kind} float32 CPU ({torch.__version__})", "draws": draws, "zeros": zeros,
            "rate": zeros / draws, "upper_99.9": _upper(zeros, draws), "zeros_with_partner_zero": partnered,
            "theory": 1.5 * 2.0 ** -24}


def _jax(draws: int, chunk: int) -> dict:
    import jax

    key = jax.random.PRNGKey(20260)
    zeros = done = 0
    count = jax.jit(lambda k, n: (jax.random.normal(k, (n,), dtype="float32") == 0).sum(), static_argnums=1)
    while done < draws:
        n = min(chunk, draws - done)
        key, sub = jax.random.split(key)
        zeros += int(count(sub, n))
        done += n
    return {"generator": f"jax.random.normal float32 CPU ({jax.__version__}, {jax.config.jax_default_prng_impl})",
            "draws": draws, "zeros": zeros, "rate": zeros / draws, "upper_99.9": _upper(zeros, draws)}


def _numpy(draws: int, chunk: int) -> dict:
    rng = np.random.default_rng(20260)
    zeros = done = 0
    while done < draws:
        n = min(chunk, draws - done)
        zeros += int(np.count_nonzero(rng.standard_normal(n, dtype=np.float32) == 0))
        done += n
    return {"generator": f"numpy Generator.standard_normal float32 ({np.__version__})", "draws": draws,
            "zeros": zeros, "rate": zeros / draws, "upper_99.9": _upper(zeros, draws)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--draws", type=float, default=1e9)
    parser.add_argument("--chunk", type=float, default=1e8)
    parser.add_argument("--only", choices=["torch", "jax", "numpy"], nargs="*")
    args = parser.parse_args()
    draws, chunk = int(args.draws), int(args.chunk)
    rows = []
    for name, run in [("torch", lambda: [_torch("randn", draws, chunk), _torch("normal", draws, chunk)]),
                      ("jax", lambda: [_jax(draws, chunk)]), ("numpy", lambda: [_numpy(draws, chunk)])]:
        if args.only and name not in args.only:
            continue
        start = time.perf_counter()
        for row in run():
            row["seconds"] = round(time.perf_counter() - start, 1)
            rows.append(row)
            print(json.dumps(row), flush=True)
    result = {"machine": platform.platform(), "processor": platform.processor() or platform.machine(),
              "date": time.strftime("%Y-%m-%d"), "results": rows}
    OUT.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
