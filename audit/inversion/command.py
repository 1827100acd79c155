"""``python -m audit run inversion --target NAME``: MI-FACE model inversion of every class."""

from __future__ import annotations

import argparse

from audit.arguments import non_negative_int, number, positive_int
from audit.choices import INVERSION_STARTS
from audit.kinds import RunKind
from audit.run_parser import add_kind
from reports.presentation import Presentation


def register(kinds: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = add_kind(kinds, RUN_KIND, common,
                              help="MI-FACE model inversion of every class (Fredrikson et al. 2015)",
                              description="Reconstruct every class from the target by gradient descent on the input "
                                          "(white-box and black-box with estimated gradients), compare with the class "
                                          "means of members and non-members (MSE, SSIM), score the reconstructions "
                                          "with an independent classifier, and repeat on a reference model trained "
                                          "without the members.")
    parser.add_argument("--steps", type=positive_int, default=None,
                        help="MI-FACE maximum steps alpha (default 1000; quick 200)")
    parser.add_argument("--patience", type=positive_int, default=None,
                        help="stop after this many steps without progress, beta (default 100; quick 50)")
    parser.add_argument("--stop-confidence", type=number(float, minimum=0, maximum=1, open_min=True), default=0.999,
                        help="stop once the class confidence reaches this target, gamma (default 0.999)")
    parser.add_argument("--lr", type=number(float, minimum=0, open_min=True), default=1.0,
                        help="gradient step size lambda (default 1.0)")
    parser.add_argument("--tv", type=number(float, minimum=0), default=0.0,
                        help="weight of a total-variation AuxTerm (default 0, the paper's AuxTerm = 0)")
    parser.add_argument("--black-box-steps", type=non_negative_int, default=None,
                        help="steps of the black-box variant (finite-difference gradients, 2 d queries a step); "
                             "0 skips it (default 100; quick 20)")
    parser.add_argument("--start", choices=sorted(INVERSION_STARTS), default="mean",
                        help="neutral start: mean (the auxiliary data's mean image over all classes, default) or grey "
                             "(a constant image at their mean intensity)")
    parser.set_defaults(func=RUN_KIND.main)


RUN_KIND = RunKind(name="inversion", command="run inversion", options="audit.inversion.runner:InversionOptions",
                   run="audit.inversion.runner:run_inversion", summary="audit.inversion.runner:summary_lines",
                   register=register,
                   report=Presentation(headline=None, sentences="audit.inversion.presentation:sentences",
                                       tables_lead=True),
                   plugin_help=(
                       "your own training code, a trainer plugin; only predict_proba is seen, so MI-FACE runs "
                       "black-box (finite differences) against a reference model your train fits to the "
                       "non-members",),
                   detail="audit.inversion.detail:InversionDetail",
                   results={"required": ["figures", "tables", "model", "params"]})
