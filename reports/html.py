"""Self-contained HTML report of a finished run (jinja2, autoescaped, PNGs embedded as data URIs).

The report loads nothing from the network and needs no JavaScript: CSS is inline and every plot
is a ``data:image/png;base64,...`` URI, so it opens from disk anywhere. Every string that comes
from results or config (target names, plugin paths, labels) goes through jinja2's autoescaping;
the template never marks user data ``|safe``.
"""

from __future__ import annotations

import base64
import json
import math
from pathlib import Path
from typing import Any, Mapping

import jinja2

from audit.errors import UserError
from audit.io import atomic_write_text
from reports import plots

#: File names of the plots inside a run directory.
ROC_PNG = "roc.png"
TRADEOFF_PNG = "tradeoff.png"
EPSILON_PNG = "epsilon.png"
REPORT_HTML = "report.html"

_TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"
_VERDICT_COLOURS = {"consistent": "#d7f0d9", "violation": "#f8d3d3", "no-claim": "#e8e8e8"}


def load_run_json(run_dir: Path, name: str, required: bool) -> dict | None:
    """Read ``run_dir/name`` as a JSON object; missing/corrupt files raise UserError when required."""
    path = Path(run_dir) / name
    if not path.is_file():
        if required:
            raise UserError(f"{path} not found: pass the directory of a finished run (it holds {name})")
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"{path} is unreadable or not valid JSON ({type(exc).__name__}): re-run the audit "
                        f"to regenerate it") from None
    if not isinstance(data, dict):
        raise UserError(f"{path} does not hold a JSON object: re-run the audit to regenerate it")
    return data


def format_value(value: Any, digits: int = 3) -> str:
    """Human formatting of a JSON value: numbers to ``digits`` significant figures, None as a dash."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "∞" if value > 0 else "-∞"
        if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e6):
            return f"{value:.{digits}g}"
        return f"{value:.{digits}g}" if abs(value) < 1 else f"{value:.{digits + 1}g}"
    if isinstance(value, str):
        if value in ("inf", "-inf"):
            return "∞" if value == "inf" else "-∞"
        return value
    return json.dumps(value, sort_keys=True)


def format_interval(ci: Any) -> str:
    """A confidence interval ``[lo, hi]`` as text."""
    if isinstance(ci, (list, tuple)) and len(ci) == 2:
        return f"[{format_value(ci[0])}, {format_value(ci[1])}]"
    return ""


def _details_text(details: Any, limit: int = 8) -> str:
    """Compact ``key=value`` text of a bound's details (scalars only; at most ``limit`` entries)."""
    if not isinstance(details, Mapping):
        return "" if details is None else format_value(details)
    parts = []
    for key in sorted(details):
        value = details[key]
        if isinstance(value, (dict, list)) and len(json.dumps(value)) > 60:
            continue
        parts.append(f"{key}={format_value(value)}")
    if len(parts) > limit:
        parts = parts[:limit] + ["…"]
    return ", ".join(parts)


def _kv_rows(mapping: Any) -> list[tuple[str, str]]:
    """Sorted ``(key, formatted value)`` pairs of a dict (nested values as compact JSON)."""
    if not isinstance(mapping, Mapping):
        return []
    return [(str(key), format_value(mapping[key])) for key in sorted(mapping, key=str)]


def _data_uri(path: Path) -> str:
    """``data:image/png;base64,...`` of a PNG file."""
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _sweep_rows(results: Mapping[str, Any]) -> list[dict]:
    """Rows of an epsilon sweep: ``results["sweep"]`` as a list, or a dict with a ``rows`` list."""
    sweep = results.get("sweep")
    if isinstance(sweep, Mapping):
        sweep = sweep.get("rows")
    if not isinstance(sweep, list):
        return []
    return [row for row in sweep if isinstance(row, Mapping)]


def _has_empirical_points(results: Mapping[str, Any]) -> bool:
    attacks = results.get("attacks") or {}
    return any((attack or {}).get("empirical_points") for attack in attacks.values() if isinstance(attack, Mapping))


def _has_roc(results: Mapping[str, Any]) -> bool:
    attacks = results.get("attacks") or {}
    return any(isinstance(a, Mapping) and (a.get("roc") or {}).get("fpr") for a in attacks.values())


