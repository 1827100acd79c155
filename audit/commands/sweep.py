"""``python -m audit sweep dp --target NAME --epsilons 1,2,4,8``: epsilon lower bound vs theory."""

from __future__ import annotations

import argparse

from audit.arguments import EPSILON_RANGE, epsilons_value, positive_int
from audit.choices import DP_CANARIES, THREATS
from audit.errors import UserError
from audit.kinds import RunKind
from audit.run_parser import check_target, common_options, dpsgd_start_options, gated_results, targets_epilog
from audit.stats.outcome import Outcome
from reports.presentation import Presentation


def _threats(text: str) -> tuple[str, ...]:
    names = tuple(t.strip() for t in text.split(",") if t.strip())
    bad = [n for n in names if n not in THREATS]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"unknown threat model {', '.join(bad) or text!r}; "
                                         f"choose from {', '.join(THREATS)}")
    return names


def execute(args: argparse.Namespace) -> Outcome:
    """Run the sweep and print its summary; returns the outcome (a violation exits 1 under
    --fail-above-claim, :func:`audit.run_parser.gated_results`)."""
    check_target("sweep", args.target)
    if args.epsilon is not None:
        raise UserError("sweep dp audits at each of --epsilons; drop --epsilon")
    return RUN_KIND.main(args)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("sweep",
                                   help="epsilon sweep: audit at several claimed epsilons, plot bound vs theory",
                                   description="Run the audit at each claimed epsilon and plot the empirical lower "
                                               "bound against the theoretical epsilon (with the y = x line), one "
                                               "series per threat model.")
    kinds = parser.add_subparsers(dest="sweep_kind", metavar="KIND", parser_class=type(parser))
    kinds.required = True
    dp = kinds.add_parser("dp", help="sweep the multi-run DP audit (run dp) over epsilons", parents=[common_options()],
                          epilog=targets_epilog(RUN_KIND), formatter_class=argparse.RawDescriptionHelpFormatter)
    dp.add_argument("--epsilons", type=epsilons_value,
                    default=(1.0, 2.0, 4.0, 8.0), help=f"claimed epsilons, each {EPSILON_RANGE} (default 1,2,4,8)")
    dp.add_argument("--threats", type=_threats, default=None,
                    help="comma-separated threat models, one series each (default: updates,white-box for DP-SGD; "
                         "white-box for DP-ERM)")
    dp.add_argument("--canary", default=None, choices=DP_CANARIES,
                    help="canary kind (default: the target's, as run dp: dirac or gradient for DP-SGD, crafted for "
                         "DP-ERM)")
    dp.add_argument("--runs", type=positive_int, default=None, help="runs per audit (default: as run dp)")
    dpsgd_start_options(dp)
    dp.set_defaults(func=gated_results(execute))


RUN_KIND = RunKind(name="sweep", command="sweep dp", options="audit.dp.options:SweepOptions",
                   run="audit.dp.sweep:run_sweep", summary="audit.dp.sweep:sweep_summary",
                   register=register,
                   report=Presentation(headline="epsilon.png", sentences="audit.dp.report:sweep_sentences",
                                       figures="audit.dp.report:sweep_figures",
                                       tables_lead=True),
                   detail="audit.dp.detail:SweepDetail",
                   results={"required": ["family", "tables"],
                            "properties": {"family": {"required": ["size", "confidence"]}}})
