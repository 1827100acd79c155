"""The errors the command line turns into exit statuses (the bottom layer: imports nothing).

* :class:`UserError` — bad input the user can fix: one line on stderr, exit status 2.
* :class:`AuditIncomplete` — the audit could not complete: the target's own code raised
  (:class:`TargetCodeError`) or the workbench failed (an internal error). One line on stderr naming
  the exception and where the full traceback was written (the run's ``log.txt``), exit status 3 —
  never the status of a violation (1) or of bad input (2).
"""

from __future__ import annotations


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
