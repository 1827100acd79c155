"""Self-contained HTML report of a finished run (jinja2, autoescaped, PNGs embedded as data URIs).

Picture first: every report opens with its kind's headline figure (audits: the claim's tradeoff curve
with the attacks' operating points, their confidence boxes and the lower-bound curve; sweeps: bound
against theory; inversion: reconstructions beside the class means; extraction: what each attack got
for its queries) and two plain sentences (:mod:`reports.summary`), then one compact table of
attacks; everything else follows in collapsed sections of readable tables (:mod:`reports.formatting`).

The report loads nothing from the network and needs no JavaScript: CSS is inline and every plot
is a ``data:image/png;base64,...`` URI, so it opens from disk anywhere. Every string that comes
from results or config (target names, plugin paths, labels) goes through jinja2's autoescaping;
the template never marks user data ``|safe``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2

from audit.errors import UserError
from audit.io import atomic_write_text
from reports import plots
from reports.formatting import flat_rows, format_interval, format_table, format_value
from reports.presentation import presentation_of
from reports.summary import attack_table, headline_sentences, one_run_sentences

#: File names of the plots inside a run directory.
ROC_PNG = "roc.png"
TRADEOFF_PNG = "tradeoff.png"
EPSILON_PNG = "epsilon.png"
EXTRACTION_PNG = "extraction.png"
REPORT_HTML = "report.html"

_TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"
_VERDICT_COLOURS = {"consistent": "#d7f0d9", "violation": "#f8d3d3", "no-claim": "#e8e8e8"}


def load_run_json(run_dir: Path, name: str, required: bool) -> dict | None:
    """Read ``run_dir/name`` as a JSON object; missing/corrupt files raise UserError when required.

    Args:
        run_dir: the run directory.
        name: the file name (``results.json``, ``config.json``).
        required: whether a missing file is an error.

    Returns:
        The object, or None for a missing file that is not required.

    Raises:
        UserError: a required file missing, or a file unreadable or not a JSON object.
    """
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


def _deciding_curve_caption(results: Mapping[str, Any]) -> str:
    """What the headline figure draws of what decided a violation: the configuration's curve, or the rejected
    claim curve (:func:`reports.plots.deciding_configuration_epsilon`, :func:`reports.plots.rejected_claim`)."""
    eps = plots.deciding_configuration_epsilon(results)
    if eps is not None:
        return (f"The purple curve is the (ε, δ) tradeoff of the configuration the code runs (ε = {format_value(eps)} "
                f"by the accountant, from the noise, rate and steps read from the code): it lies below the claim's "
                f"curve, and that gap decided the violation. ")
    rejected = plots.rejected_claim(results)
    if rejected:
        return (f"The thick black curve is the claim's own tradeoff curve, rejected by the {rejected}: the guesses "
                f"are too often right for any mechanism with that curve, which decided the violation although "
                f"the ε lower bound is below the claim. ")
    return ""


def make_plots(run_dir: Path, results: Mapping[str, Any]) -> list[dict]:
    """(Re)create the PNGs that apply to ``results`` in ``run_dir``; returns figure descriptions.

    Args:
        run_dir: the run directory.
        results: the run's results.

    Returns:
        One description per figure (path, title, caption).
    """
    run_dir = Path(run_dir)
    figures = []
    attacks = results.get("attacks") or {}
    if _has_roc(results):
        band = results.get("confidence") if isinstance(results.get("one_run"), Mapping) else None
        path = plots.roc_plot(attacks, run_dir / ROC_PNG, results.get("tradeoff"), band)
        figures.append({
            "path": path, "title": "ROC curves (log-log)",
            "caption": "True positive rate against false positive rate of each attack on log-log axes, "
                       "which show the low-FPR regime where confident membership claims live. The dotted "
                       "diagonal is random guessing. The solid black 'DP limit' (when the target makes a "
                       "claim) is 1 - f(FPR), the highest TPR any attack can reach at that FPR if the "
                       "claim holds. AUC and TPR measure attack strength; they are not epsilon bounds."
                       + (" The shaded band joins each plotted point's two-sided Clopper–Pearson box (FPR from the "
                          "non-members, TPR from the members) at the audit's confidence, pointwise: with a few "
                          "hundred canaries a curve above the DP limit at small FPR is within its sampling error "
                          "while the band reaches below the limit." if band else ""),
        })
    if results.get("tradeoff") or results.get("lower_bound_tradeoff") or _has_empirical_points(results):
        path = plots.tradeoff_plot(results, run_dir / TRADEOFF_PNG)
        points, claimed = _has_empirical_points(results), bool(results.get("tradeoff"))
        claim_text = ("The solid black curve is the theoretical tradeoff f of the claim: every test of a correct "
                      "implementation lies on or above it (up to sampling error). " if claimed else
                      "The target makes no claim, so no claim's curve is drawn; the dotted diagonal is chance. ")
        figures.append({
            "path": path, "title": "Tradeoff: false negative rate vs false positive rate",
            "caption": ("Each attack's empirical (FPR, FNR) operating points with their confidence boxes. "
                        if points else "")
                       + claim_text
                       + ("The dashed red curve is the (ε, δ) tradeoff at the best empirical lower bound. "
                          if results.get("lower_bound_tradeoff") else "")
                       + _deciding_curve_caption(results)
                       + ("Boxes entirely below the black curve indicate a violation. " if points and claimed
                          else "")
                       + "The right panel zooms into low FPR with a logarithmic axis.",
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
    methods = (results.get("extraction") or {}).get("methods")
    if isinstance(methods, list) and methods:
        path = plots.extraction_plot(methods, run_dir / EXTRACTION_PNG)
        figures.append({
            "path": path, "title": "Extraction attacks: parameter error and agreement",
            "caption": "Each attack's queries (in its label), how far the stolen parameters are from the served "
                       "ones (log scale) and how often the stolen model labels test data and uniform random inputs "
                       "like the served model (Tramèr et al. 2016).",
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


def _headline_name(results: Mapping[str, Any]) -> str | None:
    """File name of the figure a report of this kind opens with (the presentation its kind registered,
    :func:`reports.presentation.presentation_of`; None there: the first figure the run lists)."""
    headline = presentation_of(results.get("kind")).headline
    if headline is None:
        return next((str(f.get("file")) for f in results.get("figures") or [] if isinstance(f, Mapping)), None)
    return headline


def _section(title: str, *, figures: list | None = None, tables: list | None = None, rows: list | None = None,
             paragraphs: list | None = None, open: bool = False) -> dict:
    return {"title": title, "figures": figures or [], "tables": tables or [], "rows": rows or [],
            "paragraphs": [p for p in paragraphs or [] if p], "open": open}


def _bounds_table(results: Mapping[str, Any]) -> dict | None:
    bounds = [b for b in results.get("lower_bounds") or [] if isinstance(b, Mapping)]
    if not bounds:
        return None
    best = results.get("best_lower_bound") if isinstance(results.get("best_lower_bound"), Mapping) else {}
    rows = []
    for b in bounds:
        details = b.get("details") if isinstance(b.get("details"), Mapping) else {}
        is_best = bool(best) and all(b.get(k) == best.get(k) for k in ("method", "attack", "epsilon"))
        rows.append([format_value(b.get("method")) + (" (best)" if is_best else ""), format_value(b.get("attack")),
                     format_value(b.get("epsilon")), format_value(details.get("mu_lb")),
                     format_value(b.get("confidence")), format_value(b.get("n")),
                     format_value(b.get("role", "verdict" if b.get("valid") else "estimate")),
                     format_value(b.get("statement"))])
    caption = ""
    if best:
        caption = (f"The best verdict bound holds at {format_value(best.get('family_confidence'))} confidence across a "
                   f"family of {format_value(best.get('family_size'))} competing bound(s), each computed at the "
                   f"Bonferroni-corrected confidence shown.")
    return {"title": "Every lower bound", "columns": ["method", "attack", "ε lower bound", "μ lower bound",
                                                      "confidence", "observations", "role", "what it bounds"],
            "rows": rows, "caption": caption}


def _attack_details(results: Mapping[str, Any]) -> list[dict]:
    """One readable table per attack of everything it reports (curves summarised, not dumped)."""
    tables = []
    for name, attack in sorted((results.get("attacks") or {}).items()):
        if not isinstance(attack, Mapping):
            continue
        shown = {k: v for k, v in attack.items() if k not in ("roc", "empirical_points")}
        rows = [[key, text] for key, text in flat_rows(shown)]
        points = [p for p in attack.get("empirical_points") or [] if isinstance(p, Mapping)]
        rows += [[f"operating point {i + 1}", f"FPR {format_value(p.get('fpr'))} ({format_interval(p.get('fpr_ci'))}), "
                                              f"FNR {format_value(p.get('fnr'))} ({format_interval(p.get('fnr_ci'))})"]
                 for i, p in enumerate(points)]
        tables.append({"title": name, "columns": ["", ""], "rows": rows, "caption": ""})
    return tables


def build_context(results: Mapping[str, Any], config: Mapping[str, Any] | None, figures: list[dict]) -> dict:
    """Everything the template shows, already formatted as text (the template escapes it): the headline
    (sentences, figure, attack table) and the collapsed sections below it.

    Args:
        results: the run's results.
        config: the run's config, or None.
        figures: the descriptions of :func:`make_plots`.

    Returns:
        The template's context.
    """
    verdict = results.get("verdict") if isinstance(results.get("verdict"), Mapping) else {}
    status = str(verdict.get("status")) if verdict else None
    headline_name = _headline_name(results)
    headline = next((f for f in figures if f["name"] == headline_name), figures[0] if figures else None)
    attack = attack_table(results)
    runner_tables = [format_table(t) for t in results.get("tables") or [] if isinstance(t, Mapping)]
    if presentation_of(results.get("kind")).tables_lead:
        runner_tables = runner_tables[1:]  # the first is the compact table under the headline (attack_table)
    sections = []
    more = [f for f in figures if f is not headline]
    if more:
        sections.append(_section("More figures", figures=more))
    one_run = one_run_sentences(results)
    if one_run:
        sections.insert(0, _section("One run of your training", paragraphs=one_run, open=True))
    bounds = _bounds_table(results)
    theory = results.get("epsilon_theory")
    sections.append(_section("Verdict and bounds", tables=[t for t in [bounds] if t], paragraphs=[
        f"Verdict: {status} — {verdict.get('text', '')}" if status else None,
        (results.get("ceiling") or {}).get("text"),
        f"Theory: ε = {format_value(theory)} at δ = {format_value(results.get('delta'))} "
        f"({results.get('accountant') or 'no accountant'}); neighbouring relation: "
        f"{results.get('neighbouring') or '—'}." if theory is not None else None]))
    check_only = isinstance(results.get("config_check"), Mapping) and not results.get("lower_bounds")
    sections.extend(_section(t["title"], tables=[t], open=check_only) for t in runner_tables)
    details = _attack_details(results)
    if details:
        sections.append(_section("Per-attack details", tables=details))
    for key, title in (("params", "Parameters"), ("game", "Audit game"), ("model", "Model"), ("timing", "Timing (s)")):
        if isinstance(results.get(key), Mapping) and results[key]:
            sections.append(_section(title, rows=flat_rows(results[key])))
    if config:
        sections.append(_section("Configuration (config.json)", rows=flat_rows(
            {k: v for k, v in config.items() if k not in ("seeds",)})))
    return {
        "title_target": format_value(results.get("target", "unknown target")),
        "kind": format_value(results.get("kind", "audit")),
        "subtitle": f"created {format_value(results.get('created'))} · seed {format_value(results.get('seed'))} · "
                    f"results schema version {format_value(results.get('schema_version'))}",
        "verdict": {"status": status, "colour": _VERDICT_COLOURS.get(status or "", "#e8e8e8")} if status else None,
        "sentences": headline_sentences(results),
        "headline": headline,
        "attack_table": attack,
        "sections": sections,
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

    Args:
        run_dir: the run directory.
        results: the run's results (default: read from ``results.json``).
        config: the run's config (default: read from ``config.json``, if there).

    Returns:
        The path of ``report.html``.

    Raises:
        UserError: a missing run directory, or a missing or corrupt ``results.json``.
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
