"""``python -m audit compare RUN_DIR...``: one table and one ROC figure across finished runs.

E.g. a non-private target against DP targets at several epsilons. Writes ``compare.html``,
``compare_roc.png`` and ``compare.json`` into a fresh directory under ``--out`` (see
:mod:`reports.compare`). Nothing is retrained.
"""

from __future__ import annotations

import argparse

from audit.arguments import folder
from audit.run_context import make_run_dir, writing_into
from audit.terminal import printable


def run_compare(args: argparse.Namespace) -> int:
    """Compare ``args.run_dirs``; prints where the comparison was written. Returns the exit status."""
    # heavy (numpy, matplotlib): imported when the command runs, so --help stays fast
    from attacks.names import expand_attacks
    from reports.compare import compare_runs, load_runs

    attacks = expand_attacks(args.attack) if args.attack else None
    load_runs(args.run_dirs)  # fail on a bad run directory before creating the output directory
    paths = make_run_dir(args.out, "compare", f"{len(args.run_dirs)}runs")
    # heavy (numpy, matplotlib): imported when the command runs, so --help stays fast
    from reports.index import write_index

    with writing_into(paths.root):  # the runs were read above: what fails here is a write
        comparison = compare_runs(args.run_dirs, paths.run_dir, attacks)
        write_index(paths.root)
    print(f"report:    {comparison.html}")
    print(f"figure:    {comparison.figure}")
    labels = [printable(r.run) for r in comparison.rows]  # read from the runs' files: no escape sequence runs
    width = max(len(label) for label in labels)
    for label, r in zip(labels, comparison.rows, strict=True):
        tpr01 = "—" if r.tpr_01 is None else f"{r.tpr_01:.3f}"
        auc = "—" if r.auc is None else f"{r.auc:.3f}"
        print(f"{label:<{width}}  {printable(r.attack):<13} AUC {auc}  TPR@0.1%FPR {tpr01}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``compare`` command to ``subparsers``."""
    parser = subparsers.add_parser(
        "compare", help="compare finished membership runs in one table and one ROC figure",
        description="Read the results.json of each run directory and write one HTML table (AUC, TPR at 1%% and "
                    "0.1%% FPR, advantage against its DP bound, best epsilon lower bound) and one overlaid "
                    "log-log ROC figure with each DP run's theoretical limit. Nothing is retrained.")
    parser.add_argument("run_dirs", metavar="RUN_DIR", nargs="+", help="run directories holding results.json")
    parser.add_argument("--out", type=folder, default="runs",
                        help="parent directory of the comparison directory, a non-empty path (default runs)")
    parser.add_argument("--attack", default=None,
                        help="comma-separated attacks to include (shadow, lira, loss, ...; default all)")
    parser.set_defaults(func=run_compare)
