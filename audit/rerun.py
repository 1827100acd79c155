"""``python -m audit rerun RUN_DIR``: run a finished run's command again from its config.json.

Every runner stores ``command`` and ``options`` (its options dataclass) in config.json; this module
maps the command back to its kind's record (:mod:`audit.kinds`: options class and runner) and writes a
new run directory next to the old one (or under ``out``), sharing the model cache. With the same seed
the new results.json equals the old one apart from its ``volatile`` keys (time, host, timing).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from audit.errors import UserError
from audit.kinds import kind_of, run_kinds
from audit.stats.outcome import Outcome
from audit.terminal import printable
from reports.html import load_run_json


def rerun(run_dir: str | Path, out: str | Path | None = None,
          quiet: bool = False) -> tuple[Path, Outcome, list[str]]:
    """Re-execute the run in ``run_dir``; returns (new run directory, its outcome, summary lines)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UserError(f"run directory {run_dir} does not exist: pass the directory of a finished run")
    config = load_run_json(run_dir, "config.json", required=True)
    command, options = config.get("command"), config.get("options")
    kind = kind_of(command=command) if isinstance(command, str) else None
    if kind is None or not isinstance(options, dict):
        raise UserError(f"{run_dir / 'config.json'} records no re-runnable command (got {command!r}); rerun takes "
                        f"the directory of a {', '.join(k.command for k in run_kinds())} run")
    options_class = kind.load("options")
    fields = {f.name for f in dataclasses.fields(options_class)}
    unknown = sorted(set(options) - fields)
    if unknown:
        raise UserError(f"{run_dir / 'config.json'} has options this version does not know "
                        f"({printable(', '.join(unknown))}); rerun it with the privacy-audit version in its "
                        f"config.json 'packages'")
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in options.items()}
    values |= {"out": str(out if out is not None else run_dir.resolve().parent), "quiet": quiet}
    return kind.execute(options_class(**values))
