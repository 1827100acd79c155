"""Comparison of finished membership runs: one table and one overlaid log-log ROC figure.

Typical use: the same audit on a non-private target and on DP targets at several epsilons. For each
run and attack the table gives AUC and TPR at 1% and 0.1% FPR with Clopper–Pearson intervals
[Carlini et al. 2022, Sec. III], the membership advantage with the DP bound on it
((e^eps - 1 + 2 delta)/(e^eps + 1), :func:`audit.stats.metrics.dp_advantage_bound`) and the run's best
valid epsilon lower bound. The figure overlays every run's ROC curves (one colour per run, one line
style per attack) with each DP run's theoretical limit ``TPR = 1 - f(FPR)`` [Dong, Roth, Su 2019].

Rendering only: nothing is retrained; the inputs are the runs' ``results.json`` files. Outputs are
deterministic (a Figure on the Agg canvas, fixed size and dpi, no PNG metadata) and written atomically.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Sequence
from pathlib import Path

import jinja2
import matplotlib
import numpy as np

from audit.errors import UserError
from audit.io import atomic_write_bytes, atomic_write_text
from audit.results_file import load_outcome, write_outcome
from audit.stats.metrics import dp_advantage_bound
from audit.stats.outcome import CompareRow, Comparison, Outcome
from reports.formatting import format_interval, format_value
from reports.plots import as_float_array, as_number, new_figure

COMPARE_PNG = "compare_roc.png"
COMPARE_HTML = "compare.html"
COMPARE_JSON = "compare.json"
_MIN_LOG_FPR = 1e-4
_STYLES = ("-", "--", "-.", ":", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 2)))
_COLUMNS = ["run", "target", "ε theory", "δ", "attack", "AUC", "TPR at 1% FPR", "95% CI", "TPR at 0.1% FPR",
            "95% CI ", "advantage", "advantage interval", "DP bound on advantage", "best valid ε lower bound"]


def load_runs(run_dirs: Sequence[str | Path]) -> list[tuple[Path, Outcome]]:
    """``(run_dir, outcome)`` per directory (each ``results.json`` read once, by
    :func:`audit.results_file.load_outcome`); UserError for a missing or unusable run.

    Args:
        run_dirs: the run directories.

    Returns:
        ``(run_dir, outcome)`` pairs, in the order given.

    Raises:
        UserError: no directory, a missing directory, an invalid results.json, or a run without attack results.
    """
    if len(run_dirs) < 1:
        raise UserError("compare needs at least one run directory: python -m audit compare RUN_DIR...")
    runs = []
    for item in run_dirs:
        path = Path(item)
        if not path.is_dir():
            raise UserError(f"run directory {path} does not exist: pass directories of finished runs")
        outcome = load_outcome(path / "results.json")
        if not isinstance(outcome, Outcome) or not outcome.attacks:
            raise UserError(f"{path / 'results.json'} has no attack results: compare membership runs")
        runs.append((path, outcome))
    return runs


def run_label(outcome: Outcome) -> str:
    """``target (ε = x)`` or ``target (non-private)``.

    Args:
        outcome: a run's outcome.

    Returns:
        The label.
    """
    eps = as_number(outcome.epsilon_theory)
    privacy = "non-private" if eps is None else f"ε = {eps:.3g}"
    return f"{outcome.target} ({privacy})"


def _labels(runs: Sequence[tuple[Path, Outcome]]) -> list[str]:
    labels = [run_label(r) for _, r in runs]
    return [f"{label} [{path.name}]" if labels.count(label) > 1 else label
            for label, (path, _) in zip(labels, runs, strict=True)]


def comparison_rows(runs: Sequence[tuple[Path, Outcome]], attacks: Sequence[str] | None = None) -> list[CompareRow]:
    """One row per (run, attack), attacks in name order; ``attacks`` restricts the names.

    Args:
        runs: ``(run_dir, outcome)`` pairs, as :func:`load_runs` returns them.
        attacks: the attack names to keep (default: all).

    Returns:
        The rows.

    Raises:
        UserError: none of the runs has the attacks asked for.
    """
    rows = []
    for label, (path, outcome) in zip(_labels(runs), runs, strict=True):
        eps, delta = as_number(outcome.epsilon_theory), as_number(outcome.delta)
        bound = dp_advantage_bound(eps, delta) if eps is not None and delta is not None else None
        best = outcome.best_lower_bound
        best_eps = as_number(best.epsilon) if best is not None else None
        for name in sorted(outcome.attacks):
            if attacks and name not in attacks:
                continue
            a = outcome.attacks[name]
            tpr, ci = a.tpr_at_fpr, a.tpr_at_fpr_ci
            rows.append(CompareRow(run=label, run_dir=str(path), target=outcome.target, epsilon_theory=eps,
                                   delta=delta, attack=name, auc=as_number(a.auc), tpr_1=as_number(tpr.get("0.01")),
                                   tpr_1_ci=ci.get("0.01"), tpr_01=as_number(tpr.get("0.001")),
                                   tpr_01_ci=ci.get("0.001"), advantage=as_number(a.advantage),
                                   advantage_ci=a.advantage_ci, advantage_dp_bound=bound,
                                   best_epsilon_lower_bound=best_eps))
    if not rows:
        raise UserError(f"none of the runs has the attacks {', '.join(attacks or [])}; drop --attack or pick "
                        "attack names from their results.json")
    return rows


def _cells(row: CompareRow) -> list[str]:
    theory = format_value(row.epsilon_theory) if row.epsilon_theory is not None else "none"
    return [row.run, str(row.target), theory, format_value(row.delta), row.attack, format_value(row.auc),
            format_value(row.tpr_1), format_interval(row.tpr_1_ci), format_value(row.tpr_01),
            format_interval(row.tpr_01_ci), format_value(row.advantage), format_interval(row.advantage_ci),
            format_value(row.advantage_dp_bound), format_value(row.best_epsilon_lower_bound)]


def compare_roc_plot(runs: Sequence[tuple[Path, Outcome]], path: str | Path,
                     attacks: Sequence[str] | None = None) -> Path:
    """Log-log ROC of every (run, attack) with each DP run's limit ``1 - f(FPR)`` as a thick faint line.

    Args:
        runs: ``(run_dir, outcome)`` pairs, as :func:`load_runs` returns them.
        path: where the PNG goes.
        attacks: the attack names to draw (default: all).

    Returns:
        The written path.
    """
    labels = _labels(runs)
    names = sorted({n for _, r in runs for n in r.attacks if not attacks or n in attacks})
    styles = {n: _STYLES[i % len(_STYLES)] for i, n in enumerate(names)}
    colours = matplotlib.colormaps["tab10"].colors
    lo = _MIN_LOG_FPR
    with matplotlib.rc_context({"font.size": 11, "legend.fontsize": 8.5, "path.simplify": False}):
        fig, ax = new_figure((6.4, 5.8))
        grid = np.logspace(math.log10(lo), 0, 200)
        ax.plot(grid, grid, linestyle=":", color="0.5", linewidth=1, label="chance (TPR = FPR)")
        for i, (label, (_, outcome)) in enumerate(zip(labels, runs, strict=True)):
            colour = colours[i % len(colours)]
            tradeoff = outcome.judged.tradeoff
            alpha = as_float_array(tradeoff.alpha if tradeoff is not None else None)
            beta = as_float_array(tradeoff.beta if tradeoff is not None else None)
            if alpha.size and alpha.size == beta.size:
                keep = np.isfinite(alpha) & np.isfinite(beta) & (alpha >= lo)
                order = np.argsort(alpha[keep])
                ax.plot(alpha[keep][order], np.clip(1 - beta[keep][order], lo, 1), color=colour, linewidth=3.5,
                        alpha=0.3, label=f"{label}: DP limit 1 - f(FPR)")
            for name in names:
                a = outcome.attacks.get(name)
                if a is None:
                    continue
                fpr, tpr = as_float_array(a.roc.fpr), as_float_array(a.roc.tpr)
                if fpr.size == 0 or fpr.size != tpr.size:
                    continue
                auc = as_number(a.auc)
                ax.step(np.clip(fpr, lo, 1), np.clip(tpr, lo, 1), where="post", color=colour, linestyle=styles[name],
                        linewidth=1.2, label=f"{label}: {name}" + (f" (AUC {auc:.3f})" if auc is not None else ""))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, 1)
        ax.set_ylim(lo, 1.02)
        ax.set_xlabel("false positive rate")
        ax.set_ylabel("true positive rate")
        ax.set_title("Membership attacks across runs (log-log ROC)")
        ax.grid(True, which="major", linewidth=0.4, color="0.85")
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
        fig.tight_layout()
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=100, metadata={"Software": None}, bbox_inches="tight")
    return atomic_write_bytes(path, buffer.getvalue())




def compare_sentences(runs: Sequence[tuple[Path, Outcome]], rows: Sequence[CompareRow]) -> list[str]:
    """The two plain sentences that open the comparison: what was compared, and what it shows.

    Args:
        runs: ``(run_dir, outcome)`` pairs, as :func:`load_runs` returns them.
        rows: the rows of :func:`comparison_rows`.

    Returns:
        The two sentences.
    """
    labels = _labels(runs)
    compared = f"What was compared: {len(runs)} finished membership run(s) — {'; '.join(labels)}."
    scored = [r for r in rows if r.auc is not None]
    if not scored:
        return [compared, "What it shows: no attack reported an AUC."]
    top = max(scored, key=lambda r: r.auc)
    over = [r for r in rows if _above_bound(r)]
    found = (f"What it shows: the strongest attack is {top.attack} on {top.run} (AUC {format_value(top.auc)}, "
             f"TPR {format_value(top.tpr_01)} at 0.1% FPR); ")
    found += (f"{len(over)} attack(s) beat their DP bound on advantage beyond sampling error." if over else
              "no DP run's advantage interval lies above its DP bound.")
    return [compared, found]


def _above_bound(row: CompareRow) -> bool:
    """True when the advantage interval's lower end exceeds the DP bound (the valid check)."""
    ci = row.advantage_ci
    if row.advantage_dp_bound is None or not isinstance(ci, (list, tuple)) or len(ci) != 2:
        return False
    lo = as_number(ci[0])
    return lo is not None and lo > row.advantage_dp_bound


