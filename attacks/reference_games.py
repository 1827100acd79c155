"""The make-up of leave-one-reference-out calibration games [Carlini et al. 2022, Sec. V-A;
Zarifzadeh, Liu, Shokri 2024, App. B.2].

Reference models are trained so that each candidate is IN exactly half of them. When model ``j``
plays the target against the others, the others hold one IN model fewer exactly when ``j`` trained
on the candidate, so any statistic averaged over all of them carries ``j``'s membership in how many
models it averages. A balanced subset — as many IN as OUT models per candidate — has the same
make-up whatever ``j``'s membership. Sources: docs/references.md, "Membership attacks".
"""

from __future__ import annotations

import numpy as np


def balanced_subset(ref_in: np.ndarray) -> np.ndarray:
    """(R, n) mask of the models each candidate's fits may use: the first ``k`` IN and the first
    ``k`` OUT models in stack order, ``k`` the smaller of the candidate's two counts.

    Args:
        ref_in: which model trained on which candidate, (R, n) bool.

    Returns:
        The mask, (R, n) bool.
    """
    ref_in = np.asarray(ref_in, dtype=bool)
    ins, outs = np.cumsum(ref_in, axis=0), np.cumsum(~ref_in, axis=0)
    k = np.minimum(ins[-1], outs[-1])
    return np.where(ref_in, ins <= k, outs <= k)
