"""What an inversion run shows in its report: the grid of reconstructions beside the class means
(a PNG in the run directory), the tables and the verdict it writes into results.json (see
:mod:`audit.inversion.runner` for the figures themselves)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from audit.inversion.measures import Yardstick
from audit.stats.outcome import Figure, Inversion, Outcome, Table, Verdict
from reports.formatting import format_percent, format_value
from reports.inversion_plots import image_grid
from reports.summary import audited_name

GRID_PNG = "inversion_grid.png"


def reconstruction_grid(run_dir: Path, scale: Yardstick, images: dict[str, np.ndarray], access: str,
                        target_name: str) -> list[Figure]:
    """Draw the reconstructions of every class (``images`` by model: target, black-box, reference)
    between the member and non-member class means into :data:`GRID_PNG`; returns its ``figures`` entry."""
    hw = scale.hw
    grid_rows = [("member mean", scale.member_means.reshape(-1, *hw)), (f"target ({access})", images["target"])]
    if "black_box" in images:
        grid_rows.append(("target (black-box)", images["black_box"]))
    grid_rows += [("reference model", images["reference"]),
                  ("non-member mean", scale.nonmember_means.reshape(-1, *hw))]
    image_grid(grid_rows, [str(c) for c in scale.classes], run_dir / GRID_PNG,
               f"MI-FACE reconstructions: {target_name}", scale.low, scale.high)
    return [Figure(file=GRID_PNG, title="MI-FACE reconstructions beside the class means",
                   caption="Columns are classes. Rows: mean image of the target's members of that class; MI-FACE "
                           f"reconstruction from the target ({access} gradients"
                           + (", then black-box finite-difference gradients" if "black_box" in images else "")
                           + "); reconstruction from the reference model trained on disjoint non-members; mean of "
                             "the non-members. Same grey scale everywhere.")]


def per_class_table(name: str, fig: Mapping, evaluator_records: int, n_classes: int) -> Table:
    """The per-class figures of one model's reconstructions (``fig``: :func:`audit.inversion.measures.class_figures`)
    with their mean as the last row."""
    rows = [[r["class"], r["mse_member_mean"], r["mse_nonmember_mean"], r["ssim_member_mean"],
             r["ssim_nonmember_mean"], r["eval_prediction"], r["confidence"], r["steps"], r["queries"],
             r["stop"]]
            for r in fig["per_class"]]
    rows.append(["mean", fig["mse_member_mean"], fig["mse_nonmember_mean"], fig["ssim_member_mean"],
                 fig["ssim_nonmember_mean"], f"accuracy {fig['eval_accuracy']:.2f}", fig["confidence"], "",
                 fig["queries"], ""])
    return Table(title=f"Per-class figures: {name}",
                 columns=["class", "MSE member mean", "MSE non-member mean", "SSIM member mean",
                          "SSIM non-member mean", "evaluation classifier says", "confidence", "steps", "queries",
                          "stopped by"],
                 rows=rows,
                 caption="MSE and SSIM (Wang et al. 2004, Gaussian window 1.5) of the reconstruction to "
                         "the class mean of the target's members and of the non-members; the evaluation "
                         "classifier was "
                         f"trained on {evaluator_records} auxiliary records disjoint from both (chance "
                         f"{1 / n_classes:.2f}).")


def gap_table(inversion: Inversion, access: str) -> Table:
    """Target against reference model (and the neutral start): the table of the member gap."""
    gap = inversion.member_gap
    models = ((f"target ({access})", inversion.to_dict()), ("reference (no members)", inversion.reference))
    if inversion.black_box is not None:
        models += (("target (black-box)", inversion.black_box),)
    baseline = inversion.start_baseline
    return Table(title="Target vs reference model (the privacy-relevant gap)",
                 columns=["model", "evaluation accuracy", "MSE member mean", "MSE non-member mean",
                          "SSIM member mean", "SSIM non-member mean", "queries"],
                 rows=[[name, f["eval_accuracy"], f["mse_member_mean"], f["mse_nonmember_mean"],
                        f["ssim_member_mean"], f["ssim_nonmember_mean"], f["queries"]] for name, f in models]
                      + [["neutral start (no attack)", baseline["eval_accuracy"], baseline["mse_member_mean"], "",
                          baseline["ssim_member_mean"], "", 0]],
                 caption=f"member gap (MSE): {gap['mse_gap']:.3g} (standard error over classes "
                         f"{gap['mse_gap_standard_error']:.2g}) = (non-member - member MSE) of the target minus "
                         f"that of the reference; positive means the target's reconstructions lean towards its "
                         f"own members beyond what a model of the same data distribution gives.")


def inversion_tables(inversion: Inversion, access: str, n_classes: int) -> list[Table]:
    """Every table of an inversion run: the member gap, then the per-class figures of each model."""
    records = inversion.evaluator["trained_on"]
    tables = [gap_table(inversion, access),
              per_class_table(f"target ({access})", inversion.to_dict(), records, n_classes),
              per_class_table("reference model", inversion.reference, records, n_classes)]
    if inversion.black_box is not None:
        tables.append(per_class_table("target (black-box)", inversion.black_box, records, n_classes))
    return tables


def inversion_verdict(inversion: Inversion, n_classes: int, has_claim: bool) -> Verdict:
    """The verdict of an inversion run: always ``no-claim`` (DP promises nothing about class-level
    resemblance), with the recognition rates and the member gap in words."""
    gap = inversion.member_gap
    return Verdict(status="no-claim",
                   text=f"reconstructions are recognised by an independent classifier "
                        f"{inversion.eval_accuracy:.0%} of the time (reference model: "
                        f"{inversion.reference['eval_accuracy']:.0%}, chance "
                        f"{1 / n_classes:.0%}); member gap in MSE {gap['mse_gap']:.2g} (standard error "
                        f"{gap['mse_gap_standard_error']:.2g}). Inversion recovers "
                        f"class-level features, which "
                        + ("differential privacy does not promise to hide; DP bounds only the member-specific gap"
                           if has_claim else "a model trained on the same distribution without the members "
                                             "recovers too; only the member gap is about privacy"))


def sentences(outcome: Outcome) -> list[str]:
    """The opening sentences of an inversion audit's report (its kind's presentation), from its block
    (:class:`audit.inversion.detail.InversionDetail`).

    Args:
        outcome: the run's outcome.

    Returns:
        The sentences.
    """
    inv = outcome.detail.inversion
    who = audited_name(outcome)
    access = "white-box and black-box" if inv.black_box is not None else (outcome.audited.model or {}).get("access", "")
    return [f"What was audited: MI-FACE model inversion of every class of {who}, {access}, "
            f"against a reference model trained on the same distribution without the members.",
            f"What was found: an independent classifier recognises {format_percent(inv.eval_accuracy)} of the "
            f"target's reconstructions (reference model {format_percent(inv.reference.get('eval_accuracy'))}, chance "
            f"{format_percent(inv.chance_accuracy)}); the member gap in MSE is "
            f"{format_value(inv.member_gap.get('mse_gap'))} "
            f"(standard error {format_value(inv.member_gap.get('mse_gap_standard_error'))}) — only this gap, not "
            f"recognisable digits, is about privacy."]
