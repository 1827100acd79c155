"""A user's mechanism plugin wrapped as an auditable :class:`targets.mechanisms.Mechanism`.

The plugin releases one output per call, ``f(data, rng)``; drawing many outputs calls it many
times with one seeded numpy Generator. Its likelihood ratio is unknown, so the test statistic is
learned on separate draws (``fit_score``, :mod:`audit.stats.score_fit`) before the audit draws are made.
Its sensitivity and the exact privacy of its pair are unknown (``nan`` and ``None``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from audit.errors import TargetCodeError
from audit.stats.score_fit import as_matrix, fit_log_ratio_score
from audit.theory.claims import PrivacyClaim
from targets.mechanisms import Mechanism
from targets.plugins import MechanismPlugin


class PluginMechanism(Mechanism):
    """Adaptor from :class:`targets.plugins.MechanismPlugin` to the Mechanism interface."""

    output_kind = "vector"

    def __init__(self, plugin: MechanismPlugin) -> None:
        self.plugin = plugin
        self.name = plugin.name
        self.neighbouring = plugin.neighbouring
        self._score = None

    @property
    def sensitivity(self) -> float:
        return math.nan

    @property
    def delta(self) -> float:
        """The delta the audit uses: the claim's, or ``PURE_DP_DELTA`` for a pure-DP claim."""
        from audit.theory.claims import PURE_DP_DELTA

        return self.plugin.delta if self.plugin.delta > 0 else PURE_DP_DELTA

    @property
    def claim(self) -> PrivacyClaim:
        return self.plugin.claim

    def neighbouring_pair(self) -> tuple[Any, Any]:
        return self.plugin.neighbours

    def sample(self, dataset: Any, n: int, rng: np.random.Generator | int | None) -> np.ndarray:
        g = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        try:
            outputs = [self.plugin.mechanism(dataset, g) for _ in range(int(n))]
        except Exception as exc:
            raise TargetCodeError(f"plugin mechanism {self.plugin.spec} raised {type(exc).__name__}: {exc}") from exc
        return as_matrix(outputs, f"plugin {self.plugin.spec}")

    def fit_score(self, out0: np.ndarray, out1: np.ndarray) -> None:
        """Learn the test statistic on draws that the bound will not use."""
        self._score = fit_log_ratio_score(out0, out1)

    def score(self, outputs: np.ndarray) -> np.ndarray:
        if self._score is None:
            raise RuntimeError("PluginMechanism.score called before fit_score")
        return self._score(outputs)

    def pair_claim(self) -> PrivacyClaim | None:
        return None

    def params(self) -> dict[str, Any]:
        return {"plugin": self.plugin.spec, "claimed_epsilon": self.plugin.claim.epsilon(self.plugin.delta),
                "claimed_delta": self.plugin.delta} | self.plugin.params

    @property
    def description(self) -> str:
        return self.plugin.description
