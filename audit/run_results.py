"""What a runner hands :meth:`audit.run_context.RunContext.finish`: the typed results of one run
(:class:`RunResults`), built where the runner writes them, so that a misnamed or mistyped entry fails at once
(``TypeError`` from the constructor) instead of as a schema error when the run is written.

A run's results are its header (:class:`audit.results_header.ResultsHeader`), its judgement (the
:class:`audit.stats.judgement.Judgement` of its bounds, or :class:`Unbounded` for a kind that measures an attack
without bounding epsilon), the envelope's blocks (``attacks``, ``game``, ``tables``, ``figures``) and the kind's
own ``detail`` block; :meth:`RunResults.entries` gives the entries ``results.json`` holds, which ``finish``
stamps (schema version, kind, seed, time, host, timing), validates and writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from audit.results_header import ResultsHeader
from audit.stats.blocks import Block
from audit.stats.judgement import Judgement
from audit.stats.outcome import AttackMetrics, Curve, Family, Figure, Game, LastIterate, Table, Verdict

__all__ = ["RunResults", "Unbounded"]


def _check(owner: str, name: str, value: Any, expected: type | tuple[type, ...], many: str = "") -> None:
    """Raise ``TypeError`` unless ``value`` (each item of it when ``many`` is ``tuple`` or ``map``) is an
    ``expected``."""
    if many == "tuple":
        if not isinstance(value, tuple):
            raise TypeError(f"{owner}.{name} is a tuple of {_names(expected)}, not {type(value).__name__}")
        items = value
    elif many == "map":
        if not isinstance(value, Mapping):
            raise TypeError(f"{owner}.{name} maps names to {_names(expected)}, not {type(value).__name__}")
        items = tuple(value.values())
    else:
        items = (value,)
    wrong = next((item for item in items if not isinstance(item, expected)), None)
    if wrong is not None:
        raise TypeError(f"{owner}.{name} holds a {type(wrong).__name__}, not {_names(expected)}")


def _names(expected: type | tuple[type, ...]) -> str:
    return " or ".join(t.__name__ for t in (expected if isinstance(expected, tuple) else (expected,)))


@dataclass(frozen=True, kw_only=True)
class Unbounded:
    """The judgement of a run that measures an attack without bounding epsilon (inversion, extraction,
    reconstruction), gathers other audits (a sweep) or checks the accounting alone: no lower bound, its own
    verdict.

    Attributes:
        verdict: the run's verdict.
        family: the family of its tests (a sweep's audits, the accounting check's tests).
        tradeoff: the claim's tradeoff curve (the accounting check).
        null_curves: write the two tradeoff curves as null (inversion and extraction name them; the others
            leave them out).
    """

    verdict: Verdict
    family: Family | None = None
    tradeoff: Curve | None = None
    null_curves: bool = False

    def __post_init__(self) -> None:
        _check("Unbounded", "verdict", self.verdict, Verdict)
        for name, block in (("family", Family), ("tradeoff", Curve)):
            if getattr(self, name) is not None:
                _check("Unbounded", name, getattr(self, name), block)
        if self.null_curves and self.tradeoff is not None:
            raise TypeError("Unbounded: null_curves writes the tradeoff curve as null; it cannot have one too")

    def blocks(self) -> dict[str, Any]:
        """The outcome's entries of this judgement: no bound, the verdict, and the family where given.

        Returns:
            ``lower_bounds`` (empty), ``best_lower_bound`` (None), ``verdict``; ``tradeoff`` and
            ``lower_bound_tradeoff`` (None) with :attr:`null_curves`; ``family`` and ``tradeoff`` where set.
        """
        out: dict[str, Any] = {"lower_bounds": [], "best_lower_bound": None, "verdict": self.verdict}
        if self.null_curves:
            out |= {"tradeoff": None, "lower_bound_tradeoff": None}
        for name in ("family", "tradeoff"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out


#: Blocks of :class:`RunResults` written under their own name when set: (field, type, ``_check``'s ``many``).
_BLOCKS = (("attacks", AttackMetrics, "map"), ("game", Game, ""), ("tables", Table, "tuple"),
           ("figures", Figure, "tuple"), ("last_iterate", LastIterate, ""), ("detail", Block, ""))


@dataclass(frozen=True, kw_only=True)
class RunResults:
    """The typed results of one run, as its runner builds them (module docstring); every field is checked
    when the object is made.

    Attributes:
        header: what was audited, on which data, against which claim.
        judgement: the judgement of the run's bounds, or :class:`Unbounded`.
        estimate: write the judgement's ``best_estimate`` (the dp kind).
        family: write the judgement's ``family`` (the one-run dp audits).
        attacks: each attack's figures, by name.
        game: the audit's game.
        tables: the tables of the report.
        figures: the figures the runner drew.
        last_iterate: the last-iterate reference of a black-box dp audit.
        detail: the kind's own block (:attr:`audit.kinds.RunKind.detail`).
        quick: whether the run was a ``--quick`` one.
        reproducible: whether the user's code repeated with its seed (a plugin).
        reproducibility_note: that check in words.
        target: the target's name as results.json records it, where it is not the run's (a plugin named by
            its dict).
    """

    header: ResultsHeader
    judgement: Judgement | Unbounded
    estimate: bool = False
    family: bool = False
    attacks: Mapping[str, AttackMetrics] | None = None
    game: Game | None = None
    tables: tuple[Table, ...] | None = None
    figures: tuple[Figure, ...] | None = None
    last_iterate: LastIterate | None = None
    detail: Block | None = None
    quick: bool | None = None
    reproducible: bool | None = None
    reproducibility_note: str | None = None
    target: str | None = None

    def __post_init__(self) -> None:
        _check("RunResults", "header", self.header, ResultsHeader)
        _check("RunResults", "judgement", self.judgement, (Judgement, Unbounded))
        if isinstance(self.judgement, Unbounded) and (self.estimate or self.family):
            raise TypeError("RunResults: an Unbounded judgement has no best estimate; its family is its own field")
        for name, block, many in _BLOCKS:
            if getattr(self, name) is not None:
                _check("RunResults", name, getattr(self, name), block, many)
        for name, kind in (("estimate", bool), ("family", bool), ("quick", bool), ("reproducible", bool),
                           ("reproducibility_note", str), ("target", str)):
            if getattr(self, name) is not None:
                _check("RunResults", name, getattr(self, name), kind)

    def entries(self) -> dict[str, Any]:
        """The entries results.json holds before ``finish`` stamps them: the header's, the judgement's, then
        every field set (typed blocks; the detail under ``detail``, which ``finish`` writes flat).

        Returns:
            The entries.
        """
        judged = (self.judgement.blocks() if isinstance(self.judgement, Unbounded)
                  else self.judgement.blocks(estimate=self.estimate, family=self.family))
        out = self.header.to_dict() | judged
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name not in ("header", "judgement", "estimate", "family") and value is not None:
                out[f.name] = dict(value) if f.name == "attacks" else value
        return out
