"""``python -m audit run mechanism --target NAME``: audit a DP mechanism on its neighbouring pair."""

from __future__ import annotations

import argparse

from audit.arguments import positive_int
from audit.choices import MECHANISM_DRAWS
from audit.errors import UserError
from audit.kinds import CLAIM_AUDIT, RunKind
from audit.run_parser import add_kind
from audit.stats.outcome import Outcome
from reports.presentation import Presentation


def execute(args: argparse.Namespace) -> Outcome:
    """Run the audit and print its summary; returns the outcome (``--fail-above-claim`` turns a
    ``violation`` verdict into exit status 1, :func:`audit.run_parser.gated_results`)."""
    if args.device == "cuda" or args.data_dir is not None:
        option = "--device cuda" if args.device == "cuda" else "--data-dir"
        raise UserError(f"{option} does not apply to mechanism audits (they sample with numpy on the CPU); drop it")
    return RUN_KIND.main(args)


def register(kinds: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = add_kind(kinds, RUN_KIND, common, help="audit a DP mechanism on its neighbouring pair",
                      description="Sample the mechanism many times on each dataset of its worst-case neighbouring "
                                  "pair, threshold a test statistic (Bonferroni over thresholds fixed in advance), "
                                  "and bound epsilon from below (Clopper-Pearson and Gaussian DP).")
    parser.add_argument("--draws", type=positive_int, default=MECHANISM_DRAWS,
                        help=f"outputs drawn per dataset (default {MECHANISM_DRAWS})")
    parser.set_defaults(func=execute)


RUN_KIND = RunKind(name="mechanism", command="run mechanism", options="audit.mechanism.runner:MechanismOptions",
                   run="audit.mechanism.runner:run_mechanism", summary="audit.mechanism.runner:summary_lines",
                   register=register, target_noun="mechanism target",
                   report=Presentation(game="audit.mechanism.report:game_phrase"), plugin_help=(
                       "your own mechanism, a mechanism plugin (its dict: kind 'mechanism', mechanism, neighbours, "
                       "claim); the test statistic is learned on 20,000 separate draws per world first",),
                   results={"allOf": [CLAIM_AUDIT, {
                       "properties": {"game": {"required": ["draws_per_world", "threshold_strategy"]}}}]})
