"""``python -m audit run mechanism --target NAME``: audit a DP mechanism on its neighbouring pair."""

from __future__ import annotations

import argparse

from audit.commands.run import positive_int
from audit.run_mechanism import DEFAULT_DRAWS, MechanismOptions, run_mechanism, summary_lines


def execute(args: argparse.Namespace) -> dict:
    if args.device == "cuda" or args.data_dir is not None:
        option = "--device cuda" if args.device == "cuda" else "--data-dir"
        raise_conflict(option)
    opts = MechanismOptions(target=args.target, out=args.out, seed=args.seed, quick=args.quick, epsilon=args.epsilon,
                            delta=args.delta, quiet=args.quiet, draws=args.draws, confidence=args.confidence)
    run_dir, results = run_mechanism(opts)
    print("\n".join(summary_lines(run_dir, results)))
    return results


def raise_conflict(option: str) -> None:
    from audit.errors import UserError

    raise UserError(f"{option} does not apply to mechanism audits (they sample with numpy on the CPU); drop it")


def register(kinds: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = kinds.add_parser("mechanism", parents=[common], help="audit a DP mechanism on its neighbouring pair",
                              description="Sample the mechanism many times on each dataset of its worst-case "
                                          "neighbouring pair, choose a threshold test on half of the draws, and "
                                          "bound epsilon from below (Clopper-Pearson and Gaussian DP) on the rest.")
    parser.add_argument("--draws", type=positive_int, default=DEFAULT_DRAWS,
                        help=f"outputs drawn per dataset (default {DEFAULT_DRAWS})")
    parser.set_defaults(func=execute)
