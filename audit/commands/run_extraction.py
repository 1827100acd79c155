"""``python -m audit run extraction --target NAME``: steal a logistic-regression target through its API."""

from __future__ import annotations

import argparse

from audit.commands.run import positive_int
from audit.run_extraction import ExtractionOptions, run_extraction, summary_lines


def _decimals(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of decimals, got {text!r}") from None
    if not 0 <= value <= 15:
        raise argparse.ArgumentTypeError(f"expected 0 to 15 decimals, got {value}")
    return value


def execute(args: argparse.Namespace) -> int:
    opts = ExtractionOptions(target=args.target, out=args.out, seed=args.seed, device=args.device, quick=args.quick,
                             epsilon=args.epsilon, delta=args.delta, data_dir=args.data_dir, quiet=args.quiet,
                             round=args.round, queries=args.queries, label_queries=args.label_queries)
    run_dir, results = run_extraction(opts)
    print("\n".join(summary_lines(run_dir, results)))
    return 0


def register(kinds: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = kinds.add_parser("extraction", parents=[common],
                              help="steal a logistic-regression model through its prediction API (Tramèr et al. 2016)",
                              description="Equation-solving extraction of a softmax or binary logistic-regression "
                                          "target (d + 1 queries on exact outputs, weighted least squares on "
                                          "rounded outputs) and a label-only retraining baseline; reports queries, "
                                          "parameter error, agreement on test and uniform inputs, and for DP "
                                          "targets that the stolen model is the released noisy one.")
    parser.add_argument("--round", type=_decimals, default=None, metavar="K",
                        help="the API rounds probabilities to K decimals (default: exact outputs, plus a 3-decimal "
                             "comparison)")
    parser.add_argument("--queries", type=positive_int, default=None,
                        help="queries for equation solving (default d + 1 on exact outputs, 20 (d + 1) when rounded)")
    parser.add_argument("--label-queries", type=positive_int, default=None,
                        help="queries for the label-only baseline (default 50 (d + 1); quick 20 (d + 1))")
    parser.set_defaults(func=execute)
