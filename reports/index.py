"""``runs/index.html``: one sortable row per finished run in a folder of runs (time, kind, target,
epsilon theory, best bound, verdict, attack AUCs), each linking to its report. Self-contained: inline
CSS and a small inline script that sorts by a clicked column; no network. Refreshed with every run's report
(:func:`audit.report_step.write_report`) and by ``python -m audit report RUNS_DIR``."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import jinja2

from audit.errors import UserError
from audit.io import atomic_write_text
from audit.results_file import load_outcome
from audit.stats.outcome import Comparison, Outcome
from reports.formatting import format_value

INDEX_HTML = "index.html"
_TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"


def _outcome(run_dir: Path) -> Outcome | Comparison | None:
    """The run's outcome; None for a folder that holds none, or one the loader refuses (unreadable, or off
    the schema): the index lists what it can read and leaves the rest out."""
    if not ((run_dir / "results.json").is_file() or (run_dir / "compare.json").is_file()):
        return None
    try:
        return load_outcome(run_dir)
    except UserError:
        return None


def _number(value: Any) -> float | None:
    """A finite number, else None (the index sorts by it; results.json writes infinities as text)."""
    finite = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if finite else None


def _run_row(run_dir: Path, outcome: Outcome) -> dict:
    best = outcome.best_lower_bound
    aucs = {name: _number(a.auc) for name, a in (outcome.attacks or {}).items()}
    aucs = {name: auc for name, auc in aucs.items() if auc is not None}
    return {"created": str(outcome.stamp.created), "kind": str(outcome.kind), "target": str(outcome.target),
            "epsilon_theory": _number(outcome.epsilon_theory), "best": _number(best.epsilon) if best else None,
            "method": str(best.method) if best else "", "verdict": str(outcome.verdict.status),
            "aucs": ", ".join(f"{name} {format_value(auc)}" for name, auc in sorted(aucs.items())),
            "best_auc": max(aucs.values(), default=None), "link": f"{run_dir.name}/report.html",
            "name": run_dir.name}


def run_row(run_dir: Path) -> dict | None:
    """The index row of one run directory (None when it holds no readable results).

    Args:
        run_dir: the run directory.

    Returns:
        The row, or None.
    """
    outcome = _outcome(run_dir)
    if isinstance(outcome, Outcome):
        return _run_row(run_dir, outcome)
    if isinstance(outcome, Comparison):
        return {"created": run_dir.name[:16], "kind": "compare", "target": f"{len(outcome.runs)} runs",
                "epsilon_theory": None, "best": None, "method": "", "verdict": "", "aucs": "", "best_auc": None,
                "link": f"{run_dir.name}/compare.html", "name": run_dir.name}
    return None


def write_index(folder: str | Path) -> Path:
    """Write ``folder/index.html`` listing every run directory directly inside ``folder``, newest first.

    Args:
        folder: the folder of run directories.

    Returns:
        The path of ``index.html``.
    """
    folder = Path(folder)
    rows = [row for d in sorted(folder.iterdir(), reverse=True) if d.is_dir() and (row := run_row(d)) is not None]
    cells = [{"row": row, "epsilon_theory": format_value(row["epsilon_theory"]),
              "best": format_value(row["best"]) + (f" ({row['method']})" if row["method"] else ""),
              "best_sort": "" if row["best"] is None else repr(row["best"]),
              "eps_sort": "" if row["epsilon_theory"] is None else repr(row["epsilon_theory"]),
              "auc_sort": "" if row["best_auc"] is None else repr(row["best_auc"])} for row in rows]
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(_TEMPLATE_DIR)), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    html = env.get_template("index.html.j2").render(folder=folder.resolve().name, rows=cells)
    return atomic_write_text(folder / INDEX_HTML, html)
