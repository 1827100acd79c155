"""The command line every audit kind shares: the options every run takes (:func:`common_options`), a
kind's subparser with the targets it applies to in its epilog (:func:`add_kind`), the target check
against the stored catalogue (:func:`check_target`) and the exit status of a verdict
(:func:`gated_results`).

It sits below the commands (:mod:`audit.commands`) and the kind packages (``audit/<kind>/command.py``)
that build their parsers from it, and reads what differs between kinds from their records
(:class:`audit.kinds.RunKind`): the kinds are not listed here. Standard library and the stored catalogue
only (:func:`audit.target_defaults.load_catalogue`), so that ``--help`` and bad input answer at once.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from audit.arguments import (
    DELTA_RANGE,
    EPSILON_RANGE,
    SEED_RANGE,
    confidence_level,
    delta_value,
    epsilon_value,
    folder,
    non_negative_int,
    positive_int,
    seed_value,
)
from audit.choices import INITS
from audit.errors import UserError, unknown_target
from audit.kinds import RunKind, kind_of
from audit.target_defaults import TargetUse, load_catalogue

#: What a target of each family is, in error messages.
FAMILY_NOUNS = {"trained": "a trained model", "mechanism": "a mechanism", "dp-erm": "a DP-ERM mechanism",
                "control": "a broken control mechanism", "plugin": "a plugin", "lm": "a language model"}


def command_name(kind: str) -> str:
    """``run dp``, ``sweep dp`` or ``bound`` for a run kind of the catalogue (its record's ``command``;
    ``bound``, which is no audit kind, is its own command)."""
    record = kind_of(name=kind)
    return record.command if record is not None else kind


def check_target(kind: str, name: str) -> TargetUse | None:
    """A built-in target that ``kind`` applies to (its catalogue entry), a plugin spec (None: its
    runner loads it), or a one-line :class:`audit.errors.UserError` — without importing the registries."""
    catalogue = load_catalogue()
    if name not in catalogue:
        if ":" in name:
            return None
        record = kind_of(name=kind)
        noun = record.target_noun if record is not None else "target"
        raise unknown_target(name, catalogue, noun)
    use = catalogue[name]
    if kind not in use.run_kinds:
        noun = FAMILY_NOUNS[use.family]
        if use.family == "trained" and "dp" not in use.run_kinds:
            noun = "a non-private trained model"
        raise UserError(f"target {name} is {noun} and not a {kind} target; audit it with: "
                        f"{', '.join(f'python -m audit {command_name(k)}' for k in use.run_kinds)}")
    return use


def threats_and_canaries(use: TargetUse) -> str:
    """``threats a|b (default a); canaries x|y (default x)`` of a ``run dp`` target."""
    return (f"threats {'|'.join(use.threats)} (default {use.default_threat}); "
            f"canaries {'|'.join(use.canaries)} (default {use.default_canary})")


def describe_use(use: TargetUse) -> str:
    """One line: the commands that apply and, for ``run dp``, its threats and canaries with the defaults."""
    text = ", ".join(command_name(k) for k in use.run_kinds)
    if use.threats:
        text += f"; run dp {threats_and_canaries(use).replace(';', ',')}"
    return text


def targets_epilog(kind: RunKind) -> str:
    """``--help`` epilog of a run kind: every built-in target it applies to (with its threats and
    canaries where the record lists them, ``target_details``), then what a plugin is to it."""
    lines = [f"targets of {kind.command} (python -m audit list shows all of them):"]
    for name, use in load_catalogue().items():
        if kind.name in use.run_kinds:
            lines.append(f"  {name}: {threats_and_canaries(use)}" if kind.target_details else f"  {name}")
    if kind.plugin_help:
        lines.append(f"  module:factory: {kind.plugin_help[0]}")
        lines.extend(f"    {line}" for line in kind.plugin_help[1:])
    return "\n".join(lines)


def add_kind(kinds: argparse._SubParsersAction, kind: RunKind, common: argparse.ArgumentParser,
             **kwargs: Any) -> argparse.ArgumentParser:
    """Add run kind ``kind`` (its record) with the common options and an epilog naming the targets it
    applies to."""
    name = kind.command.split()[-1]
    return kinds.add_parser(name, parents=[common], epilog=targets_epilog(kind),
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
    group.add_argument("--out", type=folder, default="runs",
                       help="root folder for run directories and the model cache, a non-empty path (default: runs)")
    group.add_argument("--seed", type=seed_value, default=0,
                       help=f"random seed, {SEED_RANGE}; the same seed gives the same results (default 0)")
    group.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"],
                       help="where to train (default auto: CUDA if available)")
    group.add_argument("--quick", action="store_true",
                       help="reduced preset that finishes in well under a minute (tests, demos)")
    group.add_argument("--epsilon", type=epsilon_value, default=None,
                       help=f"claimed epsilon of a DP target, {EPSILON_RANGE} (recalibrates its noise)")
    group.add_argument("--delta", type=delta_value, default=None,
                       help=f"delta of the claim, {DELTA_RANGE} (default: the target's)")
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
    """Wrap a function that returns its run's outcome (:class:`audit.stats.outcome.Outcome`, anything with
    a ``verdict``) or an exit status: with ``--fail-above-claim`` a ``violation`` verdict becomes exit status 1 and
    a ``could-not-read`` verdict (a check that could void the accounting was not read) exit status 2."""

    def run(args: argparse.Namespace) -> int:
        outcome = func(args)
        verdict = getattr(outcome, "verdict", None)
        if verdict is None:
            return int(outcome or 0)
        gate = getattr(args, "fail_above_claim", False)
        if verdict.status == "could-not-read":  # a check was not read: never a pass under the gate
            return 2 if gate else 0
        return 1 if verdict.status == "violation" and gate else 0

    return run
