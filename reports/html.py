"""Self-contained HTML report of a finished run (jinja2, autoescaped, PNGs embedded as data URIs).

Picture first: every report opens with its kind's headline figure (a claim audit: the claim's tradeoff curve
with the attacks' operating points, their confidence boxes and the lower-bound curve; another kind: the figure
its presentation names) and two plain sentences (:mod:`reports.summary`, or the kind's own), then one compact
table of attacks (or the kind's first table); everything else follows in collapsed sections of readable tables
(:mod:`reports.formatting`). What is particular to a kind — its sentences, its game in words, the figures and
sections drawn from its block — the kind hands over through its presentation (:mod:`reports.presentation`);
this module names no kind.

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
from audit.results_file import load_outcome
from audit.stats.outcome import Outcome
from reports import plots
from reports.formatting import flat_rows, format_interval, format_table, format_value
from reports.presentation import presentation_of
from reports.summary import attack_table, headline_sentences

#: File names of the plots inside a run directory.
ROC_PNG = "roc.png"
TRADEOFF_PNG = "tradeoff.png"
REPORT_HTML = "report.html"

_TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"
_VERDICT_COLOURS = {"consistent": "#d7f0d9", "violation": "#f8d3d3", "no-claim": "#e8e8e8", "could-not-read": "#f6e7c1"}


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


def _has_empirical_points(outcome: Outcome) -> bool:
    return any(attack.empirical_points for attack in (outcome.attacks or {}).values())


def _has_roc(outcome: Outcome) -> bool:
    return any(attack.roc.fpr for attack in (outcome.attacks or {}).values())


def _deciding_curve_caption(outcome: Outcome) -> str:
    """What the headline figure draws of what decided a violation: the configuration's curve, or the rejected
    claim curve (:func:`reports.plots.deciding_configuration_epsilon`, :func:`reports.plots.rejected_claim`)."""
    eps = plots.deciding_configuration_epsilon(outcome)
    if eps is not None:
        return (f"The purple curve is the (ε, δ) tradeoff of the configuration the code runs (ε = {format_value(eps)} "
                f"by the accountant, from the noise, rate and steps read from the code): it lies below the claim's "
                f"curve, and that gap decided the violation. ")
    rejected = plots.rejected_claim(outcome)
    if rejected:
        return (f"The thick black curve is the claim's own tradeoff curve, rejected by the {rejected}: the guesses "
                f"are too often right for any mechanism with that curve, which decided the violation although "
                f"the ε lower bound is below the claim. ")
    return ""


def _roc_figure(run_dir: Path, outcome: Outcome) -> dict:
    band = outcome.confidence if outcome.kind_detail.roc_band() else None
    path = plots.roc_plot(outcome.attacks, run_dir / ROC_PNG, outcome.judged.tradeoff, band)
    return {
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
    }


def _tradeoff_figure(run_dir: Path, outcome: Outcome) -> dict:
    path = plots.tradeoff_plot(outcome, run_dir / TRADEOFF_PNG)
    points, claimed = _has_empirical_points(outcome), outcome.judged.tradeoff is not None
    claim_text = ("The solid black curve is the theoretical tradeoff f of the claim: every test of a correct "
                  "implementation lies on or above it (up to sampling error). " if claimed else
                  "The target makes no claim, so no claim's curve is drawn; the dotted diagonal is chance. ")
    return {
        "path": path, "title": "Tradeoff: false negative rate vs false positive rate",
        "caption": ("Each attack's empirical (FPR, FNR) operating points with their confidence boxes. "
                    if points else "")
                   + claim_text
                   + ("The dashed red curve is the (ε, δ) tradeoff at the best empirical lower bound. "
                      if outcome.judged.lower_bound_tradeoff is not None else "")
                   + _deciding_curve_caption(outcome)
                   + ("Boxes entirely below the black curve indicate a violation. " if points and claimed
                      else "")
                   + "The right panel zooms into low FPR with a logarithmic axis.",
    }


def make_plots(run_dir: Path, outcome: Outcome) -> list[dict]:
    """(Re)create the PNGs that apply to ``outcome`` in ``run_dir``; returns figure descriptions.

    Args:
        run_dir: the run directory.
        outcome: the run's outcome.

    Returns:
        One description per figure (path, title, caption).
    """
    run_dir = Path(run_dir)
    figures = []
    if _has_roc(outcome):
        figures.append(_roc_figure(run_dir, outcome))
    judged = outcome.judged
    if judged.tradeoff is not None or judged.lower_bound_tradeoff is not None or _has_empirical_points(outcome):
        figures.append(_tradeoff_figure(run_dir, outcome))
    own = presentation_of(outcome.kind).function("figures")
    if own is not None and outcome.detail is not None:  # the kind's own figures, drawn from its block (its
        figures.extend(own(run_dir, outcome))  # record's presentation; none for an outcome built without it)
    figures.extend(_extra_figures(run_dir, outcome))
    for figure in figures:
        figure["uri"] = _data_uri(Path(figure["path"]))
        figure["name"] = Path(figure["path"]).name
    return figures


def _extra_figures(run_dir: Path, outcome: Outcome) -> list[dict]:
    """Figures a runner drew itself, listed in ``figures`` (:class:`audit.stats.outcome.Figure`).

    ``file`` must be a plain ``.png`` file name inside ``run_dir`` (anything else, or a missing
    file, is skipped): a results file can never make the report read outside its run directory.
    """
    extra = []
    for figure in outcome.figures or ():
        name = str(figure.file)
        path = run_dir / name
        if Path(name).name != name or not name.endswith(".png") or not path.is_file():
            continue
        extra.append({"path": path, "title": str(figure.title), "caption": str(figure.caption)})
    return extra


def _headline_name(outcome: Outcome) -> str | None:
    """File name of the figure a report of this kind opens with (the presentation its kind registered,
    :func:`reports.presentation.presentation_of`; None there: the first figure the run lists)."""
    headline = presentation_of(outcome.kind).headline
    if headline is None:
        return next((str(f.file) for f in outcome.figures or ()), None)
    return headline


def _section(title: str, *, figures: list | None = None, tables: list | None = None, rows: list | None = None,
             paragraphs: list | None = None, open: bool = False) -> dict:
    return {"title": title, "figures": figures or [], "tables": tables or [], "rows": rows or [],
            "paragraphs": [p for p in paragraphs or [] if p], "open": open}


def _bounds_table(outcome: Outcome) -> dict | None:
    if not outcome.lower_bounds:
        return None
    best = outcome.best_lower_bound
    rows = []
    for b in outcome.lower_bounds:
        is_best = best is not None and (b.method, b.attack, b.epsilon) == (best.method, best.attack, best.epsilon)
        rows.append([format_value(b.method) + (" (best)" if is_best else ""), format_value(b.attack),
                     format_value(b.epsilon), format_value((b.details or {}).get("mu_lb")),
                     format_value(b.confidence), format_value(b.n), format_value(b.role), format_value(b.statement)])
    caption = ""
    if best is not None:
        caption = (f"The best verdict bound holds at {format_value(best.family_confidence)} confidence across a "
                   f"family of {format_value(best.family_size)} competing bound(s), each computed at the "
                   f"Bonferroni-corrected confidence shown.")
    return {"title": "Every lower bound", "columns": ["method", "attack", "ε lower bound", "μ lower bound",
                                                      "confidence", "observations", "role", "what it bounds"],
            "rows": rows, "caption": caption}


def _attack_details(outcome: Outcome) -> list[dict]:
    """One readable table per attack of everything it reports (curves summarised, not dumped)."""
    tables = []
    for name, attack in sorted((outcome.attacks or {}).items()):
        shown = {k: v for k, v in attack.to_dict().items() if k not in ("roc", "empirical_points")}
        rows = [[key, text] for key, text in flat_rows(shown)]
        rows += [[f"operating point {i + 1}", f"FPR {format_value(p.fpr)} ({format_interval(p.fpr_ci)}), "
                                              f"FNR {format_value(p.fnr)} ({format_interval(p.fnr_ci)})"]
                 for i, p in enumerate(attack.empirical_points or ())]
        tables.append({"title": name, "columns": ["", ""], "rows": rows, "caption": ""})
    return tables


def _verdict_section(outcome: Outcome) -> dict:
    bounds = _bounds_table(outcome)
    theory = outcome.epsilon_theory
    return _section("Verdict and bounds", tables=[t for t in [bounds] if t], paragraphs=[
        f"Verdict: {outcome.verdict.status} — {outcome.verdict.text}",
        outcome.judged.ceiling.text if outcome.judged.ceiling is not None else None,
        f"Theory: ε = {format_value(theory)} at δ = {format_value(outcome.delta)} "
        f"({outcome.audited.accountant or 'no accountant'}); neighbouring relation: "
        f"{outcome.audited.neighbouring or '—'}." if theory is not None else None])


def _sections(outcome: Outcome, config: Mapping[str, Any] | None, more: list[dict]) -> list[dict]:
    """The collapsed sections under the headline, in their order."""
    runner_tables = [format_table(t) for t in outcome.tables or ()]
    if presentation_of(outcome.kind).tables_lead:
        runner_tables = runner_tables[1:]  # the first is the compact table under the headline (attack_table)
    sections = []
    own = presentation_of(outcome.kind).function("sections")
    for title, paragraphs in own(outcome) if own is not None else ():  # the kind's own, open first
        sections.append(_section(title, paragraphs=paragraphs, open=True))
    if more:
        sections.append(_section("More figures", figures=more))
    sections.append(_verdict_section(outcome))
    check_only = outcome.kind_detail.accounting_check() is not None and not outcome.lower_bounds
    sections.extend(_section(t["title"], tables=[t], open=check_only) for t in runner_tables)
    details = _attack_details(outcome)
    if details:
        sections.append(_section("Per-attack details", tables=details))
    audited = outcome.audited
    for block, title in ((audited.params, "Parameters"), (outcome.game and outcome.game.to_dict(), "Audit game"),
                         (audited.model, "Model"), (outcome.stamp.timing, "Timing (s)")):
        if block:
            sections.append(_section(title, rows=flat_rows(block)))
    if config:
        sections.append(_section("Configuration (config.json)", rows=flat_rows(
            {k: v for k, v in config.items() if k not in ("seeds",)})))
    return sections


def build_context(outcome: Outcome, config: Mapping[str, Any] | None, figures: list[dict]) -> dict:
    """Everything the template shows, already formatted as text (the template escapes it): the headline
    (sentences, figure, attack table) and the collapsed sections below it.

    Args:
        outcome: the run's outcome.
        config: the run's config, or None.
        figures: the descriptions of :func:`make_plots`.

    Returns:
        The template's context.
    """
    status = str(outcome.verdict.status)
    headline_name = _headline_name(outcome)
    headline = next((f for f in figures if f["name"] == headline_name), figures[0] if figures else None)
    return {
        "title_target": format_value(outcome.target),
        "kind": format_value(outcome.kind),
        "subtitle": f"created {format_value(outcome.stamp.created)} · seed {format_value(outcome.seed)} · "
                    f"results schema version {format_value(outcome.schema_version)}",
        "verdict": {"status": status, "colour": _VERDICT_COLOURS.get(status, "#e8e8e8")},
        "sentences": headline_sentences(outcome),
        "headline": headline,
        "attack_table": attack_table(outcome),
        "sections": _sections(outcome, config, [f for f in figures if f is not headline]),
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


def render_report(run_dir: Path, outcome: Outcome | None = None,
                  config: Mapping[str, Any] | None = None) -> Path:
    """Render ``run_dir/report.html`` (and re-create its PNGs) from a run's outcome and config.

    The outcome is the typed :class:`audit.stats.outcome.Outcome` a runner returns
    (:meth:`audit.run_context.RunContext.finish`), or, when not given, the one read from ``results.json`` in
    ``run_dir`` (:func:`audit.results_file.load_outcome`: validated against the schema, then typed). A
    missing, corrupt or invalid ``results.json`` raises :class:`audit.errors.UserError`, a missing
    ``config.json`` only omits the config section. Output is deterministic: the same inputs give
    byte-identical PNGs and HTML.

    Args:
        run_dir: the run directory.
        outcome: the run's outcome (default: read from ``results.json``).
        config: the run's config (default: read from ``config.json``, if there).

    Returns:
        The path of ``report.html``.

    Raises:
        UserError: a missing run directory, a missing, corrupt or invalid ``results.json``, or one that holds
            a comparison.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UserError(f"run directory {run_dir} does not exist: pass the directory of a finished run")
    if outcome is None:
        loaded = load_outcome(run_dir / "results.json")
        if not isinstance(loaded, Outcome):
            raise UserError(f"{run_dir} holds a comparison, not a run: open its compare.html")
        outcome = loaded
    if config is None:
        config = load_run_json(run_dir, "config.json", required=False)
    figures = make_plots(run_dir, outcome)
    html = _environment().get_template("report.html.j2").render(**build_context(outcome, config, figures))
    return atomic_write_text(run_dir / REPORT_HTML, html)
