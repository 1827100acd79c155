"""Figure of the reconstruction game: success against kappa with the ReRo bound (docs/references.md,
"Reconstruction robustness")."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np

from reports.plots import RC_PARAMS, new_figure, save_png, save_with_legend_below


def rero_success_plot(points: Sequence[Mapping[str, Any]], curve: Mapping[str, Any] | None, path: str | os.PathLike,
                      title: str) -> Path:
    """Success rate of the attack at each ``kappa = 1/n`` with its interval, the non-private twin's beside it,
    the ReRo bound curve ``1 - f(kappa)`` (``curve``: ``kappa``, ``bound`` arrays; None without a claim) and
    the baseline ``kappa`` (guessing), on a log kappa axis.

    Args:
        points: one dict per kappa (``kappa``, the success rates and their ``_ci`` intervals).
        curve: the bound curve, or None.
        path: where the PNG goes.
        title: the figure's title.

    Returns:
        The written path.
    """
    kappa = np.array([p["kappa"] for p in points])
    with matplotlib.rc_context(RC_PARAMS):
        fig, ax = new_figure((7.5, 5.0))
        grid = np.logspace(np.log10(kappa.min()) - 0.3, 0, 200)
        ax.plot(grid, grid, linestyle=":", color="0.4", label="no output: kappa (guessing)")
        if curve is not None:
            ax.plot(curve["kappa"], curve["bound"], color="C3", label="ReRo bound of the claim, 1 - f(kappa)")
        for key, label, colour, shift in (("success", "attack on the target", "C0", 1.0),
                                          ("twin_success", "attack on the non-private twin", "C2", 1.12)):
            if key not in points[0]:
                continue
            rate = np.array([p[key] for p in points])
            ci = np.array([p[f"{key}_ci"] for p in points])
            ax.errorbar(kappa * shift, rate, yerr=[rate - ci[:, 0], ci[:, 1] - rate], fmt="o", color=colour,
                        capsize=4, label=f"{label} (Clopper–Pearson, family-wise)")
        ax.set_xscale("log")
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("kappa = 1/n (success without the model, n candidates)")
        ax.set_ylabel("reconstruction success")
        ax.grid(True, linewidth=0.4, color="0.85")
        ax.set_title(title)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), fontsize=8, frameon=False)
        return save_png(fig, path, tight=True)



def rero_curve_plot(curves: Sequence[Mapping[str, Any]], path: str | os.PathLike, title: str) -> Path:
    """ReRo curves ``1 - f(kappa)`` against the baseline ``kappa`` (``curves``: dicts with ``kappa``, ``bound``,
    ``label`` and optionally ``style``) beside the no-output line ``kappa``; left panel on a log kappa axis,
    right panel linear (Hayes, Mahloujifar & Balle 2023; docs/references.md, "Reconstruction robustness").

    Args:
        curves: the curves, as above.
        path: where the PNG goes.
        title: the figure's title.

    Returns:
        The written path.
    """
    with matplotlib.rc_context(RC_PARAMS):
        fig, (left, right) = new_figure((11.0, 5.0), 1, 2)
        for ax, log in ((left, True), (right, False)):
            first = min(float(np.min(c["kappa"])) for c in curves)
            grid = np.logspace(np.log10(first), 0, 200) if log else np.linspace(0, 1, 200)
            ax.plot(grid, grid, linestyle=":", color="0.4", label="no output: kappa (guessing)")
            for i, curve in enumerate(curves):
                ax.plot(curve["kappa"], curve["bound"], linestyle=curve.get("style", "-"), color=f"C{3 + i}",
                        linewidth=1.5, label=str(curve["label"]))
            ax.set_xlabel("kappa (success without the output, 1/n for n candidates)")
            ax.set_ylabel("largest reconstruction success, 1 - f(kappa)")
            ax.set_ylim(0, 1.02)
            ax.grid(True, linewidth=0.4, color="0.85")
        left.set_xscale("log")
        left.set_title("ReRo bound (log kappa axis)")
        right.set_xlim(0, 1)
        right.set_title("ReRo bound (linear)")
        fig.suptitle(title)
        return save_with_legend_below(fig, left, path)
