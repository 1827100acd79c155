"""``-q``: the warnings of the user's code and libraries silenced for the length of a command.

Python's warnings (``warnings.warn``: Opacus's "secure RNG turned off", torch's, scikit-learn's) are
ignored inside :func:`quiet_libraries`, and log records below ERROR are dropped for every logger that
takes its level from the root logger (Opacus's ``logger.warning``, a user library's; printed on stderr by
``logging.lastResort`` or by a handler the user's code configured) and for the libraries named in
:data:`LIBRARY_LOGGERS`. The workbench's own console and run log (``audit`` loggers, whose levels are set
explicitly) are untouched; every level is restored on exit.
"""

from __future__ import annotations

import contextlib
import logging
import os
import warnings
from collections.abc import Iterator

__all__ = ["LIBRARY_LOGGERS", "quiet_libraries"]

#: Loggers of the libraries user code trains with, set to ERROR while quiet even where a handler exists.
LIBRARY_LOGGERS = ("opacus", "torch", "transformers", "peft", "absl")
#: transformers sets its logger's level from this variable when it is first imported: a level set before
#: that import (a plugin module imported inside the block) would be overwritten.
TRANSFORMERS_VERBOSITY = "TRANSFORMERS_VERBOSITY"


@contextlib.contextmanager
def quiet_libraries(quiet: bool) -> Iterator[None]:
    """Within the block, when ``quiet``: no Python warnings and no library log records below ERROR."""
    if not quiet:
        yield
        return
    own = logging.getLogger("audit")  # keeps the level it has now, root's included, however root changes
    targets = {own: own.getEffectiveLevel(), logging.getLogger(): logging.ERROR,
               **{logging.getLogger(name): logging.ERROR for name in LIBRARY_LOGGERS}}
    levels = {logger: logger.level for logger in targets}
    verbosity = os.environ.get(TRANSFORMERS_VERBOSITY)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for logger, level in targets.items():
            logger.setLevel(level)
        os.environ[TRANSFORMERS_VERBOSITY] = "error"  # read when transformers is first imported, inside the block
        try:
            yield
        finally:
            for logger, level in levels.items():
                logger.setLevel(level)
            if verbosity is None:
                os.environ.pop(TRANSFORMERS_VERBOSITY, None)
            else:
                os.environ[TRANSFORMERS_VERBOSITY] = verbosity
