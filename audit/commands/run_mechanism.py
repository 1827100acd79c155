"""``python -m audit run mechanism --target NAME``: audit a DP mechanism on its neighbouring pair."""

from __future__ import annotations

import argparse

from audit.choices import MECHANISM_DRAWS
from audit.commands.run import add_kind, positive_int
from audit.errors import UserError


def execute(args: argparse.Namespace) -> dict:
    if args.device == "cuda" or args.data_dir is not None:
        option = "--device cuda" if args.device == "cuda" else "--data-dir"
        raise UserError(f"{option} does not apply to mechanism audits (they sample with numpy on the CPU); drop it")
    from audit.run_mechanism import MechanismOptions, run_mechanism, summary_lines

    opts = MechanismOptions(target=args.target, out=args.out, seed=args.seed, quick=args.quick, epsilon=args.epsilon,
                            delta=args.delta, quiet=args.quiet, draws=args.draws, confidence=args.confidence)
    run_dir, results = run_mechanism(opts)
    print("\n".join(summary_lines(run_dir, results)))
    return results


def register(kinds: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = add_kind(kinds, "mechanism", common, help="audit a DP mechanism on its neighbouring pair",
                      description="Sample the mechanism many times on each dataset of its worst-case neighbouring "
                                  "pair, threshold a test statistic (Bonferroni over thresholds fixed in advance), "
                                  "and bound epsilon from below (Clopper-Pearson and Gaussian DP).")
    parser.add_argument("--draws", type=positive_int, default=MECHANISM_DRAWS,
                        help=f"outputs drawn per dataset (default {MECHANISM_DRAWS})")
    parser.set_defaults(func=execute)
