"""Text for the terminal: a string read from a file the user may not have written (a results.json, a compare.json)
reaches stdout with its control characters made visible, so that it cannot move the cursor, change colours, set the
window's title, ring the bell or hide what follows (ANSI escape sequences, bidirectional overrides)."""

from __future__ import annotations

__all__ = ["printable"]


def printable(text: object) -> str:
    """``str(text)`` with every character Python does not print as itself (C0 and C1 controls, DEL, format
    characters such as bidirectional overrides, line and paragraph separators) written as its escape:
    ESC as ``\\x1b``, BEL as ``\\x07``, U+202E as ``\\u202e``; the space and every printable character stay."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in str(text))
