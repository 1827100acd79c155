"""The header of every results.json: what was audited, on which data, against which claim.

A results.json (audit/schemas/results.schema.json) reads, in this order:

1. the envelope's head, added by :meth:`audit.run_context.RunContext.finish`: ``schema_version``,
   ``kind``, ``target``, ``seed``;
2. the header built here by :meth:`ResultsHeader.to_dict`: ``target_description``, ``dataset``,
   ``dataset_source``, ``model``, ``neighbouring``, ``delta``, ``confidence``, ``primary_attack``,
   ``epsilon_theory``, ``accountant``, ``params`` — each kind writes those it has, always in this
   order (a mechanism has no model, a sweep only a description, its delta and its confidence);
3. the kind's own keys: its bounds (or none, :class:`audit.run_results.Unbounded`, for the kinds that
   measure an attack without bounding epsilon: inversion, extraction, reconstruction), ``attacks``,
   ``verdict``, ``game``, ``tables``, ... (:class:`audit.run_results.RunResults` gathers them typed);
4. the envelope's tail, added by ``RunContext.finish``: ``created``, ``host``, ``timing``,
   ``volatile``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

#: The neighbouring relation of the audits that add or remove one record of the training set.
ADD_REMOVE_RECORD = "add/remove one record"


class _Omitted:
    """The type of :data:`OMIT`."""

    def __repr__(self) -> str:
        return "OMIT"


#: Default of the optional header keys: a key left at OMIT is not written.
OMIT: Any = _Omitted()


@dataclass(frozen=True, kw_only=True)
class ResultsHeader:
    """The header of a results.json; :meth:`to_dict` gives its keys in their fixed order (see the module
    docstring), without those left at :data:`OMIT`.

    Attributes:
        description: the target's description, written as ``target_description``.
        dataset: the dataset's name.
        dataset_source: where the dataset comes from.
        model: the trained model's description.
        neighbouring: the neighbouring relation of the claim.
        delta: the delta the audit reads its epsilons at (None without a claim).
        confidence: the confidence of the verdict's family.
        primary_attack: the attack the verdict reads.
        epsilon_theory: the claim's epsilon at ``delta``.
        accountant: the claim's description (:func:`accountant`).
        params: the target's parameters as the report shows them.
    """

    description: str
    dataset: Any = OMIT
    dataset_source: Any = OMIT
    model: Any = OMIT
    neighbouring: Any = OMIT
    delta: float | None
    confidence: float
    primary_attack: Any = OMIT
    epsilon_theory: Any = OMIT
    accountant: Any = OMIT
    params: Any = OMIT

    def to_dict(self) -> dict:
        """The header keys in their fixed order, without those left at :data:`OMIT`."""
        keys = {"target_description" if f.name == "description" else f.name: getattr(self, f.name)
                for f in fields(self)}
        return {key: value for key, value in keys.items() if value is not OMIT}


def accountant(claim: Any) -> str | None:
    """The ``accountant`` header entry of a privacy claim: its description, None without a claim."""
    return claim.description if claim is not None else None

