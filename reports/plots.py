"""Plots for audit reports (matplotlib figures drawn on the Agg canvas, deterministic PNG bytes).

The plots build :class:`matplotlib.figure.Figure` objects directly and never touch pyplot, so
importing this module selects no backend: the workbench draws without a display, and a user's own
matplotlib set-up (a notebook, an interactive backend) is left alone. Every function renders into
memory (``BytesIO``) and writes the file with
:func:`audit.io.atomic_write_bytes`, so a crash never leaves a half-written PNG. Figures use a fixed
size and dpi and the PNG metadata is emptied (no ``Software`` text chunk, no timestamp), so the
same input gives byte-identical files.

The curves drawn are the hypothesis-testing view of differential privacy [Kairouz, Oh, Viswanath
2015; Dong, Roth, Su 2019 "Gaussian Differential Privacy"]: a mechanism with tradeoff function
``f`` forces every membership test to have ``FNR >= f(FPR)``, equivalently ``TPR <= 1 - f(FPR)``.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from audit.io import atomic_write_bytes
from audit.stats.outcome import AttackMetrics, Curve, ExtractionMethod, Outcome, SweepPoint
from audit.stats.rates import cp_upper_array
from audit.theory.claims import ApproxDPClaim

#: Fixed output resolution; with the fixed figure sizes below this fixes the pixel size.
DPI = 100
#: Colours assigned to attacks in sorted-name order, the same in every plot of a report.
_COLOURS = matplotlib.colormaps["tab10"].colors
#: Smallest FPR drawn on logarithmic axes (an FPR of 0 cannot be shown on a log axis).
_MIN_LOG_FPR = 1e-5

#: Font sizes chosen so that a figure shown at its pixel size is readable on a laptop screen.
RC_PARAMS = {
    "font.size": 11,
    "axes.titlesize": 12,
    "axes.labelsize": 11,
    "legend.fontsize": 10,
    "svg.hashsalt": "privacy-audit",
    "path.simplify": False,
}


def as_number(value: Any) -> float | None:
    """A float from a JSON value (numbers, ``"inf"``/``"-inf"`` strings as written by
    :func:`audit.io.to_jsonable`); ``None`` for anything else.

    Args:
        value: a JSON value.

    Returns:
        The float, or None.
    """
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def as_float_array(values: Any) -> np.ndarray:
    """A float array from a JSON list (non-numbers become NaN).

    Args:
        values: a JSON list.

    Returns:
        The array.
    """
    if values is None:
        return np.zeros(0)
    out = [as_number(v) for v in values]
    return np.array([np.nan if v is None else v for v in out], dtype=float)


def attack_colours(names: Iterable[str]) -> dict[str, tuple]:
    """Colour per attack name, assigned in sorted order so every plot agrees.

    Args:
        names: the attack names.

    Returns:
        A colour per name.
    """
    return {name: _COLOURS[i % len(_COLOURS)] for i, name in enumerate(sorted(names))}


def save_png(fig: Figure, path: str | os.PathLike, tight: bool = False) -> Path:
    """Render ``fig`` to PNG bytes without metadata and write them atomically; ``tight`` grows or
    trims the canvas to what was drawn (a legend placed below the axes).

    Args:
        fig: the figure.
        path: where the PNG goes.
        tight: fit the canvas to what was drawn.

    Returns:
        The written path.
    """
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None}, bbox_inches="tight" if tight else None)
    return atomic_write_bytes(path, buffer.getvalue())


def save_with_legend_below(fig: Figure, legend_axes: Any, path: str | os.PathLike, columns: int = 1) -> Path:
    """Lay ``fig`` out, put the legend of ``legend_axes`` below the axes in ``columns`` columns, and write it
    (:func:`save_png`, canvas grown to the legend).

    Args:
        fig: the figure.
        legend_axes: the axes whose legend is drawn.
        path: where the PNG goes.
        columns: the legend's columns.

    Returns:
        The written path.
    """
    fig.tight_layout()
    handles, labels = legend_axes.get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=columns, frameon=False)
    return save_png(fig, path, tight=True)


def new_figure(figsize: tuple[float, float], rows: int = 1, cols: int = 1, **kwargs: Any) -> tuple[Figure, Any]:
    """A figure (no pyplot, no backend) and its axes, as ``pyplot.subplots`` would return them.

    Args:
        figsize: (width, height) in inches.
        rows: rows of axes.
        cols: columns of axes.
        **kwargs: passed to ``Figure.subplots``.

    Returns:
        (figure, axes).
    """
    fig = Figure(figsize=figsize)
    return fig, fig.subplots(rows, cols, **kwargs)


def _log_floor(values: Iterable[float]) -> float:
    """Lower limit of a log FPR axis: the power of ten at or below the smallest positive value."""
    positive = [v for v in values if v is not None and np.isfinite(v) and v > 0]
    smallest = min(positive) if positive else 1e-3
    floor = 10.0 ** math.floor(math.log10(smallest))
    return max(min(floor, 1e-2), _MIN_LOG_FPR)


def roc_plot(
    attacks: Mapping[str, AttackMetrics],
    path: str | os.PathLike,
    theory_tradeoff: Curve | None = None,
    confidence: float | None = None,
) -> Path:
    """Log-log ROC curves (TPR against FPR) of every attack, overlaid.

    ``attacks`` is the outcome's ``attacks``; each attack's ``roc`` holds ``fpr`` and ``tpr`` lists.
    The diagonal is random guessing. When ``theory_tradeoff`` (the claim's curve) is given, the
    best ROC any attack can reach under the claim, ``TPR = 1 - f(FPR)`` [Dong, Roth, Su 2019,
    Def. 2.1-2.2: ``f(alpha)`` is the smallest type-II error at type-I error ``alpha``], is drawn
    as "DP limit". Log-log axes show the low-FPR regime that matters for membership inference
    [Carlini et al. 2022, "Membership inference attacks from first principles", Sec. 3].
    With ``confidence``, each attack with ``n_members``/``n_nonmembers`` also gets its pointwise confidence
    band (:func:`roc_band`). Returns the written path.

    Args:
        attacks: the outcome's ``attacks``.
        path: where the PNG goes.
        theory_tradeoff: the claim's curve, or None.
        confidence: the bands' confidence, or None for no band.

    Returns:
        The written path.
    """
    colours = attack_colours(attacks)
    all_fpr: list[float] = []
    curves = {}
    for name in sorted(attacks):
        fpr, tpr = as_float_array(attacks[name].roc.fpr), as_float_array(attacks[name].roc.tpr)
        if fpr.size == 0 or fpr.size != tpr.size:
            continue
        keep = np.isfinite(fpr) & np.isfinite(tpr)
        curves[name] = (fpr[keep], tpr[keep])
        all_fpr.extend(fpr[keep].tolist())
    lo = _log_floor(all_fpr)
    with matplotlib.rc_context(RC_PARAMS):
        fig, ax = new_figure((6.4, 5.2))
        grid = np.logspace(math.log10(lo), 0, 200)
        ax.plot(grid, grid, linestyle=":", color="0.45", linewidth=1, label="chance (TPR = FPR)")
        if theory_tradeoff is not None:
            alpha, beta = as_float_array(theory_tradeoff.alpha), as_float_array(theory_tradeoff.beta)
            keep = np.isfinite(alpha) & np.isfinite(beta) & (alpha >= lo)
            if keep.any():
                order = np.argsort(alpha[keep])
                ax.plot(alpha[keep][order], np.clip(1.0 - beta[keep][order], lo, 1.0), color="black",
                        linewidth=1.6, label="DP limit (TPR = 1 - f(FPR))")
        for name, (fpr, tpr) in curves.items():
            band = roc_band(fpr, tpr, attacks[name], confidence) if confidence else None
            if band is not None:
                ax.fill(np.clip(band[0], lo, 1.0), np.clip(band[1], lo, 1.0), color=colours[name], alpha=0.18,
                        linewidth=0, label=f"{name}: pointwise {confidence:.0%} Clopper–Pearson box per point")
            auc = as_number(attacks[name].auc)
            label = f"{name} (AUC {auc:.3f})" if auc is not None else name
            ax.step(np.clip(fpr, lo, 1.0), np.clip(tpr, lo, 1.0), where="post", color=colours[name],
                    linewidth=1.4, label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, 1.0)
        ax.set_ylim(lo, 1.02)
        ax.set_xlabel("false positive rate")
        ax.set_ylabel("true positive rate")
        ax.set_title("ROC of membership attacks (log-log)")
        ax.grid(True, which="major", linewidth=0.4, color="0.85")
        ax.legend(loc="lower right", frameon=True)
        fig.tight_layout()
        return save_png(fig, path)


def deciding_configuration_epsilon(outcome: Outcome) -> float | None:
    """The epsilon of the configuration the code runs (the ``config.epsilon`` of the kind's accounting check,
    :meth:`audit.stats.outcome.Detail.accounting_check`, by the accountant) when the accounting check decided a
    violation with it above the claim; else None.

    Args:
        outcome: the run's outcome.

    Returns:
        The configuration's epsilon, or None.
    """
    check = outcome.kind_detail.accounting_check()
    config = (check.config if check is not None else None) or {}
    eps, theory = as_number(config.get("epsilon")), as_number(outcome.epsilon_theory)
    if outcome.verdict.status != "violation" or eps is None or theory is None or not math.isfinite(eps):
        return None
    return eps if eps > theory * (1 + 1e-9) else None


def rejected_claim(outcome: Outcome) -> str | None:
    """How the claim's own tradeoff curve was rejected (the test and its confidence) when that rejection, and
    no bound above the claim, decided a violation; else None.

    Args:
        outcome: the run's outcome.

    Returns:
        The description, or None.
    """
    best = outcome.best_lower_bound
    theory, bound = as_number(outcome.epsilon_theory), as_number(best.epsilon if best is not None else None)
    rejecting = outcome.claim_rejecting_bound()
    if outcome.verdict.status != "violation" or rejecting is None or theory is None or \
            (bound is not None and bound > theory):
        return None
    confidence = as_number(best.family_confidence if best is not None else outcome.confidence)
    return f"{rejecting.method} test" + (f" at {confidence:.0%}" if confidence is not None else "")


def roc_band(fpr: np.ndarray, tpr: np.ndarray, attack: AttackMetrics,
             confidence: float) -> tuple[np.ndarray, np.ndarray] | None:
    """The outline (x, y) of the union of the ROC points' two-sided Clopper–Pearson boxes at ``confidence``
    (each rate's interval at ``(1 - confidence)/2`` per side, from the counts ``fpr x n_nonmembers`` and
    ``tpr x n_members``; Clopper & Pearson 1934): upper edge through (FPR lower, TPR upper), lower edge
    through (FPR upper, TPR lower). Pointwise, not simultaneous; None without the counts.

    Args:
        fpr: the ROC curve's false-positive rates.
        tpr: its true-positive rates.
        attack: the attack's results (``n_members``, ``n_nonmembers``).
        confidence: the boxes' confidence.

    Returns:
        (x, y) of the outline, or None.
    """
    n_pos, n_neg = as_number(attack.n_members), as_number(attack.n_nonmembers)
    if not n_pos or not n_neg or fpr.size == 0:
        return None
    half = (1.0 - confidence) / 2
    k_neg, k_pos = np.rint(fpr * n_neg), np.rint(tpr * n_pos)
    fpr_hi, tpr_hi = cp_upper_array(k_neg, int(n_neg), half), cp_upper_array(k_pos, int(n_pos), half)
    fpr_lo = 1.0 - cp_upper_array(n_neg - k_neg, int(n_neg), half)
    tpr_lo = 1.0 - cp_upper_array(n_pos - k_pos, int(n_pos), half)
    # step outlines (ROC steps are drawn "post"): up along the upper edge, back along the lower edge
    x_up, y_up = np.repeat(fpr_lo, 2)[1:], np.repeat(tpr_hi, 2)[:-1]
    x_down, y_down = np.repeat(fpr_hi, 2)[1:], np.repeat(tpr_lo, 2)[:-1]
    return np.concatenate([x_up, x_down[::-1]]), np.concatenate([y_up, y_down[::-1]])


def _draw_points(ax: Any, attacks: Mapping[str, AttackMetrics], colours: dict, x_log_floor: float | None) -> None:
    """Each attack's empirical (FPR, FNR) points with their confidence boxes, on ``ax``."""
    floor = x_log_floor if x_log_floor is not None else 0.0
    for name in sorted(attacks):
        labelled = False
        for point in attacks[name].empirical_points or ():
            fpr, fnr = as_number(point.fpr), as_number(point.fnr)
            if fpr is None or fnr is None:
                continue
            colour = colours[name]
            fpr_ci = [as_number(v) for v in (point.fpr_ci or [])]
            fnr_ci = [as_number(v) for v in (point.fnr_ci or [])]
            if len(fpr_ci) == 2 and len(fnr_ci) == 2 and None not in fpr_ci and None not in fnr_ci:
                x0 = max(fpr_ci[0], floor) if x_log_floor else fpr_ci[0]
                x1 = max(fpr_ci[1], x0)
                ax.add_patch(Rectangle((x0, fnr_ci[0]), x1 - x0, fnr_ci[1] - fnr_ci[0], facecolor=colour,
                                       edgecolor=colour, alpha=0.18, linewidth=0.8))
            ax.plot([max(fpr, floor) if x_log_floor else fpr], [fnr], marker="o", markersize=4.5, color=colour,
                    linestyle="none", label=None if labelled else f"{name} (with CI box)")
            labelled = True


def _draw_tradeoff_panel(ax: Any, outcome: Outcome, colours: dict, x_log_floor: float | None) -> None:
    """Draw theory curve, (eps_LB, delta) curve, chance line and empirical points on ``ax``."""
    floor = x_log_floor if x_log_floor is not None else 0.0
    grid = np.logspace(math.log10(x_log_floor), 0, 200) if x_log_floor else np.linspace(0, 1, 201)
    ax.plot(grid, 1.0 - grid, linestyle=":", color="0.45", linewidth=1, label="chance (FNR = 1 - FPR)")
    theory = outcome.judged.tradeoff
    if theory is not None:
        alpha, beta = as_float_array(theory.alpha), as_float_array(theory.beta)
        keep = np.isfinite(alpha) & np.isfinite(beta) & (alpha >= floor)
        if keep.any():
            order = np.argsort(alpha[keep])
            eps = as_number(outcome.epsilon_theory)
            label = "theory f (upper bound)" if eps is None else f"theory f, ε = {eps:.3g} (upper bound)"
            rejected = rejected_claim(outcome)
            if rejected:
                label = f"claim's f, ε = {eps:.3g}: REJECTED ({rejected})"
            ax.plot(alpha[keep][order], beta[keep][order], color="black", linewidth=2.4 if rejected else 1.6,
                    label=label)
    config_eps = deciding_configuration_epsilon(outcome)
    if config_eps is not None:
        delta = as_number(outcome.delta) or 0.0
        grid_alpha = np.unique(np.concatenate([grid, np.logspace(-5, 0, 121)]))
        grid_alpha = grid_alpha[grid_alpha >= floor]
        ax.plot(grid_alpha, ApproxDPClaim(config_eps, delta).tradeoff(grid_alpha), color="tab:purple",
                linewidth=1.8, label=f"f_(ε,δ) of the configuration the code runs, ε = {config_eps:.3g}, "
                                     f"δ = {delta:.3g} (decided the violation)")
    lb_curve = outcome.judged.lower_bound_tradeoff
    if lb_curve is not None:
        alpha, beta = as_float_array(lb_curve.alpha), as_float_array(lb_curve.beta)
        keep = np.isfinite(alpha) & np.isfinite(beta) & (alpha >= floor)
        if keep.any():
            order = np.argsort(alpha[keep])
            eps, delta = as_number(lb_curve.epsilon), as_number(lb_curve.delta)
            label = "f_{ε,δ} at the lower bound"
            if eps is not None and delta is not None:
                label = f"f_(ε,δ) at lower bound ε = {eps:.3g}, δ = {delta:.3g}"
            ax.plot(alpha[keep][order], beta[keep][order], color="tab:red", linestyle="--", linewidth=1.4,
                    label=label)
    _draw_points(ax, outcome.attacks or {}, colours, x_log_floor)


def tradeoff_plot(outcome: Outcome, path: str | os.PathLike) -> Path:
    """Tradeoff plot: FNR (beta) against FPR (alpha).

    Draws the theory tradeoff curve ``f(alpha)`` of the claim (``tradeoff``) — every
    test of an honest mechanism lies on or above it [Dong, Roth, Su 2019, Def. 2.2-2.3]; the curve
    ``f_{eps,delta}(alpha) = max(0, 1 - delta - e^eps alpha, e^-eps (1 - delta - alpha))``
    [Kairouz et al. 2015, Thm. 2.1; Dong, Roth, Su Prop. 2.5] at the empirical lower bound
    (``lower_bound_tradeoff``); and each attack's empirical (FPR, FNR) points with
    rectangular confidence boxes ``fpr_ci x fnr_ci``. Left panel: linear axes on [0, 1]; right
    panel: logarithmic FPR axis, zooming into low FPR. Returns the written path.

    Args:
        outcome: the run's outcome.
        path: where the PNG goes.

    Returns:
        The written path.
    """
    attacks = outcome.attacks or {}
    colours = attack_colours(attacks)
    low_values: list[float] = []
    for name in attacks:
        for point in attacks[name].empirical_points or ():
            low_values.append(as_number(point.fpr) or 0.0)
            low_values.extend(as_number(v) or 0.0 for v in (point.fpr_ci or []))
    lo = min(_log_floor(low_values), 1e-3)
    with matplotlib.rc_context(RC_PARAMS):
        fig, (left, right) = new_figure((11.0, 5.0), 1, 2)
        _draw_tradeoff_panel(left, outcome, colours, None)
        left.set_xlim(0, 1)
        left.set_ylim(0, 1)
        left.set_aspect("equal")
        left.set_title("Tradeoff: FNR vs FPR (linear)")
        _draw_tradeoff_panel(right, outcome, colours, lo)
        right.set_xscale("log")
        right.set_xlim(lo, 1)
        right.set_ylim(0, 1.0)
        right.set_title("Zoom on low FPR (log FPR axis)")
        for ax in (left, right):
            ax.set_xlabel("false positive rate α (FPR)")
            ax.set_ylabel("false negative rate β (FNR)")
            ax.grid(True, linewidth=0.4, color="0.85")
        labels = left.get_legend_handles_labels()[1]
        return save_with_legend_below(fig, left, path, columns=min(3, max(1, len(labels))))


def epsilon_plot(rows: Sequence[SweepPoint], path: str | os.PathLike) -> Path:
    """Empirical epsilon lower bound against theoretical epsilon, one series per group.

    ``rows`` are a sweep's points (``epsilon_theory``, ``epsilon_lb`` and ``series``, e.g. the attack or
    canary kind of a sweep). Points below the ``y = x`` line are consistent with the claim; a
    point above it means the claim is broken or the accounting is wrong (an empirical lower bound
    can never exceed a correct upper bound) [Jagielski, Ullman, Oprea 2020, Sec. 4; Nasr et al.
    2021, Sec. 5]. Returns the written path.

    Args:
        rows: the points, as above.
        path: where the PNG goes.

    Returns:
        The written path.
    """
    groups: dict[str, list[tuple[float, float]]] = {}
    for row in rows:
        theory, lb = as_number(row.epsilon_theory), as_number(row.epsilon_lb)
        if theory is None or lb is None or not (math.isfinite(theory) and math.isfinite(lb)):
            continue
        groups.setdefault(str(row.series), []).append((theory, lb))
    colours = attack_colours(groups)
    top = max([1.0] + [max(first, second) for pts in groups.values() for first, second in pts]) * 1.08
    with matplotlib.rc_context(RC_PARAMS):
        fig, ax = new_figure((7.0, 5.2))
        ax.plot([0, top], [0, top], linestyle=":", color="0.3", linewidth=1.2, label="y = x (bound = theory)")
        for name in sorted(groups):
            points = sorted(groups[name])
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", markersize=4.5, linewidth=1.3,
                    color=colours[name], label=name)
        ax.set_xlim(0, top)
        ax.set_ylim(0, top)
        ax.set_xlabel("theoretical ε (upper bound)")
        ax.set_ylabel("empirical ε lower bound")
        ax.set_title("Empirical lower bound vs theory")
        ax.grid(True, linewidth=0.4, color="0.85")
        ax.legend(loc="upper left")
        fig.tight_layout()
        return save_png(fig, path)


