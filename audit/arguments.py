"""argparse types for numbers: one factory for every numeric option of the command line.

:func:`number` builds the type of one number (an int or a finite float within optional bounds, each
end open or closed) and :func:`numbers` that of a comma-separated list of them. A value they reject
is one line naming what was expected and what was given, which argparse prints with the option's
name (exit status 2), e.g. ``argument --delta: delta must lie in (0, 1) (got '1.5'); e.g. 1e-5``.
:func:`limited` adds a limit that is not the number's own but the workbench's (the claims its theory can
compute, :mod:`audit.theory.limits`; the seeds its generators take), with the reason in the error line.
:func:`folder` is the type of ``--out``. Standard library only, so that ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import TypeVar

from audit.theory.limits import DELTA_MAX, DELTA_MAX_WHY, DELTA_MIN, DELTA_MIN_WHY, EPSILON_MAX, EPSILON_MAX_WHY

__all__ = ["number", "numbers", "limited", "folder", "positive_int", "non_negative_int", "seed_value",
           "confidence_level", "epsilon_value", "epsilons_value", "delta_value", "guess_spec", "guess_form",
           "SEED_RANGE", "EPSILON_RANGE", "DELTA_RANGE"]

Parsed = TypeVar("Parsed", int, float, tuple)

#: The largest seed: the run's seed seeds numpy's ``RandomState`` and scikit-learn's ``random_state`` (the blind
#: split check), which take 0 to 2**32 - 1, and numpy's ``SeedSequence``, which takes no negative number.
SEED_MAX = 2 ** 32 - 1
#: The accepted values, as the options' help states them.
SEED_RANGE = f"0 to {SEED_MAX}"
EPSILON_RANGE = f"in (0, {EPSILON_MAX:g}]"
DELTA_RANGE = f"in [{DELTA_MIN:g}, {DELTA_MAX:g}]"


def _bound(value: float) -> str:
    return str(value) if isinstance(value, int) else format(value, "g")


def _requirement(kind: type, minimum: float | None, maximum: float | None, open_min: bool, open_max: bool) -> str:
    """What a value must be, as a noun phrase: "an integer >= 1", "a number in (0, 1]", ..."""
    word = "integer" if kind is int else "number"
    if minimum is not None and maximum is not None:
        return (f"{'an' if kind is int else 'a'} {word} in {'(' if open_min else '['}{_bound(minimum)}, "
                f"{_bound(maximum)}{')' if open_max else ']'}")
    positive = minimum == 0 and open_min and maximum is None
    phrase = f"{'positive ' if positive else ''}{'' if kind is int else 'finite '}{word}"
    phrase = f"{'an' if phrase[0] in 'aeiou' else 'a'} {phrase}"
    if minimum is not None and not positive:
        return f"{phrase} {'>' if open_min else '>='} {_bound(minimum)}"
    if maximum is not None:
        return f"{phrase} {'<' if open_max else '<='} {_bound(maximum)}"
    return phrase


def _reader(kind: type, minimum: float | None, maximum: float | None, open_min: bool,
            open_max: bool) -> tuple[str, Callable[[str], int | float | None]]:
    """(what a value must be, a function reading one value from text: None when it is not one)."""
    if kind not in (int, float):
        raise TypeError(f"number() parses int or float, not {kind!r}")

    def read(text: str) -> int | float | None:
        try:
            value = kind(text)
        except ValueError:
            return None
        if kind is float and not math.isfinite(value):
            return None
        if minimum is not None and (value <= minimum if open_min else value < minimum):
            return None
        if maximum is not None and (value >= maximum if open_max else value > maximum):
            return None
        return value

    return _requirement(kind, minimum, maximum, open_min, open_max), read


def _message(expected: str, verb: str, name: str | None, example: str | None) -> str:
    """The error line, with ``{text}`` left to fill: "expected EXPECTED, got ..." or "NAME must VERB (got ...)"."""
    if name is None:
        return f"expected {expected}, got {{text!r}}"
    return f"{name} must {verb} (got {{text!r}})" + (f"; e.g. {example}" if example else "")


def number(kind: type = float, *, minimum: float | None = None, maximum: float | None = None,
           open_min: bool = False, open_max: bool = False, name: str | None = None,
           example: str | None = None) -> Callable[[str], int | float]:
    """argparse type: a ``kind`` (``int`` or ``float``; floats must be finite) in the interval from
    ``minimum`` to ``maximum`` (None: unbounded on that side; ``open_min``/``open_max`` exclude the
    end). ``name`` and ``example`` make the error read "NAME must lie in (0, 1) (got '1.5'); e.g.
    EXAMPLE" instead of "expected a number in (0, 1), got '1.5'"."""
    requirement, read = _reader(kind, minimum, maximum, open_min, open_max)
    bounded = minimum is not None and maximum is not None
    verb = f"lie in {requirement.split(' in ', 1)[1]}" if bounded else f"be {requirement}"
    message = _message(requirement, verb, name, example)

    def parse(text: str) -> int | float:
        value = read(text)
        if value is None:
            raise argparse.ArgumentTypeError(message.format(text=text))
        return value

    return parse


