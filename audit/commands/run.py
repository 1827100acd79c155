"""``python -m audit run KIND --target NAME ...``: run one audit and write a run directory.

Each kind lives in its own module ``audit/commands/run_<kind>.py`` (found by ``run_kinds``)
exposing ``register(kind_subparsers, common)``, where ``common`` is a parent parser holding the
options every run accepts (``common_options``).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
from typing import Any, Callable

import audit.commands


def run_kinds() -> list[str]:
    """Modules ``audit.commands.run_*``, each adding one run kind, sorted by name."""
    return sorted(f"audit.commands.{info.name}" for info in pkgutil.iter_modules(audit.commands.__path__)
                  if info.name.startswith("run_"))


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {value}")
    return value


def confidence_level(text: str) -> float:
    """argparse type: a confidence level strictly between 0 and 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {text!r}") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"confidence must lie strictly between 0 and 1, got {value}")
    return value


def common_options() -> argparse.ArgumentParser:
    """Options shared by every ``run`` kind."""
    common = argparse.ArgumentParser(add_help=False)
    group = common.add_argument_group("common run options")
    group.add_argument("--target", required=True, help="target name (see `python -m audit list`)")
    group.add_argument("--out", default="runs", help="root folder for run directories and the model cache (default: runs)")
    group.add_argument("--seed", type=int, default=0, help="random seed; the same seed gives the same results (default 0)")
    group.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"], help="where to train (default auto: CUDA if available)")
    group.add_argument("--quick", action="store_true", help="reduced preset that finishes in well under a minute (tests, demos)")
    group.add_argument("--epsilon", type=float, default=None, help="claimed epsilon of a DP target (recalibrates its noise)")
    group.add_argument("--delta", type=float, default=None, help="delta of the claim (default: the target's)")
    group.add_argument("--data-dir", default=None, help="folder with full-MNIST IDX files or CIFAR-10 binary files (else $AUDIT_DATA_DIR; MNIST: else the embedded sample)")
    group.add_argument("--quiet", action="store_true", help="no progress bars or stage messages")
    group.add_argument("--confidence", type=confidence_level, default=0.95,
                       help="family-wise confidence of the verdict and of every reported interval (default 0.95)")
    group.add_argument("--fail-above-claim", action="store_true",
                       help="exit with status 1 when the empirical lower bound exceeds the claim (CI gate)")
    return common


def gated(func: Callable[[argparse.Namespace], Any]) -> Callable[[argparse.Namespace], int]:
    """Wrap a run kind's function: it returns its results dict (or an exit status); with
    ``--fail-above-claim`` a ``violation`` verdict becomes exit status 1."""

    def run(args: argparse.Namespace) -> int:
        outcome = func(args)
        if not isinstance(outcome, dict):
            return int(outcome or 0)
        violation = (outcome.get("verdict") or {}).get("status") == "violation"
        return 1 if violation and getattr(args, "fail_above_claim", False) else 0

    return run


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``run`` and its kinds."""
    parser = subparsers.add_parser("run", help="run an audit (membership, ...) and write a report",
                                   description="Run one audit against a target and write a run directory with "
                                               "config.json, results.json, report.html and plots.")
    kinds = parser.add_subparsers(dest="kind", metavar="KIND", parser_class=type(parser))
    kinds.required = True
    common = common_options()
    for module_name in run_kinds():
        importlib.import_module(module_name).register(kinds, common)
    for kind_parser in kinds.choices.values():
        kind_parser.set_defaults(func=gated(kind_parser.get_default("func")))
