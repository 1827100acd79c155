"""``python -m audit report RUN_DIR``: re-render the report of a finished run;
``python -m audit report RUNS_DIR``: write ``RUNS_DIR/index.html``, one sortable row per run.

Reads ``results.json`` (required) and ``config.json`` (optional) from the run directory, re-creates
the PNG plots and ``report.html`` (see :func:`reports.html.render_report`). A folder without
``results.json`` is taken as a folder of runs (:func:`reports.index.write_index`). Nothing is retrained.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from audit.errors import UserError
from audit.run_context import writing_into

#: The fix an error writing into a run directory names (the report is written inside it).
RUN_DIR_FIX = "make it writable (chmod u+w), or copy the run directory to a writable folder and report the copy"


def run_report(args: argparse.Namespace) -> int:
    """Re-render ``args.run_dir``; prints the path of the report. Returns the exit status."""
    run_dir = Path(args.run_dir)
    if not run_dir.exists():
        raise UserError(f"run directory {run_dir} does not exist: pass the directory of a finished run")
    if not run_dir.is_dir():
        raise UserError(f"{run_dir} is not a directory: pass the directory of a finished run")
    if not (run_dir / "results.json").exists() and any((d / "results.json").is_file() or (d / "compare.json").is_file()
                                                        for d in run_dir.iterdir() if d.is_dir()):
        # heavy (matplotlib, jinja2): imported when the command runs, so --help stays fast
        from reports.index import write_index

        with writing_into(run_dir, RUN_DIR_FIX):
            index = write_index(run_dir)
        print(f"index: {index}")
        return 0
    # heavy (matplotlib, jinja2): imported when the command runs, so --help stays fast
    from reports.html import render_report

    with writing_into(run_dir, RUN_DIR_FIX):  # render_report turns a results file it cannot read into a UserError
        path = render_report(run_dir)
    print(f"report: {path}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``report`` command to ``subparsers``."""
    parser = subparsers.add_parser(
        "report",
        help="re-render a finished run's report, or write the index of a folder of runs",
        description="Re-render report.html and the PNG plots of a finished run from its results.json "
                    "(and config.json when present), or, given a folder of runs (e.g. runs/), write its "
                    "index.html: one sortable row per run linking to its report. Nothing is retrained.",
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="run directory holding results.json, or a folder of runs")
    parser.set_defaults(func=run_report)
