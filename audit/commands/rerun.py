"""``python -m audit rerun RUN_DIR``: re-execute a finished run from its config.json (see :mod:`audit.rerun`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from audit.arguments import folder
from audit.errors import UserError
from audit.run_parser import add_verbosity, gated_results
from audit.stats.outcome import Outcome


def run_again(args: argparse.Namespace) -> Outcome:
    """Re-execute ``args.run_dir``; prints the new run's summary and returns its outcome."""
    if not Path(args.run_dir).is_dir():
        raise UserError(f"run directory {args.run_dir} does not exist: pass the directory of a finished run")
    # the runners are heavy: imported when the command runs, so --help stays fast
    from audit.rerun import rerun

    _, outcome, lines = rerun(args.run_dir, args.out, args.quiet)
    print("\n".join(lines))
    return outcome


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``rerun`` command to ``subparsers``."""
    parser = subparsers.add_parser(
        "rerun", help="re-execute a finished run from its config.json (same options and seed)",
        description="Run the command recorded in RUN_DIR/config.json again with the same options and seed, into "
                    "a new run directory beside it (or under --out); the cache of trained models is shared, so "
                    "nothing that exists is retrained. The new results.json equals the old one apart from its "
                    "volatile keys (created, host, timing).")
    parser.add_argument("run_dir", metavar="RUN_DIR", help="directory of a finished run (holds config.json)")
    parser.add_argument("--out", type=folder, default=None,
                        help="root folder of the new run directory, a non-empty path (default: RUN_DIR's parent)")
    parser.add_argument("--fail-above-claim", action="store_true",
                        help="exit with status 1 when the empirical lower bound exceeds the claim (CI gate)")
    add_verbosity(parser)
    parser.set_defaults(func=gated_results(run_again))