def compare_runs(run_dirs: Sequence[str | Path], out_dir: str | Path,
                 attacks: Sequence[str] | None = None) -> Comparison:
    """Write ``compare.json``, ``compare_roc.png`` and ``compare.html`` for ``run_dirs`` into ``out_dir``.

    Returns the comparison (:class:`audit.stats.outcome.Comparison`, written as ``compare.json`` by
    :func:`audit.results_file.write_outcome`).

    Args:
        run_dirs: the run directories.
        out_dir: where the three files go.
        attacks: the attack names to compare (default: all).

    Returns:
        The comparison, as above.

    Raises:
        UserError: as :func:`load_runs` and :func:`comparison_rows`.
    """
    runs = load_runs(run_dirs)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = comparison_rows(runs, attacks)
    png = compare_roc_plot(runs, out / COMPARE_PNG, attacks)
    uri = "data:image/png;base64," + base64.b64encode(png.read_bytes()).decode("ascii")
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(Path(__file__).resolve().parent / "templates")),
                             autoescape=True, undefined=jinja2.StrictUndefined)
    html = env.get_template("compare.html.j2").render(
        columns=_COLUMNS, figure=uri, sentences=compare_sentences(runs, rows),
        rows=[{"cells": _cells(r), "over": _above_bound(r)} for r in rows],
        runs=[{"label": label, "dir": str(path)} for label, (path, _) in zip(_labels(runs), runs, strict=True)])
    html_path = atomic_write_text(out / COMPARE_HTML, html)
    comparison = Comparison(runs=[str(p) for p, _ in runs], rows=tuple(rows), figure=str(png), html=str(html_path))
    write_outcome(out / COMPARE_JSON, comparison)
    return comparison
