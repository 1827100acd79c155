"""``python -m audit run inversion --target NAME``: MI-FACE model inversion of every class."""

from __future__ import annotations

import argparse

from audit.choices import INVERSION_STARTS
from audit.commands.run import add_kind, positive_int
from audit.commands.run_extraction import number


def execute(args: argparse.Namespace) -> int:
    from audit.run_inversion import InversionOptions, run_inversion, summary_lines

    opts = InversionOptions(**InversionOptions.common_kwargs(args), steps=args.steps, patience=args.patience,
                            stop_confidence=args.stop_confidence, lr=args.lr, tv=args.tv,
                            black_box_steps=args.black_box_steps, start=args.start)
    run_dir, results = run_inversion(opts)
    print("\n".join(summary_lines(run_dir, results)))
    return 0


def register(kinds: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = add_kind(kinds, "inversion", common,
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
    parser.add_argument("--stop-confidence", type=number(float, 0, 1, low_open=True), default=0.999,
                        help="stop once the class confidence reaches this target, gamma (default 0.999)")
    parser.add_argument("--lr", type=number(float, 0, None, low_open=True), default=1.0,
                        help="gradient step size lambda (default 1.0)")
    parser.add_argument("--tv", type=number(float, 0), default=0.0,
                        help="weight of a total-variation AuxTerm (default 0, the paper's AuxTerm = 0)")
    parser.add_argument("--black-box-steps", type=number(int, 0), default=None,
                        help="steps of the black-box variant (finite-difference gradients, 2 d queries a step); "
                             "0 skips it (default 100; quick 20)")
    parser.add_argument("--start", choices=sorted(INVERSION_STARTS), default="mean",
                        help="neutral start: mean (the auxiliary data's mean image over all classes, default) or grey "
                             "(a constant image at their mean intensity)")
    parser.set_defaults(func=execute)
