"""``runs/index.html``: one sortable row per finished run in a folder of runs (time, kind, target,
epsilon theory, best bound, verdict, attack AUCs), each linking to its report. Self-contained: inline
CSS and a small inline script that sorts by a clicked column; no network. Refreshed by every run
(:meth:`audit.run_context.RunContext.finish`) and by ``python -m audit report RUNS_DIR``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2

from audit.io import atomic_write_text
from reports.formatting import format_value

INDEX_HTML = "index.html"
_TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"


def _read(path: Path) -> Mapping[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return data if isinstance(data, Mapping) else None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def run_row(run_dir: Path) -> dict | None:
    """The index row of one run directory (None when it holds no readable results).

    Args:
        run_dir: the run directory.

    Returns:
        The row, or None.
    """
    results = _read(run_dir / "results.json")
    if results is not None:
        best = results.get("best_lower_bound") if isinstance(results.get("best_lower_bound"), Mapping) else {}
        attacks = results.get("attacks") if isinstance(results.get("attacks"), Mapping) else {}
        aucs = {name: _number(a.get("auc")) for name, a in attacks.items() if isinstance(a, Mapping)}
        aucs = {name: auc for name, auc in aucs.items() if auc is not None}
        verdict = results.get("verdict") if isinstance(results.get("verdict"), Mapping) else {}
        return {"created": str(results.get("created", "")), "kind": str(results.get("kind", "?")),
                "target": str(results.get("target", "?")), "epsilon_theory": _number(results.get("epsilon_theory")),
                "best": _number(best.get("epsilon")), "method": str(best.get("method", "")),
                "verdict": str(verdict.get("status", "")),
                "aucs": ", ".join(f"{name} {format_value(auc)}" for name, auc in sorted(aucs.items())),
                "best_auc": max(aucs.values(), default=None), "link": f"{run_dir.name}/report.html",
                "name": run_dir.name}
    compare = _read(run_dir / "compare.json")
    if compare is not None:
        return {"created": run_dir.name[:16], "kind": "compare", "target": f"{len(compare.get('runs') or [])} runs",
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