def numbers(kind: type = float, *, minimum: float | None = None, maximum: float | None = None,
            open_min: bool = False, open_max: bool = False, name: str | None = None,
            example: str | None = None) -> Callable[[str], tuple[int | float, ...]]:
    """argparse type: a non-empty comma-separated list of numbers, each as :func:`number` reads it,
    as a tuple; one error line for the whole list."""
    requirement, read = _reader(kind, minimum, maximum, open_min, open_max)
    each = f"comma-separated, each {requirement}"
    message = _message(each, f"be {each}", name, example)

    def parse(text: str) -> tuple[int | float, ...]:
        values = tuple(read(t) for t in text.split(",") if t.strip())
        if not values or any(v is None for v in values):
            raise argparse.ArgumentTypeError(message.format(text=text))
        return values

    return parse


def limited(parse: Callable[[str], Parsed], *, name: str, why: str, example: str, minimum: float | None = None,
            maximum: float | None = None) -> Callable[[str], Parsed]:
    """argparse type: what ``parse`` reads (a number, or a tuple of them from :func:`numbers`), each value also
    within the workbench's limits, ``minimum`` <= value <= ``maximum``; a value beyond them is one line naming the
    limit and ``why``: "epsilon must be at most 100 (got '1e308'): WHY; e.g. EXAMPLE"."""

    def parse_limited(text: str) -> Parsed:
        value = parse(text)
        values = value if isinstance(value, tuple) else (value,)
        if minimum is not None and any(v < minimum for v in values):
            raise argparse.ArgumentTypeError(f"{name} must be at least {_bound(minimum)} (got {text!r}): {why}; "
                                             f"e.g. {example}")
        if maximum is not None and any(v > maximum for v in values):
            raise argparse.ArgumentTypeError(f"{name} must be at most {_bound(maximum)} (got {text!r}): {why}; "
                                             f"e.g. {example}")
        return value

    return parse_limited


def folder(text: str) -> str:
    """argparse type of ``--out``: a folder's path, not empty or blank (an empty path is the current folder,
    which would receive the run folders, ``index.html`` and ``cache/``)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"the output folder must be a path, not {text!r}; e.g. --out runs")
    return text


#: The numeric types of the options every command shares.
positive_int = number(int, minimum=1)
non_negative_int = number(int, minimum=0)
seed_value = limited(number(int, name="seed", example="0"), name="seed", example="0", minimum=0, maximum=SEED_MAX,
                     why="seeds run from 0 to 2**32 - 1 = 4294967295 (numpy's and scikit-learn's generators)")
confidence_level = number(float, minimum=0, maximum=1, open_min=True, open_max=True, name="confidence",
                          example="0.95")
#: A claimed epsilon, positive, finite and at most :data:`audit.theory.limits.EPSILON_MAX` (the runners check
#: it again).
epsilon_value = limited(number(float, minimum=0, open_min=True, name="epsilon", example="1.0"), name="epsilon",
                        why=EPSILON_MAX_WHY, example="8", maximum=EPSILON_MAX)
#: The claimed epsilons of a sweep, each as :data:`epsilon_value`.
epsilons_value = limited(numbers(float, minimum=0, open_min=True, name="epsilons", example="1,2,4,8"),
                         name="each epsilon", why=EPSILON_MAX_WHY, example="1,2,4,8", maximum=EPSILON_MAX)
#: A delta from :data:`audit.theory.limits.DELTA_MIN` to :data:`audit.theory.limits.DELTA_MAX` (the runners check
#: it again).
delta_value = limited(limited(number(float, minimum=0, maximum=1, open_min=True, open_max=True, name="delta",
                                     example="1e-5"), name="delta", why=DELTA_MIN_WHY, example="1e-5",
                              minimum=DELTA_MIN), name="delta", why=DELTA_MAX_WHY, example="1e-5", maximum=DELTA_MAX)


def guess_spec(value: str | int) -> tuple[int, str] | None:
    """``--guesses`` read as (K, sides): ``K`` (one- or two-sided, the design weighs both: "both"), ``K:0``
    ("one": 'in' for the K highest scores only) or ``K:K`` ("two": also 'out' for the K lowest); None when it is
    none of these."""
    text = str(value).strip()
    k_text, sep, out = text.partition(":")
    if not k_text.isdigit() or int(k_text) < 1 or (sep and out not in ("0", k_text)):
        return None
    return int(k_text), ("both" if not out else "one" if out == "0" else "two")


def guess_form(text: str) -> str:
    """The argparse type of ``--guesses`` (:func:`guess_spec`)."""
    if guess_spec(text) is None:
        raise argparse.ArgumentTypeError(f"guesses must be K, K:0 (one-sided) or K:K (two-sided), K a positive "
                                         f"integer (got {text!r}); e.g. 35:0")
    return text.strip()
