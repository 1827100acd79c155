"""``python -m audit run dp --target NAME --runs R --canary KIND --threat MODEL``: multi-run DP audit."""

from __future__ import annotations

import argparse

from audit.canaries import CANARY_KINDS
from audit.commands.run import positive_int
from audit.run_dp import THREATS, DPOptions, run_dp, summary_lines


def _confidence(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {text!r}") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"confidence must lie strictly between 0 and 1, got {value}")
    return value


def execute(args: argparse.Namespace) -> dict:
    opts = DPOptions(**DPOptions.common_kwargs(args), runs=args.runs, canary=args.canary, threat=args.threat, confidence=args.confidence)
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
                             "mislabelled, crafted (input canaries; crafted = low-variance direction, or the crafted "
                             "pair for DP-ERM)")
    parser.add_argument("--threat", default="updates", choices=THREATS,
                        help="what the adversary sees: black-box (final model's loss), white-box (final "
                             "parameters), updates (every intermediate update); default updates")
    parser.add_argument("--confidence", type=_confidence, default=0.95, help="confidence of the bounds (default 0.95)")
    parser.set_defaults(func=execute)