def make_plots(run_dir: Path, results: Mapping[str, Any]) -> list[dict]:
    """(Re)create the PNGs that apply to ``results`` in ``run_dir``; returns figure descriptions."""
    run_dir = Path(run_dir)
    figures = []
    attacks = results.get("attacks") or {}
    if _has_roc(results):
        path = plots.roc_plot(attacks, run_dir / ROC_PNG, results.get("tradeoff"))
        figures.append({
            "path": path, "title": "ROC curves (log-log)",
            "caption": "True positive rate against false positive rate of each attack on log-log axes, "
                       "which show the low-FPR regime where confident membership claims live. The dotted "
                       "diagonal is random guessing. The solid black 'DP limit' (when the target makes a "
                       "claim) is 1 - f(FPR), the highest TPR any attack can reach at that FPR if the "
                       "claim holds. AUC and TPR measure attack strength; they are not epsilon bounds.",
        })
    if results.get("tradeoff") or results.get("lower_bound_tradeoff") or _has_empirical_points(results):
        path = plots.tradeoff_plot(results, run_dir / TRADEOFF_PNG)
        figures.append({
            "path": path, "title": "Tradeoff: false negative rate vs false positive rate",
            "caption": "Each attack's empirical (FPR, FNR) operating points with their confidence boxes. "
                       "The solid black curve is the theoretical tradeoff f of the claim: every test of a "
                       "correct implementation lies on or above it (up to sampling error). The dashed red "
                       "curve is the (ε, δ) tradeoff at the best empirical lower bound. Boxes entirely "
                       "below the black curve indicate a violation. The right panel zooms into low FPR "
                       "with a logarithmic axis.",
        })
    rows = _sweep_rows(results)
    if rows:
        path = plots.epsilon_plot(rows, run_dir / EPSILON_PNG)
        figures.append({
            "path": path, "title": "Empirical ε lower bound vs theoretical ε",
            "caption": "One point per audited target of the sweep. Points must stay on or below the "
                       "dotted y = x line; a point above it means the claimed guarantee is broken or "
                       "the accounting is wrong.",
        })
    figures.extend(_extra_figures(run_dir, results))
    for figure in figures:
        figure["uri"] = _data_uri(Path(figure["path"]))
        figure["name"] = Path(figure["path"]).name
    return figures


def _extra_figures(run_dir: Path, results: Mapping[str, Any]) -> list[dict]:
    """Figures a runner drew itself, listed in ``results["figures"]`` as ``{"file", "title", "caption"}``.

    ``file`` must be a plain ``.png`` file name inside ``run_dir`` (anything else, or a missing
    file, is skipped): a results file can never make the report read outside its run directory.
    """
    extra = []
    for item in results.get("figures") or []:
        if not isinstance(item, Mapping):
            continue
        name = str(item.get("file", ""))
        path = run_dir / name
        if Path(name).name != name or not name.endswith(".png") or not path.is_file():
            continue
        extra.append({"path": path, "title": str(item.get("title", name)), "caption": str(item.get("caption", ""))})
    return extra


def _tables(results: Mapping[str, Any]) -> list[dict]:
    """Extra tables a runner asks for in ``results["tables"]``: ``{"title", "columns", "rows"}``."""
    tables = []
    for table in results.get("tables") or []:
        if not isinstance(table, Mapping) or not isinstance(table.get("rows"), list):
            continue
        columns = [str(c) for c in table.get("columns") or []]
        rows = [[format_value(cell) for cell in row] for row in table["rows"] if isinstance(row, list)]
        tables.append({"title": str(table.get("title", "")), "columns": columns, "rows": rows,
                       "caption": str(table.get("caption", ""))})
    return tables


def _model_name(results: Mapping[str, Any]) -> Any:
    model = results.get("model")
    if isinstance(model, Mapping):
        for key in ("name", "architecture", "model"):
            if isinstance(model.get(key), str):
                return model[key]
        return None
    return model


def _bound_counts(bound: Mapping[str, Any]) -> str:
    """Counts behind a bound: n plus any count-like detail (r, v, m, k_pos, k_neg, fp, fn, ...)."""
    details = bound.get("details") if isinstance(bound.get("details"), Mapping) else {}
    count_keys = ("m", "r", "v", "k_pos", "k_neg", "fp", "fn", "n_pos", "n_neg", "guesses", "correct")
    parts = [f"n={format_value(bound.get('n'))}"]
    parts += [f"{key}={format_value(details[key])}" for key in count_keys if key in details]
    return ", ".join(parts)


def _attack_rows(results: Mapping[str, Any]) -> tuple[list[dict], list[dict]]:
    """Membership-metric rows and per-attack rows of other scalar metrics."""
    attacks = results.get("attacks") or {}
    metric_rows, other_rows = [], []
    standard = {"auc", "balanced_accuracy", "advantage", "tpr_at_fpr", "tpr_at_fpr_ci", "roc", "empirical_points"}
    for name in sorted(attacks):
        attack = attacks[name]
        if not isinstance(attack, Mapping):
            continue
        if "auc" in attack or "tpr_at_fpr" in attack:
            tpr = attack.get("tpr_at_fpr") or {}
            ci = attack.get("tpr_at_fpr_ci") or {}
            metric_rows.append({
                "name": name, "auc": format_value(attack.get("auc")),
                "tpr1": format_value(tpr.get("0.01")), "tpr1_ci": format_interval(ci.get("0.01")),
                "tpr01": format_value(tpr.get("0.001")), "tpr01_ci": format_interval(ci.get("0.001")),
                "advantage": format_value(attack.get("advantage")),
                "balanced_accuracy": format_value(attack.get("balanced_accuracy")),
                "points": len(attack.get("empirical_points") or []),
            })
        extra = [(key, format_value(attack[key])) for key in sorted(attack) if key not in standard
                 and not (isinstance(attack[key], (list, dict)) and len(json.dumps(attack[key])) > 200)]
        if extra:
            other_rows.append({"name": name, "entries": extra})
    return metric_rows, other_rows


