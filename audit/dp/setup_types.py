"""What a trainer adapter of ``run dp`` returns: how runs are trained and observed
(:class:`DPAuditSetup`) and what the auditor extracted from them (:class:`Observation`). Below
every adapter and the runner, so that adapters never import the runner."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from audit.stats.outcome import Table
from audit.stats.thresholds import ThresholdStrategy
from audit.theory.claims import PrivacyClaim
from targets.plugins.rng import Reproducibility


@dataclass(kw_only=True)
class Observation:
    """What the auditor extracted from R runs.

    ``scores`` (R,): higher = "canary in". ``step_scores`` (R, T) per-step observations (updates
    threat model) with the claim's ``sample_rate`` and ``steps`` to compose them. ``info``: extra
    JSON-serialisable facts (e.g. how many steps the canary joined). ``gaussian``: the scores are
    exactly Gaussian with a common variance (adds the parametric ``gaussian-fit`` estimate);
    ``gaussian_fit``: add that estimate for scores only assumed Gaussian (a black-box canary's loss).
    ``design_sigma``: the claimed noise multiplier, used to fix the per-step threshold in advance.
    ``threshold_strategy``: how the Clopper–Pearson threshold is chosen, e.g. a
    :class:`audit.stats.thresholds.DesignedThreshold` fixed in advance (None: the Bonferroni grid; see
    :func:`audit.dp.game.audit_runs`).
    ``reproducibility``: a plugin's reproducibility check (results.json's ``reproducible`` and
    ``reproducibility_note``; None: no plugin). ``tables``: the setup's own tables, appended to the run's.
    """

    scores: np.ndarray
    step_scores: np.ndarray | None = None
    sample_rate: float | None = None
    steps: int | None = None
    info: dict = field(default_factory=dict)
    gaussian: bool = False
    gaussian_fit: bool = False
    design_sigma: float | None = None
    threshold_strategy: ThresholdStrategy | None = None
    reproducibility: Reproducibility | None = None
    tables: tuple[Table, ...] = ()


@dataclass(kw_only=True)
class DPAuditSetup:
    """How the runs of one audit are trained and observed (see the module docstring).

    ``claim``: the claim audited (None for no claim); ``observe(included, seed) -> Observation``.
    ``default_runs``: used when the options give none. ``config``: extra config.json keys.
    """

    name: str
    description: str
    dataset: str
    model: dict
    neighbouring: str
    claim: PrivacyClaim | None
    delta: float
    params: dict
    canary: dict
    threat: str
    observe: Callable[[np.ndarray, int], Observation]
    default_runs: int = 1000
    config: dict = field(default_factory=dict)
