"""The errors the command line turns into exit statuses (the bottom layer: imports nothing).

* :class:`UserError` — bad input the user can fix: one line on stderr, exit status 2.
* :class:`AuditIncomplete` — the audit could not complete: the target's own code raised
  (:class:`TargetCodeError`) or the workbench failed (an internal error). One line on stderr naming
  the exception and where the full traceback was written (the run's ``log.txt``), exit status 3 —
  never the status of a violation (1) or of bad input (2).
"""

from __future__ import annotations

import difflib
import importlib.util
from collections.abc import Iterable


class UserError(ValueError):
    """Bad input from the user (unknown target, invalid epsilon, missing data, ...).

    The message must name the problem and the fix in one line; the CLI prints it without a
    traceback and exits with status 2. A :class:`ValueError`, so code that validates values with
    ``except ValueError`` catches it too: keep a ``try`` around conversions only, never around calls
    that may raise a UserError with a better message.
    """


class AuditIncomplete(Exception):
    """The audit could not complete. ``log_path`` is where the full traceback was written (None
    until a run context has written it)."""

    def __init__(self, message: str, log_path: str | None = None) -> None:
        super().__init__(message)
        self.log_path = log_path


class TargetCodeError(AuditIncomplete):
    """The audited target's own code (a plugin's ``train``, ``mechanism`` or ``predict_proba``)
    raised; raise it ``from`` the original exception so its traceback is kept."""


def sys_exit_called(exc: SystemExit) -> str:
    """What an audit says when the code it ran raised :class:`SystemExit` (the workbench returns its exit statuses
    and never raises it past parsing, so a SystemExit is the audited code's own ``sys.exit``)."""
    return f"the code it ran called sys.exit({exc.code!r})"


def did_you_mean(word: str, choices: Iterable[str], n: int = 3) -> str:
    """``"; did you mean 'x'?"`` (or ``'x' or 'y'``) for the ``choices`` closest to ``word``
    (:func:`difflib.get_close_matches`, ratio >= 0.6); ``""`` when none is close."""
    matches = difflib.get_close_matches(word, sorted(set(choices)), n=n, cutoff=0.6)
    return f"; did you mean {' or '.join(repr(m) for m in matches)}?" if matches else ""


def unknown_target(name: str, known: Iterable[str], noun: str = "target") -> UserError:
    """The one-line error for a target ``name`` that is neither one of the ``known`` built-in names nor
    ``module:factory``: a bare importable module name is shown the ``module:factory`` form; anything else
    gets the closest built-in names (:func:`did_you_mean`)."""
    if ":" not in name and _is_module(name):
        return UserError(f"{noun} {name!r} is a module: name the function in it that returns the plugin dict, as "
                         f"module:factory (e.g. --target {name}:trainer)")
    return UserError(f"unknown {noun} {name!r}{did_you_mean(name, known) or '.'} Run `python -m audit list` to see "
                     f"the targets, or name your own code as module:factory.")


def _is_module(name: str) -> bool:
    """Whether ``name`` is an importable module (found on the path; parent packages are imported, the module
    itself is not)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False
