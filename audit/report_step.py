"""The report of a finished run: the step the command takes after a runner has written the run's results.

A runner ends with :meth:`audit.run_context.RunContext.finish`, which stamps and writes config.json and
results.json; the report is rendered here, once for every kind, by the command line
(:meth:`audit.kinds.RunKind.execute`, which ``rerun`` runs too) and by the library entry points that promise one
(:func:`audit.testing.assert_private` and :func:`audit.testing.audit_target`). A library caller of a runner
(``run_dp``, ``run_membership``, :func:`audit.dp.runner.play`, ...) gets the run's results.json and asks for its
report by calling :func:`write_report` with the run directory and outcome the runner returned.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from audit.run_context import finished_run, writing_into

if TYPE_CHECKING:
    from audit.stats.outcome import Outcome

#: What config.json holds that the runner did not record: the package versions ``finish`` adds (the report shows
#: the runner's config).
ADDED_BY_FINISH = ("packages",)


def write_report(run_dir: str | os.PathLike, outcome: Outcome | None = None) -> Path:
    """Render ``run_dir/report.html`` with the figures drawn for it (``roc.png``, ``tradeoff.png``, ... as the run's
    kind has them; a runner draws only its own) and refresh the index of the runs beside it (``<out>/index.html``); the
    line ``report written: PATH`` goes to the run's log (stderr as :func:`audit.run_context.configure_console`
    says, and log.txt).

    The report draws ``outcome`` and the config its runner recorded (config.json, less what ``finish`` added:
    :data:`ADDED_BY_FINISH`) with :func:`reports.html.render_report`.

    Args:
        run_dir: the directory of a run its runner has finished (results.json and config.json written).
        outcome: the outcome the runner returned (default: read from results.json).

    Returns:
        The path of report.html.

    Raises:
        UserError: the report or the index could not be written (:func:`audit.run_context.writing_into`).
        AuditIncomplete: the report could not be drawn (the traceback in the run's log.txt), as inside the run.
    """
    # reports (jinja2, matplotlib) are imported when a report is drawn: the command line's --help stays fast
    from reports.html import load_run_json, render_report
    from reports.index import write_index

    with finished_run(run_dir) as paths:
        config = load_run_json(paths.run_dir, "config.json", required=False)
        recorded = {key: value for key, value in config.items() if key not in ADDED_BY_FINISH} if config else None
        with writing_into(paths.root):
            path = render_report(paths.run_dir, outcome, recorded)
            index = write_index(paths.root)
        paths.log(f"report written: {path}")
        paths.log(f"index refreshed: {index}", logging.DEBUG)
    return path
