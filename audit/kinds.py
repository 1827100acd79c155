"""One record per audit kind (:class:`RunKind`), read by the command line (:mod:`audit.run_parser`),
``rerun`` and the catalogue (:func:`audit.target_defaults.build_catalogue`); the reports read its look
from it when they draw a run of the kind (:func:`reports.presentation.presentation_of`). A kind lives in
its own package (``audit/<kind>/``: its game, its runner, its plugin adapter, its options) whose
``command`` module holds its record and its command-line options; adding a kind is that package plus one
line in :data:`audit.kind_table.KIND_COMMANDS` (``docs/contributing.md``). The records name their runners as
``module:attribute`` strings, imported when a run starts (:meth:`RunKind.load`), so that ``--help``,
``list`` and bad input answer without importing numpy or torch.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from audit.kind_table import kind_records
from audit.report_step import write_report
from reports.presentation import DEFAULT, Presentation

if TYPE_CHECKING:  # the kinds answer --help without importing a runner
    from audit.stats.outcome import Outcome

@dataclass(frozen=True, kw_only=True)
class RunKind:
    """An audit kind and everything the command line, the catalogue and the reports need of it.

    Attributes:
        name: The kind's name (``results["kind"]``, the catalogue's ``run_kinds``).
        command: The command that runs it, as config.json records it (``run dp``, ``sweep dp``).
        options: ``module:attribute`` of its options dataclass.
        run: ``module:attribute`` of its runner, ``run(options) -> (run_dir, outcome)`` (the typed
            :class:`audit.stats.outcome.Outcome` its results.json holds); it writes config.json and
            results.json, and :meth:`execute` renders the report.
        summary: ``module:attribute`` of its console lines, ``summary(run_dir, outcome) -> lines``.
        register: Adds its options to the command line, ``register(kind_subparsers, common)``.
        report: How its report is drawn (headline figure, sentences, compact table); the reports read it
            by the outcome's ``kind`` (:func:`reports.presentation.presentation_of`).
        applies_to: ``module:attribute`` of ``applies(name, use) -> bool``, which built-in targets it takes
            beyond those :func:`audit.target_defaults.target_use` names for the built-in kinds (``use``: the
            target's :class:`audit.target_defaults.TargetUse`); read only when the stored catalogue is
            rebuilt. None: the built-in answer alone.
        target_noun: What its ``--target`` is called in the unknown-target error.
        target_details: Its ``--help`` epilog lists each target's threats and canaries.
        plugin_help: What ``--target module:factory`` is to it, lines of its ``--help`` epilog (empty: it
            takes no plugin).
        detail: ``module:attribute`` of its own result block (an :class:`audit.stats.blocks.Block`, declared in
            its package; an :class:`audit.stats.outcome.Detail` answers what the reports may ask of it), the
            ``detail`` of its outcome: built typed by its runner, written in results.json beside the envelope's
            keys (none of its keys may be the envelope's), read back by ``kind``, and part of the generated
            schema (its keys required in the kind's runs). None: it has none.
        results: What every results.json of the kind holds beyond the envelope, as JSON Schema applied when
            ``kind`` is its name (the keys of :class:`audit.stats.outcome.Outcome` it requires, constraints
            on its blocks); part of the generated schema (:mod:`audit.schemas.generate`). None: the
            envelope only.
    """

    name: str
    command: str
    options: str
    run: str
    summary: str
    register: Callable[..., Any]
    report: Presentation = DEFAULT
    applies_to: str | None = None
    target_noun: str = "target"
    target_details: bool = False
    plugin_help: tuple[str, ...] = ()
    detail: str | None = None
    results: Mapping[str, Any] | None = None

    def load(self, what: str) -> Any:
        """The options class, runner, summary, ``applies_to`` function or ``detail`` block (``what`` one of the
        field names)."""
        module, _, attribute = getattr(self, what).partition(":")
        return getattr(importlib.import_module(module), attribute)

    def execute(self, options: Any) -> tuple[Path, Outcome, list[str]]:
        """Run ``options`` (its options dataclass), render the run's report (the runner wrote its results:
        :func:`audit.report_step.write_report`), and return (run directory, outcome, summary lines)."""
        run_dir, outcome = self.load("run")(options)
        write_report(run_dir, outcome)
        return run_dir, outcome, self.load("summary")(run_dir, outcome)

    def main(self, args: argparse.Namespace) -> Outcome:
        """The command line's entry: the options from ``args``, the run, its summary printed; returns the
        outcome (``--fail-above-claim`` turns a ``violation`` into exit status 1,
        :func:`audit.run_parser.gated_results`)."""
        run_dir, outcome, lines = self.execute(options_from_args(self.load("options"), args))
        print("\n".join(lines))
        return outcome


#: What every run of a kind that tests a claim with attacks (dp, membership, mechanism) writes beyond the
#: envelope: its attacks (one at least), ceiling, tradeoff curves, game and target (a :attr:`RunKind.results`).
CLAIM_AUDIT = {"required": ["attacks", "ceiling", "tradeoff", "lower_bound_tradeoff", "game", "params",
                            "neighbouring", "accountant"],
               "properties": {"attacks": {"minProperties": 1}}}


def run_kinds() -> list[RunKind]:
    """Every kind's record, in :data:`audit.kind_table.KIND_COMMANDS` order."""
    return kind_records()


def kind_of(*, name: str | None = None, command: str | None = None) -> RunKind | None:
    """The record with this ``name`` or ``command``; None when there is none."""
    return next((k for k in run_kinds() if k.name == name or k.command == command), None)


def options_from_args(options: type, args: argparse.Namespace, **extra: Any) -> Any:
    """An options dataclass from parsed command-line ``args``: every field the parser defines, plus ``extra``."""
    values = {f.name: getattr(args, f.name) for f in fields(options) if hasattr(args, f.name)}
    return options(**(values | extra))
