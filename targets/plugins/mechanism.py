"""A user's mechanism plugin wrapped as an auditable :class:`targets.mechanisms.Mechanism`.

The plugin releases one output per call, ``f(data, rng)``; drawing many outputs calls it many
times, with the randomness it takes derived from one seeded numpy Generator
(:mod:`targets.plugins.rng`), under the plugin thread policy (:mod:`targets.threads`). Outputs become
vectors or categories by one rule for the whole audit (:mod:`targets.plugins.outputs`). Its
likelihood ratio is unknown, so the test statistic is learned on separate draws (``fit_score``,
:mod:`audit.stats.score_fit`) before the audit draws are made. Its sensitivity and the exact privacy
of its pair are unknown (``nan`` and ``None``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from audit.errors import TargetCodeError
from audit.stats.score_fit import fit_log_ratio_score
from audit.theory.claims import PrivacyClaim
from targets.mechanisms import Mechanism
from targets.plugins.loading import MechanismPlugin
from targets.plugins.outputs import OutputEncoder
from targets.plugins.rng import Reproducibility, mechanism_args, reproducibility
from targets.threads import thread_limit

#: Outputs drawn twice from one seed to check that the plugin uses the randomness it is given.
CHECK_DRAWS = 5


class PluginMechanism(Mechanism):
    """Adaptor from :class:`targets.plugins.loading.MechanismPlugin` to the Mechanism interface."""

    output_kind = "vector"

    def __init__(self, plugin: MechanismPlugin) -> None:
        self.plugin = plugin
        self.name = plugin.name
        self.neighbouring = plugin.neighbouring
        self._score = None
        self._encoder = OutputEncoder(f"plugin {plugin.spec}")

    @property
    def sensitivity(self) -> float:
        return math.nan

    @property
    def delta(self) -> float:
        """The delta the audit uses: the claim's (0 for a pure-DP claim: Clopper–Pearson bounds
        epsilon at delta 0, the GDP row then reports mu only)."""
        return self.plugin.delta

    @property
    def claim(self) -> PrivacyClaim:
        return self.plugin.claim

    def neighbouring_pair(self) -> tuple[Any, Any]:
        return self.plugin.neighbours

    def sample(self, dataset: Any, n: int, rng: np.random.Generator | int | None) -> np.ndarray:
        g = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        f, kind = self.plugin.mechanism, self.plugin.rng
        try:
            with thread_limit(self.plugin.threads):
                outputs = [f(dataset, *mechanism_args(kind, g)) for _ in range(int(n))]
        except (Exception, SystemExit) as exc:  # sys.exit in the mechanism ends no audit (docs/reliability.md)
            raise TargetCodeError(f"plugin mechanism {self.plugin.spec} raised {type(exc).__name__}: {exc}") from exc
        return self._encoder.encode(outputs)

    def check_reproducible(self, seed: int) -> Reproducibility:
        """Draw ``CHECK_DRAWS`` outputs on D twice from the same seed: whether they agree, with a note
        (:func:`targets.plugins.rng.reproducibility`). Uses its own generators, not the audit's."""
        first, second = (self.sample(self.plugin.neighbours[0], CHECK_DRAWS, np.random.default_rng([seed, 9]))
                         for _ in range(2))
        return reproducibility(bool(np.array_equal(first, second)), self.plugin.rng,
                               f"{CHECK_DRAWS} outputs on D drawn twice from the same seed")

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
        return {"plugin": self.plugin.spec, "rng": self.plugin.rng,
                "claimed_epsilon": self.plugin.claim.epsilon(self.plugin.delta),
                "claimed_delta": self.plugin.delta} | self.plugin.params

    @property
    def description(self) -> str:
        return self.plugin.description
