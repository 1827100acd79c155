"""``python -m audit run reconstruction --target NAME``: the n-candidate reconstruction game against ReRo."""

from __future__ import annotations

import argparse

from audit.arguments import positive_int
from audit.kinds import RunKind
from audit.run_parser import add_kind
from reports.presentation import Presentation


def candidate_counts(text: str) -> tuple[int, ...]:
    """argparse type: comma-separated candidate counts, each >= 2."""
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers such as 10,100,1000 (got {text!r})") \
            from None
    if any(v < 2 for v in values):
        raise argparse.ArgumentTypeError("every candidate count must be at least 2 (kappa = 1/n)")
    return values


def register(kinds: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = add_kind(kinds, RUN_KIND, common,
                      help="reconstruct one record among n candidates, against the ReRo bound (Hayes et al. 2023)",
                      description="The record to reconstruct is drawn uniformly among n candidates (kappa = 1/n); "
                                  "an informed adversary who knows every other record and the training algorithm "
                                  "picks the most likely candidate from the threat's observation. Its success "
                                  "(Clopper-Pearson) is compared with the claim's ReRo bound 1 - f(kappa), beside "
                                  "the non-private twin.")
    parser.add_argument("--candidates", type=candidate_counts, default=(10, 100, 1000),
                        help="candidate counts n, comma-separated (default 10,100,1000): one point of the curve each")
    parser.add_argument("--threat", choices=["updates", "white-box"], default=None,
                        help="updates: every noisy update (DP-SGD targets, default); white-box: the final or released "
                             "parameters (DP-ERM default)")
    parser.add_argument("--runs", type=positive_int, default=None,
                        help="rounds (training runs) per candidate count (default 400; quick 100)")
    parser.add_argument("--no-twin", dest="twin", action="store_false",
                        help="skip the non-private twin (the same runs without noise)")
    parser.set_defaults(func=RUN_KIND.main)


RUN_KIND = RunKind(name="reconstruction", command="run reconstruction",
                   options="audit.reconstruction.runner:ReconstructionOptions",
                   run="audit.reconstruction.runner:run_reconstruction",
                   summary="audit.reconstruction.runner:summary_lines", register=register,
                   report=Presentation(headline="reconstruction.png",
                                       sentences="audit.reconstruction.report:sentences", tables_lead=True),
                   detail="audit.reconstruction.detail:ReconstructionDetail",
                   results={"required": ["figures", "tables", "params", "verdict"]})
