"""Tightness grid of the multi-run DP audits: epsilon lower bound vs epsilon theory.

    python benchmarks/bench_tightness.py --json OUT [--quick] [--only SUBSTRING]

Runs ``run dp`` (via :func:`audit.dp.sweep.sweep_rows`) for each (target, threat, canary, epsilon)
of the grid and writes ``{"rows": [...], "quick", "created", "host"}`` where every row has
``target, threat, canary, epsilon_theory, epsilon_lb, method, runs, models, init, wall_s`` (plus the
largest statistically valid bound ``epsilon_lb_valid`` and the ratio ``epsilon_lb / epsilon_theory``;
``models`` counts the audited runs and the calibration runs that fixed the threshold).
The full grid reproduces the threat-model ladder of Nasr et al. 2021/2023 on our targets and the
black-box audit from pre-trained initial parameters of Annamalai & De Cristofaro 2024; the
``--quick`` grid is the reduced one CI runs.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from audit.dp.options import SweepOptions  # noqa: E402

#: Black-box audits from worst-case initial parameters (Annamalai & De Cristofaro 2024): the model pre-trained
from audit.dp.sweep import audit_timing_key, sweep_rows  # noqa: E402
from audit.io import write_json  # noqa: E402
from audit.run_context import host_info, utc_now  # noqa: E402

#: Black-box audits from worst-case initial parameters (Annamalai & De Cristofaro 2024): the model pre-trained
#: without privacy on a disjoint half, the blank canary, the threshold fixed on as many calibration runs.
PRETRAINED = {"init": "pretrained", "calibration_runs": 200}
#: (target, threat, canary, epsilons, runs[, other sweep options]): the full grid
FULL_GRID = [
    ("dpgd_logreg_digits", "updates", "dirac", (2.0, 4.0, 8.0), 16000),
    ("dpsgd_audit_logreg_digits", "updates", "dirac", (2.0,), 16000),
    ("dpsgd_audit_logreg_digits", "updates", "dirac", (4.0, 8.0), 8000),
    ("dperm_digits_nobias", "white-box", "crafted", (1.0, 2.0, 4.0, 8.0), 2_000_000),
    ("dperm_digits", "white-box", "crafted", (1.0, 8.0), 2_000_000),
    ("dpgd_logreg_digits", "white-box", "dirac", (4.0,), 4000),
    ("dpgd_logreg_digits", "black-box", "crafted", (4.0,), 4000),
    ("dpsgd_logreg_mnist", "black-box", "crafted", (10.0,), 200),
    ("dpgd_logreg_mnist", "black-box", "blank", (1.0, 2.0, 4.0, 10.0), 200, PRETRAINED),
    ("dpgd_logreg_mnist", "black-box", "blank", (10.0,), 200, {"init": "random", "calibration_runs": 200}),
]
#: the reduced grid (CI)
QUICK_GRID = [
    ("dpgd_logreg_digits", "updates", "dirac", (4.0,), 400),
    ("dpsgd_audit_logreg_digits", "updates", "dirac", (4.0,), 200),
    ("dperm_breast_cancer", "white-box", "crafted", (2.0,), 20000),
]

KEYS = ("target", "threat", "canary", "epsilon_theory", "epsilon_lb", "method", "runs", "models", "init", "wall_s",
        "epsilon_lb_valid", "epsilon_claimed", "bounds")


def run_grid(grid: list[tuple], quick: bool, seed: int, out: Path, device: str) -> list[dict]:
    """One row per grid cell and epsilon."""
    rows = []
    for target, threat, canary, epsilons, runs, *extra in grid:
        opts = SweepOptions(target=target, epsilons=epsilons, threats=(threat,), canary=canary, runs=runs,
                            out=str(out), seed=seed, device=device, quick=quick, quiet=True,
                            **(extra[0] if extra else {}))
        timing: dict[str, float] = {}
        for row in sweep_rows(opts, out, timing):
            wall_s = timing[audit_timing_key(row.run_dir)]
            entry = {k: wall_s if k == "wall_s" else getattr(row, k) for k in KEYS}
            entry["ratio"] = (row.epsilon_lb / row.epsilon_theory) if row.epsilon_theory else None
            for key in ("mu_lb", "mu_step_lb", "noise_multiplier_ub", "minimiser_shift"):
                if key in row.details:
                    entry[key] = row.details[key]
            rows.append(entry)
            print(f"{target:<28} {threat:<10} {canary:<8} eps {row.epsilon_theory:6.3f}  "
                  f"lb {row.epsilon_lb:6.3f} "
                  f"({row.method}; valid CP {row.epsilon_lb_valid:.3f})  runs {runs}  models {row.models} "
                  f"({row.init} init)  {wall_s:.1f} s", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", required=True, help="output JSON file")
    parser.add_argument("--quick", action="store_true", help="the reduced grid (CI)")
    parser.add_argument("--only", default=None, help="keep grid cells whose target contains this text")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu", choices=["auto", "cpu", "cuda"])
    args = parser.parse_args(argv)
    grid = QUICK_GRID if args.quick else FULL_GRID
    if args.only:
        grid = [cell for cell in grid if args.only in cell[0]]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-tightness-") as tmp:
        rows = run_grid(grid, args.quick, args.seed, Path(tmp), args.device)
    write_json(args.json, {"rows": rows, "quick": args.quick, "seed": args.seed, "created": utc_now(),
                           "host": host_info(), "wall_s": time.perf_counter() - started})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
