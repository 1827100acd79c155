"""Command-line entry point: ``python -m audit <command> ...``.

Each command lives in its own module under :mod:`audit.commands` (found by ``command_modules``) and
exposes ``register(subparsers)``, which adds its parser and sets ``func`` to a callable
``(args) -> int``. Registering a command imports nothing heavy (no numpy, torch, scikit-learn or
matplotlib): ``--help``, ``list``, ``--version`` and bad input answer at once, and a command imports
what it needs when it runs. The run log goes to the ``audit`` logger; ``main`` puts its stderr handler
there at the level ``-q/--quiet`` and ``-v/--verbose`` ask for
(:func:`audit.run_context.configure_console`). Exit statuses: 0 consistent (or no claim), 1 violation (with
``--fail-above-claim``), 2 bad input (:class:`audit.errors.UserError` and argparse usage errors: one
line on stderr), 3 the audit could not complete (:class:`audit.errors.AuditIncomplete`: the
target's own code raised, or an internal error; one line naming the exception and the file holding
its traceback), 130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import pkgutil
import signal
import sys
import traceback
from collections.abc import Sequence

import audit
import audit.commands
from audit.errors import AuditIncomplete, UserError, sys_exit_called
from audit.quiet import quiet_libraries
from audit.run_context import LOGGER, command_clock, configure_console, process_start
from audit.supervisor import supervised

#: Commands shown first in ``--help``; every other module in :mod:`audit.commands` follows in
#: alphabetical order (the audit kinds are not commands: ``run`` adds them, :mod:`audit.commands.run`).
FIRST_COMMANDS = ("list_cmd", "run")


def command_modules() -> list[str]:
    """The command modules, each with ``register(subparsers)``, in ``--help`` order."""
    names = [info.name for info in pkgutil.iter_modules(audit.commands.__path__)]
    ordered = [n for n in FIRST_COMMANDS if n in names] + sorted(n for n in names if n not in FIRST_COMMANDS)
    return [f"audit.commands.{name}" for name in ordered]


class OneLineArgumentParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line on stderr and exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"error: {self.prog}: {message} (see --help)\n")
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser with every registered command."""
    parser = OneLineArgumentParser(
        prog="python -m audit",
        description="privacy-audit: empirical privacy audits of ML models against their DP guarantees.",
    )
    parser.add_argument("--version", action="version", version=f"privacy-audit {audit.__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineArgumentParser)
    subparsers.required = True
    for module_name in command_modules():
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run the command; returns the process exit status. Run as the whole process (``argv``
    None), the command runs supervised (:func:`audit.supervisor.supervised`: an ending of the process without a
    verdict, such as the audited code's ``os._exit(0)``, is exit status 3), and a Ctrl-C that comes once the
    command has returned — its results written — is ignored, so that it cannot turn the exit status into a
    signal's during the interpreter's shutdown (torch's and Ray's threads)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help and --version (0), usage errors (2): argparse has printed them
        return int(exc.code or 0)
    if argv is None:
        started = process_start()
        code = supervised(lambda: _run_command(args, started), parent_exits=True)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        return code
    return _run_command(args, None)


def _run_command(args: argparse.Namespace, started: float | None) -> int:
    """Run the parsed command; ``started``: the process's start (``time.perf_counter()``), None when the command
    is not the whole process."""
    configure_console(getattr(args, "verbose", 0), getattr(args, "quiet", False))
    try:
        with command_clock(started), quiet_libraries(bool(getattr(args, "quiet", False))):
            return int(args.func(args) or 0)
    except UserError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    except AuditIncomplete as exc:
        sys.stderr.write(f"error: the audit could not complete: {exc} ({_traceback_note(exc, exc.log_path)})\n")
        return 3
    except KeyboardInterrupt:
        sys.stderr.write("interrupted: finished models are cached; run the same command again to resume\n")
        return 130
    except BrokenPipeError:  # output piped into a reader that stopped early (e.g. `| head`): not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes
        return 0
    except SystemExit as exc:  # the commands return their status: a SystemExit is the audited code's own
        sys.stderr.write(f"error: the audit could not complete: {sys_exit_called(exc)} "
                         f"({_traceback_note(exc, None)})\n")
        return 3
    except Exception as exc:  # an internal error outside a run directory
        sys.stderr.write(f"error: internal error, the command could not complete: {type(exc).__name__}: {exc} "
                         f"({_traceback_note(exc, None)})\n")
        return 3


def _traceback_note(exc: BaseException, log_path: str | None) -> str:
    """Where the traceback of ``exc`` is: the run's log when it has one; else it is logged at debug level, so that
    ``-v`` prints it (no file is left behind in the temporary folder)."""
    if log_path:
        return f"traceback in {log_path}"
    logging.getLogger(LOGGER).debug("%s", "".join(traceback.format_exception(exc)).rstrip())
    return "run again with -v for its traceback"