def claim_plot(curves: Sequence[Mapping[str, Any]], path: str | os.PathLike, title: str) -> Path:
    """Tradeoff curves of a privacy claim, e.g. the exact curve with a Gaussian-DP summary overlaid.

    ``curves`` are dicts with ``alpha``, ``beta``, ``label`` and optionally ``style`` (a matplotlib
    line style). Left panel: linear axes with the diagonal ``beta = 1 - alpha`` (no privacy loss)
    for reference; right panel: logarithmic FPR axis down to 1e-5, where the curves of tight and
    loose guarantees differ most [Dong, Roth, Su 2019, Sec. 2]. Returns the written path.

    Args:
        curves: the curves, as above.
        path: where the PNG goes.
        title: the figure's title.

    Returns:
        The written path.
    """
    colours = attack_colours([str(c["label"]) for c in curves])
    with matplotlib.rc_context(RC_PARAMS):
        fig, (left, right) = new_figure((11.0, 5.0), 1, 2)
        for ax, log in ((left, False), (right, True)):
            grid = np.logspace(math.log10(_MIN_LOG_FPR), 0, 200) if log else np.linspace(0, 1, 200)
            ax.plot(grid, 1 - grid, linestyle=":", color="0.4", linewidth=1.0, label="no privacy loss (β = 1 - α)")
            for curve in curves:
                alpha, beta = as_float_array(curve["alpha"]), as_float_array(curve["beta"])
                keep = alpha >= _MIN_LOG_FPR if log else np.ones_like(alpha, dtype=bool)
                ax.plot(alpha[keep], beta[keep], linestyle=curve.get("style", "-"), linewidth=1.5,
                        color=colours[str(curve["label"])], label=str(curve["label"]))
            ax.set_xlabel("false positive rate α (FPR)")
            ax.set_ylabel("least false negative rate β = f(α)")
            ax.set_ylim(0, 1)
            ax.grid(True, linewidth=0.4, color="0.85")
        left.set_xlim(0, 1)
        left.set_aspect("equal")
        left.set_title("Tradeoff curve (linear)")
        right.set_xscale("log")
        right.set_xlim(_MIN_LOG_FPR, 1)
        right.set_title("Zoom on low FPR (log FPR axis)")
        fig.suptitle(title)
        return save_with_legend_below(fig, left, path)


