"""Errors a user can cause: reported as one line on stderr with exit status 2."""


class UserError(Exception):
    """Bad input from the user (unknown target, invalid epsilon, missing data, ...).

    The message must name the problem and the fix in one line; the CLI prints it without a
    traceback and exits with status 2.
    """
