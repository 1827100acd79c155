"""The DP training mechanism a loop declares: how records participate in the steps, and how the noise is
correlated across steps (docs/references.md, "Configuration checks" and "Correlated noise").

DP-SGD [Abadi et al. 2016, Alg. 1] is one point of a larger family that jax_privacy 2.0 trains and accounts:

* **participation** — :class:`PoissonParticipation`: every eligible record joins every step by its own coin at
  ``rate``. With ``cycle`` c > 1 the records are partitioned into c groups and step ``t`` samples only group
  ``t mod c`` (cyclic Poisson, Choquette-Choo et al. 2023, arXiv 2306.08153); with ``cap`` m a batch larger
  than m is cut to a uniform subset of m (truncated Poisson, arXiv 2411.04205, 2508.15089).
  :class:`BallsInBins`: each record is given a uniform random bin of ``cycle`` and joins exactly the steps of
  its bin (arXiv 2410.06266). :class:`MinSeparation`: Poisson at ``rate`` among the records that did not join
  any of the previous ``min_separation - 1`` steps (jax_privacy's ``BMinSepSampling``).
* **noise** — :class:`NoisingMatrix`: the noise added to step ``t``'s clipped sum is ``sigma C (C^{-1} Z)_t``
  with ``Z`` i.i.d. standard Gaussian per coordinate and step and ``C`` the lower-triangular strategy matrix
  (matrix-factorisation mechanisms, Choquette-Choo et al. 2023; Pillutla et al. 2025, arXiv 2506.08201): the
  identity is DP-SGD's fresh independent noise; a banded Toeplitz ``C`` (its first column's non-zero
  entries), a buffered linear Toeplitz (BLT) one or a dense one correlate the noise on purpose. Undoing the
  correlation (``C`` times the recorded noise sequence) gives back i.i.d. noise.

:data:`DPSGD` (Poisson at the rate the hooks declare, the identity) is what a loop that declares nothing runs.
The mechanism is a value: the gate's checks say which mechanisms they can test (:mod:`audit.plugins.gate_checks`)
and a check that cannot test the declared one says so, never "as claimed". Its epsilon is an existing
accountant's (a ``dp_accounting.DpEvent``), never a plain DP-SGD formula applied to another mechanism.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from audit.errors import UserError

__all__ = ["PoissonParticipation", "BallsInBins", "MinSeparation", "Participation", "NoisingMatrix",
           "DeclaredMechanism", "DPSGD", "IDENTITY"]


@dataclass(frozen=True)
class PoissonParticipation:
    """Poisson sampling at ``rate`` (None: the rate the hooks declare at each step), cyclic over ``cycle`` groups
    and truncated to ``cap`` records per step when given (module docstring)."""

    rate: float | None = None
    cycle: int = 1
    cap: int | None = None

    def __post_init__(self) -> None:
        if self.rate is not None and not 0.0 < self.rate <= 1.0:
            raise UserError(f"a Poisson participation's rate must lie in (0, 1] (got {self.rate!r})")
        if int(self.cycle) != self.cycle or self.cycle < 1:
            raise UserError(f"a Poisson participation's cycle must be a whole number >= 1 (got {self.cycle!r})")
        if self.cap is not None and (int(self.cap) != self.cap or self.cap < 1):
            raise UserError(f"a truncated Poisson participation's cap must be a whole number >= 1 (got {self.cap!r})")

    @property
    def law(self) -> str:
        """The law's name: "poisson", "cyclic-poisson", "truncated-poisson" or "truncated-cyclic-poisson"."""
        return ("truncated-" if self.cap is not None else "") + ("cyclic-" if self.cycle > 1 else "") + "poisson"

    def describe(self) -> str:
        """The participation in words."""
        rate = "the declared rate" if self.rate is None else f"rate {self.rate:.4g}"
        cyclic = f", cyclic over {self.cycle} groups" if self.cycle > 1 else ""
        capped = f", truncated to {self.cap} records" if self.cap is not None else ""
        return f"Poisson sampling at {rate}{cyclic}{capped}"


