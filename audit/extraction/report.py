"""What the extraction kind hands its reports (:class:`reports.presentation.Presentation`): its opening
sentences and its figure, from its block (:class:`audit.extraction.detail.ExtractionDetail`)."""

from __future__ import annotations

from pathlib import Path

from audit.stats.outcome import Outcome
from reports import plots
from reports.formatting import format_value
from reports.summary import audited_name

#: The file of the extraction figure in its run directory (the report's headline).
EXTRACTION_PNG = "extraction.png"


def sentences(outcome: Outcome) -> list[str]:
    """The opening sentences of an extraction audit's report.

    Args:
        outcome: the run's outcome.

    Returns:
        The sentences.
    """
    ext = outcome.detail.extraction
    who = audited_name(outcome)
    text = (f"What was found: {ext.method} recovered the model with {format_value(ext.queries)} queries (relative "
            f"parameter error {format_value(ext.param_rel_error)}, agreement {format_value(ext.agreement_test)} on "
            f"test data).")
    post = (ext.post_processing or {}).get("text")
    if post:
        text += f" For this DP model, {post}."
    return [f"What was audited: stealing {who} through its prediction API ({format_value(ext.d)} features).", text]


def figures(run_dir: Path, outcome: Outcome) -> list[dict]:
    """The extraction figure: each attack's queries, parameter error and agreement
    (:func:`reports.plots.extraction_plot`).

    Args:
        run_dir: the run directory.
        outcome: the run's outcome.

    Returns:
        The figure's description (the reports call it only with the outcome's block).
    """
    path = plots.extraction_plot(outcome.detail.extraction.methods, Path(run_dir) / EXTRACTION_PNG)
    return [{"path": path, "title": "Extraction attacks: parameter error and agreement",
             "caption": "Each attack's queries (in its label), how far the stolen parameters are from the served "
                        "ones (log scale) and how often the stolen model labels test data and uniform random inputs "
                        "like the served model (Tramèr et al. 2016)."}]
