"""What a run that trains its own models of a target states about them, whatever trains them (a
registry target's trainer or a user's plugin): the fields :class:`audit.membership.subjects.MembershipSubject`
and :class:`audit.inversion.target.InversionTarget` share."""

from __future__ import annotations

from dataclasses import dataclass

from audit.theory.claims import PrivacyClaim
from targets.datasets import Dataset


@dataclass(kw_only=True)
class AuditedModel:
    """``data`` the dataset the models train on (``n_train`` records for the target), ``model`` the
    architecture's or plugin's name, ``claim`` the privacy claim (None for a non-private target) at
    ``delta``, ``params`` the training parameters written to results.json."""

    name: str
    description: str
    data: Dataset
    n_train: int
    model: str
    claim: PrivacyClaim | None
    delta: float
    params: dict