@dataclass(frozen=True)
class BallsInBins:
    """Balls-in-bins participation: each record in exactly the steps ``t`` with ``t mod cycle`` its random bin."""

    cycle: int

    def __post_init__(self) -> None:
        if int(self.cycle) != self.cycle or self.cycle < 1:
            raise UserError(f"a balls-in-bins participation's cycle must be a whole number >= 1 (got {self.cycle!r})")

    law = "balls-in-bins"

    def describe(self) -> str:
        """The participation in words."""
        return f"balls-in-bins participation over {self.cycle} bins"


@dataclass(frozen=True)
class MinSeparation:
    """Poisson at ``rate`` among the records absent from the previous ``min_separation - 1`` steps."""

    rate: float
    min_separation: int

    def __post_init__(self) -> None:
        if not 0.0 < self.rate <= 1.0:
            raise UserError(f"a min-separation participation's rate must lie in (0, 1] (got {self.rate!r})")
        if int(self.min_separation) != self.min_separation or self.min_separation < 1:
            raise UserError("a min-separation participation's separation must be a whole number >= 1 "
                            f"(got {self.min_separation!r})")

    law = "min-separation"

    def describe(self) -> str:
        """The participation in words."""
        return f"Poisson sampling at rate {self.rate:.4g} with a minimum separation of {self.min_separation} steps"


Participation = PoissonParticipation | BallsInBins | MinSeparation

#: The kinds of noising matrix (module docstring).
MATRIX_KINDS = ("identity", "banded-toeplitz", "blt", "dense")


@dataclass(frozen=True)
class NoisingMatrix:
    """The strategy matrix ``C`` whose inverse correlates the noise (module docstring). ``coefficients``: for
    "banded-toeplitz" the non-zero entries of ``C``'s first column (``(1.0,)`` is the identity); for "blt" the
    buffer decays then the output scales (jax_privacy's ``BufferedToeplitz``); for "dense" the rows of ``C``."""

    kind: str = "identity"
    coefficients: tuple[Any, ...] = field(default=(1.0,))

    def __post_init__(self) -> None:
        if self.kind not in MATRIX_KINDS:
            raise UserError(f"a noising matrix's kind must be one of {', '.join(MATRIX_KINDS)} (got {self.kind!r})")

    @property
    def independent(self) -> bool:
        """Whether the noise is fresh and independent at every step (the identity)."""
        return self.kind == "identity" or (self.kind == "banded-toeplitz" and tuple(self.coefficients) == (1.0,))

    def describe(self) -> str:
        """The noise in words."""
        if self.independent:
            return "independent Gaussian noise at every step"
        bands = f" with {len(self.coefficients)} bands" if self.kind == "banded-toeplitz" else ""
        return f"Gaussian noise correlated by a {self.kind} strategy matrix{bands}"


IDENTITY = NoisingMatrix()


@dataclass(frozen=True)
class DeclaredMechanism:
    """Participation x noise (module docstring); ``source``: where it was read from, in words (e.g. "declared
    by the plugin", "jax_privacy's BandMFExecutionPlanConfig")."""

    participation: Participation = field(default_factory=PoissonParticipation)
    noise: NoisingMatrix = IDENTITY
    source: str = "declared by the plugin"

    @property
    def is_dpsgd(self) -> bool:
        """Whether this is DP-SGD: plain Poisson participation and independent noise."""
        p = self.participation
        return isinstance(p, PoissonParticipation) and p.cycle == 1 and p.cap is None and self.noise.independent

    def describe(self) -> str:
        """The mechanism in words."""
        return f"{self.participation.describe()}, {self.noise.describe()}"

    def to_dict(self) -> dict[str, Any]:
        """The mechanism as JSON (the ``config_check`` block's ``mechanism``)."""
        part = {k: v for k, v in vars(self.participation).items() if v is not None}
        coefficients = [list(map(float, row)) if isinstance(row, (list, tuple)) else float(row)
                        for row in self.noise.coefficients]
        return {"participation": {"law": self.participation.law} | part,
                "noise": {"matrix": self.noise.kind, "coefficients": coefficients}, "source": self.source}


#: DP-SGD: Poisson at the rate the hooks declare, fresh independent noise.
DPSGD = DeclaredMechanism(source="the default: DP-SGD")
