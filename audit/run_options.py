"""The options every ``run`` kind takes, as one frozen dataclass that each runner's options extend."""

from __future__ import annotations

import numbers
from dataclasses import dataclass

from audit.arguments import SEED_MAX
from audit.errors import UserError
from audit.executors import make_executor
from audit.theory.checks import check_delta, check_epsilon

#: Names of the common options, in field order (also the command-line ``dest`` names).
COMMON_OPTION_NAMES = ("target", "out", "seed", "device", "quick", "epsilon", "delta", "data_dir", "quiet",
                       "confidence", "workers", "executor", "ray_address")


@dataclass(frozen=True, kw_only=True)
class CommonRunOptions:
    """The options every run kind takes (:func:`audit.run_parser.common_options`); stored in config.json."""

    target: str
    out: str = "runs"
    seed: int = 0
    device: str = "auto"
    quick: bool = False
    epsilon: float | None = None
    delta: float | None = None
    data_dir: str | None = None
    quiet: bool = False
    confidence: float = 0.95
    workers: int = 1
    executor: str = "local"
    ray_address: str | None = None

    def __post_init__(self) -> None:
        """A seed the generators refuse, or an epsilon or delta beyond :mod:`audit.theory.limits`, is the user's
        one-line error before a run folder is made, for the callers the command line's checks
        (:mod:`audit.arguments`) do not see: ``rerun`` of an edited config.json, a library caller."""
        if isinstance(self.seed, bool) or not isinstance(self.seed, numbers.Integral) \
                or not 0 <= self.seed <= SEED_MAX:
            raise UserError(f"seed must be an integer from 0 to {SEED_MAX} = 2**32 - 1 (got {self.seed!r}): numpy's "
                            f"and scikit-learn's generators take no other; e.g. seed 0")
        if self.epsilon is not None:
            check_epsilon(self.epsilon, "epsilon", positive=True, limited=True)
        if self.delta is not None:
            check_delta(self.delta, "delta", positive=True, limited=True)

    def make_executor(self):
        """The executor training chunks run on (:func:`audit.executors.make_executor`)."""

        return make_executor(self.executor, self.workers, self.ray_address)

    @classmethod
    def common_kwargs(cls, args) -> dict:
        """The common options from parsed command-line ``args``."""
        return {name: getattr(args, name) for name in COMMON_OPTION_NAMES}
