"""What an extraction run shows in its report: the verdict and the tables it writes into
results.json (the attacks, the queries each output precision needed, and for a DP target what its
thief gets); see :mod:`audit.extraction.runner` for the figures themselves."""

from __future__ import annotations

from collections.abc import Sequence

from attacks.extraction import ROUNDED_MAX_FACTOR
from audit.extraction.measures import N_UNIFORM, Domain
from audit.extraction.victim import Victim
from audit.stats.outcome import Extraction, ExtractionMethod, Table, Verdict


def extraction_verdict(victim: Victim, extraction: Extraction) -> Verdict:
    """Always ``no-claim``: DP bounds what a model reveals about its records, not about itself; the
    text says what the API gave up (and, for a DP target, that the thief got the noisy release)."""
    if victim.private:
        pp = extraction.post_processing or {}
        return Verdict(status="no-claim",
                       text=f"DP bounds what the model reveals about its training records, not about itself: the "
                            f"API gave up the model with {extraction.queries} queries (agreement "
                            f"{extraction.agreement_test:.4f} on test data). " + pp.get("text", ""))
    error = extraction.param_rel_error
    return Verdict(status="no-claim",
                   text=f"non-private target extracted with {extraction.queries} queries, "
                        + ("" if error is None else f"relative parameter error {error:.2g}, ")
                        + f"agreement {extraction.agreement_test:.4f} (test) / "
                          f"{extraction.agreement_uniform:.4f} (uniform)")


def attacks_table(rows: Sequence[ExtractionMethod], victim: Victim, domain: Domain) -> Table:
    """Every attack's queries, parameter error, agreement and total-variation distance (failed ones too)."""
    table_rows = [[r.method, r.queries, "failed" if r.failed is not None else r.param_rel_error, r.agreement_test,
                   r.agreement_uniform, r.tv_distance, r.tv_distance_uniform] for r in rows]
    return Table(title="Extraction attacks",
                 columns=["method", "queries", "relative parameter error", "agreement (test)", "agreement (uniform)",
                          "TV (test)", "TV (uniform)"],
                 rows=table_rows,
                 caption=f"Tramèr et al. 2016. Agreement is 1 - R: the fraction of inputs labelled alike by the "
                         f"stolen and the served model, on {victim.test_label} and on {N_UNIFORM} uniform random "
                         f"inputs from the data range; TV is the mean total-variation distance between their "
                         f"output distributions. Parameters are compared in canonical form theta_k - theta_0 "
                         f"({domain.unknowns} unknowns, d = {domain.d}).")


def rounded_table(rounded: list[ExtractionMethod]) -> Table:
    """The queries each output precision needed (``rounded``: the successful rows on rounded outputs)."""
    return Table(title="Rounded outputs: the queries each precision needed",
                 columns=["decimals", "queries", "of which box probes", "equation queries (relative change)",
                          "stable", "relative parameter error", "agreement (test)", "agreement (uniform)"],
                 rows=[[r.round_decimals, r.queries, r.details["probe_queries"],
                        ", ".join(f"{x['queries']}" + ("" if x["relative_change"] is None
                                                       else f" ({x['relative_change']:.2g})")
                                  for x in r.details["rounds"]),
                        "yes" if r.details["converged"] else "no (query cap)", r.param_rel_error,
                        r.agreement_test, r.agreement_uniform] for r in rounded],
                 caption="The thief doubles its equation queries until the solution moves by less than "
                         f"{rounded[0].details['tol']:.0%} (relative), or until the cap of "
                         f"{ROUNDED_MAX_FACTOR} x (d + 1) queries; the box probes chose queries whose rounded "
                         "outputs are not saturated. Coarser rounding needs more queries for the same "
                         "stability.")


def post_processing_table(pp: dict) -> Table:
    """The stolen, released and non-private models' distances (``pp``:
    :func:`audit.extraction.measures.post_processing`)."""
    return Table(title="Post-processing: what a DP model's thief gets",
                 columns=["comparison", "relative parameter distance"],
                 rows=[["stolen vs released (noisy) model", pp["stolen_vs_released_rel_error"]],
                       ["stolen vs non-private model", pp["stolen_vs_nonprivate_rel_error"]],
                       ["released vs non-private model", pp["released_vs_nonprivate_rel_error"]]],
                 caption=pp["text"])