def extraction_plot(methods: Sequence[ExtractionMethod], path: str | os.PathLike) -> Path:
    """What each extraction attack got for its queries: relative parameter error (log axis) and the
    agreement of the stolen model with the served one on test and on uniform inputs
    [Tramèr et al. 2016, Sec. 4-5]. ``methods`` are the outcome's ``extraction.methods``.

    Args:
        methods: the extraction methods' results.
        path: where the PNG goes.

    Returns:
        The written path.
    """
    names = [f"{m.method}\n({int(as_number(m.queries) or 0):,} queries)" for m in methods]
    error = [max(as_number(m.param_rel_error) or 0.0, 1e-16) for m in methods]
    y = np.arange(len(methods))
    with matplotlib.rc_context(RC_PARAMS):
        fig, (left, right) = new_figure((11.0, 1.2 + 0.9 * len(methods)), 1, 2, sharey=True)
        left.barh(y, error, color="tab:blue")
        left.set_xscale("log")
        left.set_xlabel("relative parameter error (log scale)")
        left.set_yticks(y, names)
        left.invert_yaxis()
        for offset, key, colour, label in ((-0.2, "agreement_test", "tab:green", "test data"),
                                           (0.2, "agreement_uniform", "tab:orange", "uniform inputs")):
            right.barh(y + offset, [as_number(getattr(m, key)) or 0.0 for m in methods], height=0.4, color=colour,
                       label=label)
        right.set_xlim(0, 1)
        right.set_xlabel("agreement with the served model")
        right.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.6 / len(methods)), ncol=2, frameon=False)
        for ax in (left, right):
            ax.grid(True, axis="x", linewidth=0.4, color="0.85")
        fig.tight_layout()
        return save_png(fig, path)
