"""``python -m audit rerun RUN_DIR``: run a finished run's command again from its config.json.

Every runner stores ``command`` and ``options`` (its options dataclass) in config.json; this module
maps the command back to its options class and runner and writes a new run directory next to the
old one (or under ``out``), sharing the model cache. With the same seed the new results.json equals
the old one apart from its ``volatile`` keys (time, host, timing).
"""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path
from typing import Callable

from audit.errors import UserError

#: command in config.json -> (runner module, options class, run function, summary function).
RUNNERS = {
    "run membership": ("audit.run_membership", "MembershipOptions", "run_membership", "summary_lines"),
    "run dp": ("audit.run_dp", "DPOptions", "run_dp", "summary_lines"),
    "run mechanism": ("audit.run_mechanism", "MechanismOptions", "run_mechanism", "summary_lines"),
    "run inversion": ("audit.run_inversion", "InversionOptions", "run_inversion", "summary_lines"),
    "run extraction": ("audit.run_extraction", "ExtractionOptions", "run_extraction", "summary_lines"),
    "sweep dp": ("audit.run_dp", "SweepOptions", "run_sweep", "sweep_summary"),
}


def rerun(run_dir: str | Path, out: str | Path | None = None, quiet: bool = False) -> tuple[Path, dict, list[str]]:
    """Re-execute the run in ``run_dir``; returns (new run directory, results, summary lines)."""
    from reports.html import load_run_json

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UserError(f"run directory {run_dir} does not exist: pass the directory of a finished run")
    config = load_run_json(run_dir, "config.json", required=True)
    command, options = config.get("command"), config.get("options")
    if command not in RUNNERS or not isinstance(options, dict):
        raise UserError(f"{run_dir / 'config.json'} records no re-runnable command (got {command!r}); rerun takes "
                        f"the directory of a {', '.join(RUNNERS)} run")
    module_name, options_name, run_name, summary_name = RUNNERS[command]
    module = importlib.import_module(module_name)
    options_class = getattr(module, options_name)
    fields = {f.name for f in dataclasses.fields(options_class)}
    unknown = sorted(set(options) - fields)
    if unknown:
        raise UserError(f"{run_dir / 'config.json'} has options this version does not know ({', '.join(unknown)}); "
                        f"rerun it with the privacy-audit version in its config.json 'packages'")
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in options.items()}
    values |= {"out": str(out if out is not None else run_dir.resolve().parent), "quiet": quiet}
    runner: Callable = getattr(module, run_name)
    new_dir, results = runner(options_class(**values))
    return new_dir, results, getattr(module, summary_name)(new_dir, results)
