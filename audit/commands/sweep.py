"""``python -m audit sweep dp --target NAME --epsilons 1,2,4,8``: epsilon lower bound vs theory."""

from __future__ import annotations

import argparse

from audit.choices import DP_CANARIES, THREATS
from audit.commands.run import (
    add_verbosity,
    check_target,
    confidence_level,
    delta_value,
    dpsgd_start_options,
    executor_options,
    gated_results,
    positive_int,
    targets_epilog,
)


def _floats(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(t) for t in text.split(",") if t.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
    if not values or any(not v > 0 for v in values):
        raise argparse.ArgumentTypeError(f"epsilons must be positive numbers, got {text!r}")
    return values


def _threats(text: str) -> tuple[str, ...]:
    names = tuple(t.strip() for t in text.split(",") if t.strip())
    bad = [n for n in names if n not in THREATS]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"unknown threat model {', '.join(bad) or text!r}; "
                                         f"choose from {', '.join(THREATS)}")
    return names


def execute(args: argparse.Namespace) -> dict:
    """Run the sweep and print its summary; returns the results (a violation exits 1 under
    --fail-above-claim, :func:`audit.commands.run.gated_results`)."""
    check_target("sweep", args.target)
    from audit.run_dp import SweepOptions, run_sweep, sweep_summary

    opts = SweepOptions(target=args.target, epsilons=args.epsilons, threats=args.threats, canary=args.canary,
                        runs=args.runs, out=args.out, seed=args.seed, device=args.device, quick=args.quick,
                        delta=args.delta, data_dir=args.data_dir, quiet=args.quiet, confidence=args.confidence,
                        workers=args.workers, executor=args.executor, ray_address=args.ray_address,
                        init=args.init, calibration_runs=args.calibration_runs)
    run_dir, results = run_sweep(opts)
    print("\n".join(sweep_summary(run_dir, results)))
    return results


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("sweep",
                                   help="epsilon sweep: audit at several claimed epsilons, plot bound vs theory",
                                   description="Run the audit at each claimed epsilon and plot the empirical lower "
                                               "bound against the theoretical epsilon (with the y = x line), one "
                                               "series per threat model.")
    kinds = parser.add_subparsers(dest="sweep_kind", metavar="KIND", parser_class=type(parser))
    kinds.required = True
    dp = kinds.add_parser("dp", help="sweep the multi-run DP audit (run dp) over epsilons",
                          epilog=targets_epilog("sweep"), formatter_class=argparse.RawDescriptionHelpFormatter)
    dp.add_argument("--target", required=True, help="target name (DP-SGD, DP-GD or DP-ERM; see `python -m audit list`)")
    dp.add_argument("--epsilons", type=_floats, default=(1.0, 2.0, 4.0, 8.0), help="claimed epsilons (default 1,2,4,8)")
    dp.add_argument("--threats", type=_threats, default=None,
                    help="comma-separated threat models, one series each (default: updates,white-box for DP-SGD; "
                         "white-box for DP-ERM)")
    dp.add_argument("--canary", default=None, choices=DP_CANARIES,
                    help="canary kind (default: the target's, as run dp: dirac or gradient for DP-SGD, crafted for "
                         "DP-ERM)")
    dp.add_argument("--runs", type=positive_int, default=None, help="runs per audit (default: as run dp)")
    dp.add_argument("--out", default="runs", help="root folder for run directories (default: runs)")
    dp.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    dp.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"], help="where to train (default auto)")
    dp.add_argument("--quick", action="store_true", help="reduced runs (tests, demos)")
    dp.add_argument("--delta", type=delta_value, default=None, help="delta of the claims (default: the target's)")
    dp.add_argument("--data-dir", default=None, help="folder with full-MNIST IDX files")
    add_verbosity(dp)
    dp.add_argument("--confidence", type=confidence_level, default=0.95,
                    help="family-wise confidence of each audit's verdict (default 0.95)")
    dpsgd_start_options(dp)
    executor_options(dp)
    dp.add_argument("--fail-above-claim", action="store_true",
                    help="exit with status 1 when any audit of the sweep finds a violation (CI gate)")
    dp.set_defaults(func=gated_results(execute))