def build_context(results: Mapping[str, Any], config: Mapping[str, Any] | None, figures: list[dict]) -> dict:
    """Everything the template shows, already formatted as text (the template escapes it)."""
    eps_theory = results.get("epsilon_theory")
    if eps_theory is None:
        theory_text = "none (non-private)"
    else:
        theory_text = format_value(eps_theory)
        if results.get("accountant"):
            theory_text += f" (accountant: {results['accountant']})"
    best = results.get("best_lower_bound")
    best_text = None
    if isinstance(best, Mapping):
        best_text = (f"{format_value(best.get('epsilon'))} ({best.get('method', '?')}"
                     + (f", attack {best['attack']}" if best.get("attack") else "")
                     + f", {format_value(best.get('family_confidence', best.get('confidence')))} confidence, "
                       f"family of {format_value(best.get('family_size', 1))}, {_bound_counts(best)})")
    verdict = results.get("verdict") if isinstance(results.get("verdict"), Mapping) else None
    status = str(verdict.get("status")) if verdict else None
    bounds = []
    for bound in results.get("lower_bounds") or []:
        if not isinstance(bound, Mapping):
            continue
        bounds.append({
            "method": format_value(bound.get("method")), "attack": format_value(bound.get("attack")),
            "epsilon": format_value(bound.get("epsilon")), "confidence": format_value(bound.get("confidence")),
            "n": format_value(bound.get("n")), "valid": bool(bound.get("valid")),
            "role": format_value(bound.get("role", "verdict" if bound.get("valid") else "estimate")),
            "details": _details_text(bound.get("details")),
            "best": isinstance(best, Mapping) and all(bound.get(k) == best.get(k)
                                                    for k in ("method", "attack", "epsilon")),
        })
    metric_rows, other_rows = _attack_rows(results)
    summary = [
        ("target", format_value(results.get("target"))),
        ("description", format_value(results.get("target_description")) if results.get("target_description") else None),
        ("audit kind", format_value(results.get("kind"))),
        ("dataset", format_value(results.get("dataset")) if results.get("dataset") is not None else None),
        ("model", format_value(_model_name(results)) if _model_name(results) is not None else None),
        ("neighbouring relation", format_value(results.get("neighbouring")) if results.get("neighbouring") else None),
        ("δ", format_value(results.get("delta"))),
        ("ε theory (upper bound)", theory_text),
        ("best valid ε lower bound", best_text or "none (no statistically valid bound)"),
        ("seed", format_value(results.get("seed")) if results.get("seed") is not None else None),
        ("created", format_value(results.get("created")) if results.get("created") else None),
    ]
    model = results.get("model")
    return {
        "title_target": format_value(results.get("target", "unknown target")),
        "kind": format_value(results.get("kind", "audit")),
        "summary": [(k, v) for k, v in summary if v is not None],
        "verdict": {"status": status, "text": format_value(verdict.get("text", "")),
                    "colour": _VERDICT_COLOURS.get(status or "", "#e8e8e8")} if verdict else None,
        "bounds": bounds,
        "metric_rows": metric_rows,
        "other_rows": other_rows,
        "figures": figures,
        "tables": _tables(results),
        "params": _kv_rows(results.get("params")),
        "game": _kv_rows(results.get("game")),
        "model_info": _kv_rows(model) if isinstance(model, Mapping) else [],
        "timing": _kv_rows(results.get("timing")),
        "schema_version": format_value(results.get("schema_version")),
        "config_text": json.dumps(config, indent=2, sort_keys=True) if config is not None else None,
    }


def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(_TEMPLATE_DIR)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def render_report(run_dir: Path, results: dict | None = None, config: dict | None = None) -> Path:
    """Render ``run_dir/report.html`` (and re-create its PNGs) from a run's results and config.

    ``results``/``config`` are read from ``results.json``/``config.json`` in ``run_dir`` when not
    given; a missing or corrupt ``results.json`` raises :class:`audit.errors.UserError`, a missing
    ``config.json`` only omits the config section. Output is deterministic: the same inputs give
    byte-identical PNGs and HTML. Returns the path of ``report.html``.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UserError(f"run directory {run_dir} does not exist: pass the directory of a finished run")
    if results is None:
        results = load_run_json(run_dir, "results.json", required=True)
    if config is None:
        config = load_run_json(run_dir, "config.json", required=False)
    figures = make_plots(run_dir, results)
    html = _environment().get_template("report.html.j2").render(**build_context(results, config, figures))
    return atomic_write_text(run_dir / REPORT_HTML, html)
