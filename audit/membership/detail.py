"""The membership kind's own result block (``RunKind.detail``): what an audit of a trained model (one that
exists, or a language model fine-tuned in the run) writes beyond a canary game. Its keys are written in
``results.json`` beside the envelope's (:class:`audit.stats.outcome.Outcome`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from audit.stats.blocks import constrained, nested
from audit.stats.outcome import Detail, EpsilonBound, SplitCheck

__all__ = ["MembershipDetail"]


@dataclass(frozen=True, kw_only=True)
class MembershipDetail(Detail):
    """A membership run's own block (a canary game writes none of it).

    Attributes:
        split_check: a trained model's split check.
        epsilon_bound: whether a trained model's audit may bound epsilon.
        meaning: what a trained model's audit found, in words.
        trained_lm: a language model's membership audit: the target as audited (``TrainedLM.to_dict``).
        trained_model: a trained model's own description (membership of a model that exists).
        attacks_not_run: the attacks left out, and why (a trained model).
    """

    split_check: SplitCheck | None = nested(SplitCheck, optional=True)
    epsilon_bound: EpsilonBound | None = nested(EpsilonBound, optional=True)
    meaning: str | None = None
    trained_lm: Mapping[str, Any] | None = constrained({"required": ["spec", "n_members", "n_nonmembers",
                                                                   "membership"]}, optional=True)
    trained_model: Mapping[str, Any] | None = None
    attacks_not_run: Mapping[str, Any] | None = None

    def blind_split(self) -> SplitCheck | None:
        """``split_check`` (:meth:`audit.stats.outcome.Detail.blind_split`)."""
        return self.split_check
