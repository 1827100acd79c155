"""``python -m audit run dp --target NAME --runs R --canary KIND --threat MODEL``: multi-run DP audit."""

from __future__ import annotations

import argparse

from audit.canaries import CANARY_KINDS
from audit.commands.run import positive_int
from audit.run_dp import INITS, THREATS, DPOptions, run_dp, summary_lines


def execute(args: argparse.Namespace) -> dict:
    opts = DPOptions(**DPOptions.common_kwargs(args), runs=args.runs, canary=args.canary, threat=args.threat,
                     init=args.init, calibration_runs=args.calibration_runs)
    run_dir, results = run_dp(opts)
    print("\n".join(summary_lines(run_dir, results)))
    return results  # audit.commands.run.gated turns a violation into exit 1 under --fail-above-claim


def register(kinds: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = kinds.add_parser(
        "dp", parents=[common], help="multi-run DP audit: canary in by fair coins, CP/GDP/per-step bounds",
        description="Train R runs of a DP target (vectorised), each with the canary by a fair coin, score the "
                    "canary under a threat model and bound epsilon from below: Clopper-Pearson (valid), GDP "
                    "(Gaussian tradeoff) and, for --threat updates, per-step observations composed by the "
                    "accountant. Thresholds are chosen on half of the runs and the bounds use the other half.")
    parser.add_argument("--runs", type=positive_int, default=None,
                        help="training runs R (default: 4000 for DP-SGD updates/white-box, 1000 black-box, "
                             "2000000 noise draws for DP-ERM; --quick: 400 / 20000)")
    parser.add_argument("--canary", default="dirac", choices=CANARY_KINDS,
                        help="canary: dirac/gradient (gradient canaries, DP-SGD), dirac-replace (replace-one pair "
                             "on a crafted dataset: catches shuffled batches accounted as Poisson), natural, "
                             "mislabelled, crafted, blank (input canaries; crafted = low-variance direction, or the "
                             "crafted pair for DP-ERM; blank = all-zero input, last class)")
    parser.add_argument("--threat", default="updates", choices=THREATS,
                        help="what the adversary sees: black-box (final model's loss), white-box (final "
                             "parameters), updates (every intermediate update); default updates")
    parser.add_argument("--init", default="random", choices=INITS,
                        help="initial parameters of DP-SGD runs: random (each run's own) or pretrained (one model "
                             "trained without privacy on a disjoint half of the data; Annamalai & De Cristofaro 2024)")
    parser.add_argument("--calibration-runs", type=int, default=0, metavar="N",
                        help="black-box/white-box: train N more runs (own coins and seeds) and fix the threshold on "
                             "them (default 0: Bonferroni grid over thresholds)")
    parser.set_defaults(func=execute)
