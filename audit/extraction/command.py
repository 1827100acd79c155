"""``python -m audit run extraction --target NAME``: steal a logistic-regression target through its API."""

from __future__ import annotations

import argparse

from audit.commands.run import add_kind, positive_int
from audit.kinds import RunKind, options_from_args


def number(kind: type, low: float | None = None, high: float | None = None, low_open: bool = False):
    """argparse type: a ``kind`` (int or float) in [low, high] ((low, high] when ``low_open``)."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        too_low = low is not None and (value <= low if low_open else value < low)
        if too_low or (high is not None and value > high):
            lo, hi = low if low is not None else "-inf", high if high is not None else "inf"
            interval = f"{'(' if low_open else '['}{lo}, {hi}]"
            raise argparse.ArgumentTypeError(f"expected a number in {interval}, got {value}")
        return value

    return parse


def execute(args: argparse.Namespace) -> dict:
    """Run the audit and print its summary; returns the results (``--fail-above-claim`` turns a
    ``violation`` verdict into exit status 1, :func:`audit.commands.run.gated_results`)."""
    run_dir, results, lines = RUN_KIND.execute(options_from_args(RUN_KIND.load("options"), args))
    print("\n".join(lines))
    return results


def register(kinds: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = add_kind(kinds, "extraction", common,
                              help="steal a logistic-regression model through its prediction API (Tramèr et al. 2016)",
                              description="Equation-solving extraction of a softmax or binary logistic-regression "
                                          "target (d + 1 queries on exact outputs, weighted least squares on "
                                          "rounded outputs) and a label-only retraining baseline; reports queries, "
                                          "parameter error, agreement on test and uniform inputs, and for DP "
                                          "targets that the stolen model is the released noisy one.")
    parser.add_argument("--round", type=number(int, 0, 15), default=None, metavar="K",
                        help="the API rounds probabilities to K decimals (default: exact outputs, plus a 3-decimal "
                             "comparison)")
    parser.add_argument("--queries", type=positive_int, default=None,
                        help="queries for equation solving (default d + 1 on exact outputs, 20 (d + 1) when rounded)")
    parser.add_argument("--label-queries", type=positive_int, default=None,
                        help="queries for the label-only baseline (default 50 (d + 1); quick 20 (d + 1))")
    parser.set_defaults(func=execute)


RUN_KIND = RunKind(name="extraction", command="run extraction", options="audit.extraction.runner:ExtractionOptions",
                   run="audit.extraction.runner:run_extraction", summary="audit.extraction.runner:summary_lines",
                   register=register, headline="extraction.png")
