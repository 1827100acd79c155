"""``python -m audit run KIND --target NAME ...``: run one audit and write a run directory.

Each kind's record (:class:`audit.kinds.RunKind`, in ``audit/<kind>/command.py``) has a
``register(kind_subparsers, common)``, where ``common`` is a parent parser holding the options every
run accepts (``common_options``). Registering imports nothing heavy: a kind's record names its runner
(torch, scikit-learn, ...) as a string imported when the audit runs, and the
checks of the command line (numbers, :mod:`audit.arguments`; target names against the stored
catalogue, :func:`audit.target_defaults.load_catalogue`) answer bad input before anything heavy is imported.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from audit.arguments import (
    confidence_level,
    delta_value,
    epsilon_value,
    non_negative_int,
    positive_int,
    seed_value,
)
from audit.choices import INITS
from audit.errors import UserError, unknown_target
from audit.kinds import run_kinds
from audit.target_defaults import TargetUse, load_catalogue

#: How ``list`` and ``--help`` name the commands of each run kind in a target's catalogue entry.
COMMANDS = {"sweep": "sweep dp", "bound": "bound"}
#: What a target of each family is, in error messages.
FAMILY_NOUNS = {"trained": "a trained model", "mechanism": "a mechanism", "dp-erm": "a DP-ERM mechanism",
                "control": "a broken control mechanism", "plugin": "a plugin"}


#: What ``--target module:factory`` (a user's plugin, see targets.plugins) is to each run kind that takes
#: one, with the defaults that apply to it (they differ from the built-in targets' presets).
PLUGIN_USES = {
    "membership": "your own training code, a trainer plugin; trained on up to 1,000 rows of its dataset, game "
                  "defaults for plugins: 500 canaries, 2 shadow and 4 reference models (not 6000/2/4)",
    "mechanism": "your own mechanism, a mechanism plugin (its dict: kind 'mechanism', mechanism, neighbours, "
                 "claim); the test statistic is learned on 20,000 separate draws per world first",
    "inversion": "your own training code, a trainer plugin; only predict_proba is seen, so MI-FACE runs black-box "
                 "(finite differences) against a reference model your train fits to the non-members",
    "extraction": "your own training code, a trainer plugin; stolen through predict_proba assuming a logistic "
                  "regression (no parameter error: your parameters are not visible)",
}


def command_name(kind: str) -> str:
    """``run dp``, ``sweep dp`` or ``bound`` for a run kind of the catalogue."""
    return COMMANDS.get(kind, f"run {kind}")


def check_target(kind: str, name: str) -> TargetUse | None:
    """A built-in target that ``kind`` applies to (its catalogue entry), a plugin spec (None: its
    runner loads it), or a one-line :class:`audit.errors.UserError` — without importing the registries."""
    catalogue = load_catalogue()
    if name not in catalogue:
        if ":" in name:
            return None
        raise unknown_target(name, catalogue, "mechanism target" if kind == "mechanism" else "target")
    use = catalogue[name]
    if kind not in use.run_kinds:
        noun = FAMILY_NOUNS[use.family]
        if use.family == "trained" and "dp" not in use.run_kinds:
            noun = "a non-private trained model"
        raise UserError(f"target {name} is {noun} and not a {kind} target; audit it with: "
                        f"{', '.join(f'python -m audit {command_name(k)}' for k in use.run_kinds)}")
    return use


def describe_use(use: TargetUse) -> str:
    """One line: the commands that apply and, for ``run dp``, its threats and canaries with the defaults."""
    text = ", ".join(command_name(k) for k in use.run_kinds)
    if use.threats:
        text += (f"; run dp threats {'|'.join(use.threats)} (default {use.default_threat}), "
                 f"canaries {'|'.join(use.canaries)} (default {use.default_canary})")
    return text


#: ``run dp --help``: what a trainer plugin gets by default.
PLUGIN_DP_DEFAULTS = [
    "  module:factory: your own code, a trainer plugin. Defaults: black-box with the crafted input canary, 200 runs;",
    "    --threat updates (Opacus or a loop with the audit hooks): Dirac gradient canary, 1000 runs; many-run games",
    "    train each run on at most 1000 rows of the plugin's data; --quick: 50 runs.",
    "    --one-run: the accounting check, then ONE training on the whole dataset with M gradient canaries (default M",
    "    by simulating the DP-SGD the code runs, at most 20000 and the parameter count; --quick: at most 2000).",
    "    --check-config: the accounting check alone.",
]


def targets_epilog(kind: str) -> str:
    """``--help`` epilog of a run kind: every built-in target it applies to, with its defaults."""
    lines = [f"targets of {command_name(kind)} (python -m audit list shows all of them):"]
    for name, use in load_catalogue().items():
        if kind in use.run_kinds:
            if kind == "dp":
                lines.append(f"  {name}: threats {'|'.join(use.threats)} (default {use.default_threat}); "
                             f"canaries {'|'.join(use.canaries)} (default {use.default_canary})")
            else:
                lines.append(f"  {name}")
    if kind == "dp":
        lines.extend(PLUGIN_DP_DEFAULTS)
    elif kind in PLUGIN_USES:
        lines.append(f"  module:factory: {PLUGIN_USES[kind]}")
    return "\n".join(lines)


def add_kind(kinds: argparse._SubParsersAction, kind: str, common: argparse.ArgumentParser,
             **kwargs: Any) -> argparse.ArgumentParser:
    """Add run kind ``kind`` with the common options and an epilog naming the targets it applies to."""
    return kinds.add_parser(kind, parents=[common], epilog=targets_epilog(kind),
                            formatter_class=argparse.RawDescriptionHelpFormatter, **kwargs)


def dpsgd_start_options(parser: argparse.ArgumentParser) -> None:
    """``--init`` and ``--calibration-runs`` of ``run dp`` and ``sweep dp`` (DP-SGD targets)."""
    parser.add_argument("--init", default="random", choices=INITS,
                        help="initial parameters of DP-SGD runs: random (each run's own) or pretrained (one model "
                             "trained without privacy on a disjoint half of the data; Annamalai & De Cristofaro 2024)")
    parser.add_argument("--calibration-runs", type=non_negative_int, default=0, metavar="N",
                        help="black-box/white-box: train N more runs (own coins and seeds) and fix the threshold on "
                             "them (default 0: Bonferroni grid over thresholds)")


def executor_options(group) -> None:
    """``--workers``, ``--executor``, ``--ray-address``: where training chunks run (:mod:`audit.executors`)."""
    group.add_argument("--workers", type=positive_int, default=1,
                       help="train chunks of models on N local worker processes (default 1: in this process); "
                            "with --executor ray, the CPUs of a local Ray")
    group.add_argument("--executor", default="local", choices=["local", "ray"],
                       help="where training chunks run: local (this process or --workers processes) or ray "
                            "(needs the ray extra); results are the same on every executor")
    group.add_argument("--ray-address", default=None, metavar="ADDR",
                       help="address of a running Ray cluster (with --executor ray; default: start a local one)")


def common_options() -> argparse.ArgumentParser:
    """Options shared by every ``run`` kind."""
    common = argparse.ArgumentParser(add_help=False)
    group = common.add_argument_group("common run options")
    group.add_argument("--target", required=True, help="target name (see `python -m audit list`) or module:factory")
    group.add_argument("--out", default="runs",
                       help="root folder for run directories and the model cache (default: runs)")
    group.add_argument("--seed", type=seed_value, default=0,
                       help="random seed; the same seed gives the same results (default 0)")
    group.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"],
                       help="where to train (default auto: CUDA if available)")
    group.add_argument("--quick", action="store_true",
                       help="reduced preset that finishes in well under a minute (tests, demos)")
    group.add_argument("--epsilon", type=epsilon_value, default=None,
                       help="claimed epsilon of a DP target (recalibrates its noise)")
    group.add_argument("--delta", type=delta_value, default=None, help="delta of the claim (default: the target's)")
    group.add_argument("--data-dir", default=None,
                       help="folder with full-MNIST IDX files or CIFAR-10 binary files (else $AUDIT_DATA_DIR; "
                            "MNIST: else the embedded sample)")
    add_verbosity(group)
    group.add_argument("--confidence", type=confidence_level, default=0.95,
                       help="family-wise confidence of the verdict and of every reported interval (default 0.95)")
    executor_options(group)
    group.add_argument("--fail-above-claim", action="store_true",
                       help="exit with status 1 when the empirical lower bound exceeds the claim (CI gate)")
    return common


def add_verbosity(group: Any) -> None:
    """``-q/--quiet`` and ``-v/--verbose``: the level of the run log on stderr (log.txt records everything)."""
    group.add_argument("-q", "--quiet", action="store_true",
                       help="no progress bars, only the audit's own warnings on stderr, none of the user's code "
                            "and libraries (Python warnings, Opacus's log); log.txt still records every stage")
    group.add_argument("-v", "--verbose", action="count", default=0,
                       help="more detail on stderr (debug messages of the run log)")


def gated_results(func: Callable[[argparse.Namespace], Any]) -> Callable[[argparse.Namespace], int]:
    """Wrap a function that returns its results dict (or an exit status): with ``--fail-above-claim`` a
    ``violation`` verdict becomes exit status 1."""

    def run(args: argparse.Namespace) -> int:
        outcome = func(args)
        if not isinstance(outcome, dict):
            return int(outcome or 0)
        violation = (outcome.get("verdict") or {}).get("status") == "violation"
        return 1 if violation and getattr(args, "fail_above_claim", False) else 0

    return run


def gated(kind: str, func: Callable[[argparse.Namespace], Any]) -> Callable[[argparse.Namespace], int]:
    """Wrap a run kind's function: the target is checked against the catalogue first, then
    :func:`gated_results`."""
    checked = gated_results(func)

    def run(args: argparse.Namespace) -> int:
        check_target(kind, args.target)
        return checked(args)

    return run


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``run`` and its kinds."""
    parser = subparsers.add_parser("run", help="run an audit (membership, dp, mechanism, inversion, extraction) "
                                               "and write a report",
                                   description="Run one audit against a target and write a run directory with "
                                               "config.json, results.json, report.html and plots.")
    kinds = parser.add_subparsers(dest="kind", metavar="KIND", parser_class=type(parser))
    kinds.required = True
    common = common_options()
    for kind in run_kinds():
        if kind.command.startswith("run "):
            kind.register(kinds, common)
    for kind, kind_parser in kinds.choices.items():
        kind_parser.set_defaults(func=gated(kind, kind_parser.get_default("func")))
