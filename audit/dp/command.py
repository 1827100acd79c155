"""``python -m audit run dp --target NAME [--runs R] [--canary KIND] [--threat MODEL]``: multi-run DP audit."""

from __future__ import annotations

import argparse

from audit.arguments import positive_int
from audit.choices import DP_CANARIES, THREATS
from audit.commands.run import add_kind, dpsgd_start_options
from audit.kinds import RunKind, options_from_args


def execute(args: argparse.Namespace) -> dict:
    """Run the audit and print its summary; returns the results (``--fail-above-claim`` turns a
    ``violation`` verdict into exit status 1, :func:`audit.commands.run.gated_results`)."""
    run_dir, results, lines = RUN_KIND.execute(options_from_args(RUN_KIND.load("options"), args))
    print("\n".join(lines))
    return results


def register(kinds: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = add_kind(
        kinds, "dp", common, help="multi-run DP audit: canary in by fair coins, CP/GDP/per-step bounds",
        description="Train R runs of a DP target (vectorised), each with the canary by a fair coin, score the "
                    "canary under a threat model and bound epsilon from below: Clopper-Pearson (valid), GDP "
                    "(Gaussian tradeoff) and, for --threat updates, per-step observations composed by the "
                    "accountant. Threat and canary default to the strongest the target supports (listed below).")
    parser.add_argument("--runs", type=positive_int, default=None,
                        help="training runs R (default: 4000 for DP-SGD updates/white-box, 1000 black-box, "
                             "200 for trainer plugins, 2000000 noise draws for DP-ERM; --quick: 400 / 20000)")
    parser.add_argument("--canary", default=None, choices=DP_CANARIES,
                        help="canary: dirac/gradient (gradient canaries, DP-SGD), dirac-replace (replace-one pair "
                             "on a crafted dataset: catches shuffled batches accounted as Poisson), natural, "
                             "mislabelled, crafted, blank (input canaries; crafted = low-variance direction, or the "
                             "crafted pair for DP-ERM; blank = all-zero input, last class); default: the target's "
                             "(below)")
    parser.add_argument("--threat", default=None, choices=THREATS,
                        help="what the adversary sees: black-box (final model's loss), white-box (final "
                             "parameters), updates (every intermediate update); default: the target's (below)")
    dpsgd_start_options(parser)
    parser.set_defaults(func=execute)


RUN_KIND = RunKind(name="dp", command="run dp", options="audit.dp.options:DPOptions",
                   run="audit.dp.runner:run_dp", summary="audit.dp.runner:summary_lines",
                   register=register)
