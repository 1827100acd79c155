"""What the reconstruction kind hands its reports (:class:`reports.presentation.Presentation`): its opening
sentences, from its block (:class:`audit.reconstruction.detail.ReconstructionDetail`)."""

from __future__ import annotations

from audit.stats.outcome import Outcome
from reports.summary import audited_name


def sentences(outcome: Outcome) -> list[str]:
    """The opening sentences of a reconstruction audit's report.

    Args:
        outcome: the run's outcome.

    Returns:
        The sentences.
    """
    rec = outcome.detail.reconstruction
    who = audited_name(outcome)
    verdict = outcome.verdict
    return [f"What was audited: how often an informed adversary ({rec.threat} access) identifies one "
            f"training record of {who} among n equally likely candidates, against the claim's ReRo bound.",
            f"What was found: {verdict.status} — {verdict.text}. {rec.meaning or ''}".rstrip()]
