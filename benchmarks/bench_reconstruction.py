"""DP-ERM reconstruction against epsilon: the informed adversary's closed-form attack on output perturbation.

    python benchmarks/bench_reconstruction.py --json OUT [--quick] [--target dperm_digits]

For each epsilon of the sweep, the n-candidate game of ``run reconstruction`` on a DP-ERM target
(:func:`audit.reconstruction.dperm.dperm_games`, the same seeded pool, candidates and rounds at every
epsilon): the released parameters are the exact minimiser plus ``N(0, sigma^2 I)``, sigma calibrated to
(epsilon, delta) by the target's mechanism. Each round the adversary picks a candidate
(:func:`attacks.reconstruction.select_glm_candidate`) and reconstructs the record itself from the
first-order condition (:func:`attacks.reconstruction.reconstruct_glm_record`; Balle, Cherubin & Hayes,
S&P 2022). The row ``epsilon = null`` ("no noise") releases the exact minimiser (the runner's
non-private twin). Writes ``{"target", "delta", "l2_reg", "counts", "runs", "seed", "quick", "rows",
"created", "host"}``; each row has ``epsilon, sigma, mu, wall_s`` and per candidate count
``n_candidates, kappa, success, success_ci`` (two-sided Clopper-Pearson, Bonferroni over the counts, 95%
together), ``rero_bound`` (``1 - f(kappa)`` of the claim; null without noise) and
``record_error_median`` (median relative L2 error of the reconstructed record's features).
docs/references.md, "Reconstruction robustness".
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from audit.io import write_json  # noqa: E402
from audit.reconstruction.dperm import dperm_games  # noqa: E402
from audit.reconstruction.game import GameResult, reconstruction_section  # noqa: E402
from audit.run_context import host_info, utc_now  # noqa: E402
from targets.dperm import DPERM, DPERM_TARGETS  # noqa: E402

#: Epsilons of the sweep (the full and the quick one).
EPSILONS = (0.5, 1.0, 2.0, 4.0, 8.0, 1e2, 1e4, 1e6)
QUICK_EPSILONS = (0.5, 8.0, 1e4, 1e6)
#: (candidate counts, rounds per count) of the full and the quick sweep.
FULL = ((10, 100), 200)
QUICK = ((10,), 40)
CONFIDENCE = 0.95


def sweep(target: str, epsilons: tuple[float, ...], counts: tuple[int, ...], runs: int, seed: int) -> list[dict]:
    """One row per epsilon plus the no-noise row (first), each with one point per candidate count."""
    spec = DPERM_TARGETS[target]
    minimisers: dict[int, np.ndarray] = {}  # the exact minimisers do not depend on epsilon: fitted once
    rows = []
    for i, eps in enumerate(epsilons):
        start = time.perf_counter()
        games, _, erm = dperm_games(target, lambda n, e=eps: DPERM(e, spec["delta"], spec["l2_reg"], n), counts,
                                    runs, seed, twin=i == 0, minimisers=minimisers)
        wall = time.perf_counter() - start
        if i == 0:  # the twin: the same rounds with the exact minimiser released
            twins = [GameResult(g.n, g.twin_successes, g.runs, None, record_error_median=g.twin_record_error_median)
                     for g in games]
            rows.append({"epsilon": None, "sigma": 0.0, "mu": None, "wall_s": None,
                         "points": _points(twins, None)})
            games = [GameResult(g.n, g.successes, g.runs, None, record_error_median=g.record_error_median)
                     for g in games]
        rows.append({"epsilon": eps, "sigma": erm.sigma, "mu": erm.mu, "wall_s": wall,
                     "points": _points(games, erm.claim)})
    return rows


def _points(games: list[GameResult], claim) -> list[dict]:
    keys = ("n_candidates", "kappa", "runs", "success", "success_ci", "rero_bound", "record_error_median")
    section = reconstruction_section(games, claim, CONFIDENCE, "white-box")
    return [{k: p[k] for k in keys} for p in section["points"]]


def table(rows: list[dict]) -> str:
    """The sweep as a Markdown table."""
    counts = [p["n_candidates"] for p in rows[0]["points"]]
    head = ["epsilon", "sigma", "mu", "median record error"] + [
        f"success n={n} [CI] (ReRo bound)" for n in counts]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = ["no noise" if r["epsilon"] is None else f"{r['epsilon']:g}", f"{r['sigma']:.4g}",
                 "inf" if r["mu"] is None else f"{r['mu']:.4g}",
                 " / ".join(f"{p['record_error_median']:.3g}" for p in r["points"])]
        for p in r["points"]:
            bound = "–" if p["rero_bound"] is None else f"{p['rero_bound']:.3f}"
            cells.append(f"{p['success']:.3f} [{p['success_ci'][0]:.3f}, {p['success_ci'][1]:.3f}] ({bound})")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", required=True, help="output JSON file")
    parser.add_argument("--quick", action="store_true", help="the reduced sweep (CI)")
    parser.add_argument("--target", default="dperm_digits", choices=sorted(DPERM_TARGETS))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    counts, runs = QUICK if args.quick else FULL
    epsilons = QUICK_EPSILONS if args.quick else EPSILONS
    rows = sweep(args.target, epsilons, counts, runs, args.seed)
    spec = DPERM_TARGETS[args.target]
    write_json(args.json, {"target": args.target, "delta": spec["delta"], "l2_reg": spec["l2_reg"],
                           "counts": list(counts), "runs": runs, "seed": args.seed, "quick": args.quick,
                           "rows": rows, "created": utc_now(), "host": host_info()})
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
