"""Image grid for model-inversion reports: one column per class, one row per kind of image
(member class mean, reconstructions from the target and the reference model, non-member class mean).

Deterministic PNG bytes like :mod:`reports.plots` (a Figure on the Agg canvas, fixed size and dpi, no
metadata),
written atomically.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import matplotlib
import numpy as np

from reports.plots import RC_PARAMS, new_figure, save_png


def image_grid(rows: Sequence[tuple[str, np.ndarray]], labels: Sequence[str], path: str | os.PathLike,
               title: str, low: float = 0.0, high: float = 1.0) -> Path:
    """Draw ``rows`` of images ((name, array (n_cols, H, W))) as a grid, columns titled by ``labels``.

    Every image is shown on the same grey scale [low, high] (no per-image normalisation, so
    intensities are comparable across rows). Returns the written path.

    Args:
        rows: (row name, images (n_cols, H, W)) pairs.
        labels: the column titles.
        path: where the PNG goes.
        title: the figure's title.
        low: the black end of the grey scale.
        high: the white end.

    Returns:
        The written path.
    """
    with matplotlib.rc_context(RC_PARAMS):
        return _grid(rows, labels, path, title, low, high)


def _grid(rows, labels, path, title, low, high) -> Path:
    n_rows, n_cols = len(rows), len(labels)
    fig, axes = new_figure((1.0 * n_cols + 1.4, 1.0 * n_rows + 0.5), n_rows, n_cols, squeeze=False)
    for r, (name, images) in enumerate(rows):
        for c in range(n_cols):
            ax = axes[r][c]
            ax.imshow(np.asarray(images[c]), cmap="gray", vmin=low, vmax=high, interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            if r == 0:
                ax.set_title(str(labels[c]), fontsize=8)
            if c == 0:
                ax.set_ylabel(name, fontsize=7, rotation=0, ha="right", va="center")
    fig.suptitle(title, fontsize=9)
    fig.subplots_adjust(left=0.17, right=0.99, top=0.88, bottom=0.02, wspace=0.05, hspace=0.08)
    return save_png(fig, path)
