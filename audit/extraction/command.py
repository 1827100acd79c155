"""``python -m audit run extraction --target NAME``: steal a logistic-regression target through its API."""

from __future__ import annotations

import argparse

from audit.arguments import number, positive_int
from audit.kinds import RunKind
from audit.run_parser import add_kind
from reports.presentation import Presentation


def register(kinds: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = add_kind(kinds, RUN_KIND, common,
                              help="steal a logistic-regression model through its prediction API (Tramèr et al. 2016)",
                              description="Equation-solving extraction of a softmax or binary logistic-regression "
                                          "target (d + 1 queries on exact outputs, weighted least squares on "
                                          "rounded outputs) and a label-only retraining baseline; reports queries, "
                                          "parameter error, agreement on test and uniform inputs, and for DP "
                                          "targets that the stolen model is the released noisy one.")
    parser.add_argument("--round", type=number(int, minimum=0, maximum=15), default=None, metavar="K",
                        help="the API rounds probabilities to K decimals (default: exact outputs, plus a 3-decimal "
                             "comparison)")
    parser.add_argument("--queries", type=positive_int, default=None,
                        help="queries for equation solving (default d + 1 on exact outputs, 20 (d + 1) when rounded)")
    parser.add_argument("--label-queries", type=positive_int, default=None,
                        help="queries for the label-only baseline (default 50 (d + 1); quick 20 (d + 1))")
    parser.set_defaults(func=RUN_KIND.main)


RUN_KIND = RunKind(name="extraction", command="run extraction", options="audit.extraction.runner:ExtractionOptions",
                   run="audit.extraction.runner:run_extraction", summary="audit.extraction.runner:summary_lines",
                   register=register,
                   report=Presentation(headline="extraction.png", sentences="audit.extraction.report:sentences",
                                       figures="audit.extraction.report:figures", tables_lead=True),
                   plugin_help=(
                       "your own training code, a trainer plugin; stolen through predict_proba assuming a logistic "
                       "regression (no parameter error: your parameters are not visible)",),
                   detail="audit.extraction.detail:ExtractionDetail",
                   results={"required": ["tables", "model", "params"]})
