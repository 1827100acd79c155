"""The run context every runner shares: run directories ``<out>/<utc-time>-<kind>-<target>/``
with config.json, results.json, report.html, plots and log.txt (``<out>/cache/`` holds trained
models shared between runs), the results envelope, timing, and the handling of a run that cannot
complete (:class:`RunContext`).

The run log is standard :mod:`logging`: each run has a logger ``audit.run.<run directory name>``
whose handler writes every record to the run's ``log.txt``; records propagate to the ``audit``
logger, where the command line puts one stderr handler (:func:`configure_console`: warnings only
with ``--quiet``, stage messages by default, debug detail with ``-v``). Library users configure the
``audit`` logger as they like; without configuration the stages go to ``log.txt`` only.

Stages (:class:`Stages`): a command's stages are timed into ``timing["<stage>_s"]``; each start and end
goes to log.txt, and a stage given a text prints one line when it starts, ``[i/n] text``, with an
estimate once a training of the user's code has been timed (:meth:`Stages.set_training_time`). A
command may start its stages before its run directory exists (checks that end in a one-line error
write nothing): those lines reach stderr at once and log.txt when the :class:`RunContext` is made.
``timing["total_s"]`` is the wall time to results.json written from the command's start: the process's
start for the first run of a command line (:func:`command_clock`, :meth:`Stages.for_command`, with
``startup_s`` the imports and loading before the first stage), else the run's first stage; the
stages' times add up to at most it.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import logging
import os
import platform
import re
import sys
import time
import traceback
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from audit.errors import AuditIncomplete, UserError, sys_exit_called
from audit.io import write_json
from audit.supervisor import note_run_dir

if TYPE_CHECKING:  # run_context is on the --help path: the outcome's types are imported when a run finishes
    from audit.run_results import RunResults
    from audit.stats.outcome import Outcome

#: Version of the results.json format (audit/schemas/results.schema.json). 3: sweep rows name their audit's
#: directory deterministically and keep its wall time in ``timing`` (was ``rows[].wall_s``).
SCHEMA_VERSION = 4
#: Top-level results.json keys that may differ between two runs of the same command and seed.
VOLATILE_KEYS = ["created", "host", "timing"]
#: Parent of every logger of the workbench; the command line's stderr handler sits here.
LOGGER = "audit"
#: ``extra`` of a log record meant for log.txt only (a traceback): the stderr handler drops it.
FILE_ONLY = {"file_only": True}
#: ``time.perf_counter()`` at the start of this process's command (:func:`command_clock`), until a run
#: claims it (:meth:`Stages.for_command`).
_COMMAND_START: list[float] = []


def process_start() -> float | None:
    """``time.perf_counter()``'s value when this process started (Linux: /proc/self/stat), or None."""
    try:
        with open("/proc/self/stat", encoding="ascii") as stat:
            start_ticks = int(stat.read().rsplit(")", 1)[1].split()[19])  # field 22, starttime since boot
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    return time.perf_counter() - age if age >= 0 else None


@contextlib.contextmanager
def command_clock(started: float | None = None) -> Iterator[None]:
    """While the command line runs a command, its first run's ``total_s`` counts from ``started`` (the process's
    start, :func:`process_start`, when the process is this command: ``python -m audit ...``), else from the
    block's start."""
    _COMMAND_START[:] = [started or time.perf_counter()]
    try:
        yield
    finally:
        _COMMAND_START.clear()


class StderrHandler(logging.StreamHandler):
    """A stream handler writing to whatever ``sys.stderr`` is when a record is emitted."""

    def __init__(self) -> None:
        super().__init__()
        self.addFilter(lambda record: not getattr(record, "file_only", False))

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:  # StreamHandler.__init__ assigns it; the current sys.stderr is used instead
        pass


def configure_console(verbose: int = 0, quiet: bool = False) -> None:
    """Put one stderr handler on the ``audit`` logger: WARNING and above with ``quiet``, stage messages
    (INFO) by default, DEBUG with ``verbose``; replaces the handler of an earlier call. The command line
    owns stderr: records stop there instead of reaching handlers that libraries (absl) put on the root."""
    logger = logging.getLogger(LOGGER)
    for handler in [h for h in logger.handlers if isinstance(h, StderrHandler)]:
        logger.removeHandler(handler)
    handler = StderrHandler()
    handler.setLevel(logging.WARNING if quiet else logging.DEBUG if verbose else logging.INFO)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False


def utc_now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def host_info() -> dict:
    # run_context is on the --help path (configure_console): imported only when a run needs it
    import numpy
    import torch

    return {"python": platform.python_version(), "platform": platform.platform(), "torch": torch.__version__,
            "numpy": numpy.__version__, "cpus": os.cpu_count(),
            "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}


def package_versions() -> dict:
    """Versions of the packages that determine results (recorded in config.json)."""
    # run_context is on the --help path (configure_console): imported only when a run needs it
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ("privacy-audit", "torch", "numpy", "scipy", "scikit-learn", "dp-accounting", "mlxtend"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


@dataclass(frozen=True)
class RunPaths:
    root: Path
    run_dir: Path
    cache_dir: Path

    @property
    def logger(self) -> logging.Logger:
        """The run's logger; its handler appends ``<utc time> <message>`` lines to the run's log.txt."""
        logger = logging.getLogger(f"{LOGGER}.run.{self.run_dir.name}")
        if not logger.handlers:
            handler = logging.FileHandler(self.run_dir / "log.txt", encoding="utf-8", delay=True)
            formatter = logging.Formatter("%(asctime)s %(message)s", "%Y-%m-%dT%H:%M:%SZ")
            formatter.converter = time.gmtime
            handler.setFormatter(formatter)
            logger.addHandler(handler)
            logger.setLevel(logging.DEBUG)
        return logger

    def log(self, message: str, level: int = logging.INFO) -> None:
        """Log a stage message of the run (log.txt; stderr as configured by :func:`configure_console`)."""
        self.logger.log(level, message)

    def close_log(self) -> None:
        """Close the run's log.txt (the run is over)."""
        logger = logging.getLogger(f"{LOGGER}.run.{self.run_dir.name}")
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
            handler.close()


def _duration(seconds: float) -> str:
    """``seconds`` for a progress line: "8 s", "2 min 05 s"."""
    seconds = max(0, round(seconds))
    return f"{seconds} s" if seconds < 120 else f"{seconds // 60} min {seconds % 60:02d} s"


class Stages:
    """The timed stages of one command and their progress lines (module docstring).

    ``planned``: the names of the stages that print a line, in order ("[i/n]"); ``trainings``: what each
    costs in trainings of the user's code (for the estimates; :meth:`expect` adds more); ``started``: the
    command's start (``time.perf_counter()``; default now). Lines go to the ``audit.run`` logger (stderr
    as :func:`configure_console` says; nothing with ``-q``) and, once :meth:`attach` names the run
    directory, to its log.txt (earlier lines are written there then, with their own time).
    """

    def __init__(self, planned: Sequence[str] = (), trainings: dict[str, float] | None = None,
                 started: float | None = None) -> None:
        self.planned = list(planned)
        self.started = time.perf_counter() if started is None else float(started)
        self.timing: dict[str, float] = {}
        self.training_s: float | None = None
        self._trainings = dict(trainings or {})
        self._early: list[logging.LogRecord] = []
        self._paths: RunPaths | None = None

    @classmethod
    def for_command(cls, planned: Sequence[str] = (), trainings: dict[str, float] | None = None) -> Stages:
        """Stages that start at the command's start when the command line marked one no run has claimed
        (``timing["startup_s"]``: from it to now), else now."""
        now = time.perf_counter()
        started = _COMMAND_START.pop() if _COMMAND_START else now
        stages = cls(planned, trainings, started)
        if started < now:
            stages.timing["startup_s"] = now - started
        return stages

    def attach(self, paths: RunPaths) -> None:
        """From now on lines go to ``paths``' log.txt too; the lines logged before are written there."""
        self._paths = paths
        for record in self._early:
            for handler in paths.logger.handlers:
                handler.handle(record)
        self._early = []

    def log(self, message: str, level: int = logging.INFO) -> None:
        """One line of the command's log (stderr as configured; log.txt once attached)."""
        if self._paths is not None:
            self._paths.log(message, level)
            return
        record = logging.LogRecord(f"{LOGGER}.run", level, __file__, 0, message, None, None)
        logging.getLogger(f"{LOGGER}.run").handle(record)
        self._early.append(record)

    def expect(self, name: str, trainings: float) -> None:
        """Stage ``name`` will cost about ``trainings`` trainings of the user's code."""
        self._trainings[name] = float(trainings)

    def set_training_time(self, seconds: float) -> None:
        """One training of the user's code took ``seconds``: the later lines carry estimates."""
        self.training_s = float(seconds)

    def _eta(self, name: str) -> str:
        """" — about 20 s, 45 s left in all": this stage's estimate (when it trains the code) and that of the
        stages from this one on; empty before a training was timed."""
        if self.training_s is None:
            return ""
        later = self.planned[self.planned.index(name):] if name in self.planned else [name]
        left = sum(self._trainings.get(n, 0.0) for n in later) * self.training_s
        parts = [f"about {_duration(self._trainings[name] * self.training_s)}"] if name in self._trainings else []
        if left > self._trainings.get(name, 0.0) * self.training_s:
            parts.append(f"{_duration(left)} left in all")
        return f" — {', '.join(parts)}" if parts else ""

    @contextlib.contextmanager
    def stage(self, name: str, text: str | None = None) -> Iterator[None]:
        """Time a stage into ``timing[name + "_s"]`` (added up when it runs again); its start and end go to
        log.txt; with ``text`` its start prints ``[i/n] text`` and the estimate (class docstring)."""
        if text is not None:
            where = f"[{self.planned.index(name) + 1}/{len(self.planned)}] " if name in self.planned else ""
            self.log(f"{where}{text}{self._eta(name)}")
        self.log(f"stage {name} started", logging.DEBUG)
        t0 = time.perf_counter()
        try:
            yield
        finally:
            took = time.perf_counter() - t0
            self.timing[f"{name}_s"] = self.timing.get(f"{name}_s", 0.0) + took
            self.log(f"stage {name} ended after {took:.2f} s", logging.DEBUG)


def safe_name(text: str) -> str:
    """A file-name-safe rendering of a target name or plugin path."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[:80]


def cache_dir_of(out: str | os.PathLike) -> Path:
    """The model cache shared by the runs written under ``out``: ``<out>/cache``."""
    return Path(out).expanduser() / "cache"


#: The fix an output-folder error names for the commands with ``--out`` (:func:`writing_into`).
OUT_FIX = "pass a writable --out DIR"


@contextlib.contextmanager
def writing_into(folder: str | os.PathLike, fix: str = OUT_FIX) -> Iterator[None]:
    """Inside the block, a failure to write (an :class:`OSError`: no permission, a file where a folder is due, a
    full disk) is the user's to fix: a one-line :class:`audit.errors.UserError` naming ``folder``, the reason
    and ``fix`` (exit status 2), the same for ``run``, ``report`` and ``compare``. Keep reads that may fail
    for their own reasons outside the block (the results readers already turn theirs into a UserError).

    Args:
        folder: the output folder the block writes into.
        fix: what the user can do (default: :data:`OUT_FIX`).

    Raises:
        UserError: an OSError left the block.
    """
    try:
        yield
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise UserError(f"cannot write to output directory {folder} ({reason}); {fix}") from None


def fresh_dir(root: Path, base: str) -> Path:
    """Create ``root/base``, or the first of ``root/base-2``, ``root/base-3``, ... that does not exist, and return
    it. ``mkdir`` alone decides which is free, so two processes naming a folder at the same moment never both
    take one (the loser of a name moves on to the next suffix)."""
    suffix = 1
    while True:
        run_dir = root / (base if suffix == 1 else f"{base}-{suffix}")
        try:
            run_dir.mkdir()
        except FileExistsError:
            suffix += 1
            continue
        return run_dir


def make_run_dir(out: str | os.PathLike, kind: str, target: str, name: str | None = None) -> RunPaths:
    """Create a fresh run directory under ``out`` (never reusing an existing one, :func:`fresh_dir`), named
    ``<utc-time>-<kind>-<target>`` or ``name`` (the audits inside a sweep); a folder that cannot be written is
    a one-line UserError (:func:`writing_into`)."""
    root = Path(out).expanduser()
    with writing_into(root):
        root.mkdir(parents=True, exist_ok=True)
        stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
        run_dir = fresh_dir(root, safe_name(name) if name else f"{stamp}-{kind}-{safe_name(target)}")
        probe = run_dir / ".write-test"
        probe.write_text("ok")
        probe.unlink()
        cache_dir = cache_dir_of(out)
        cache_dir.mkdir(exist_ok=True)
    return RunPaths(root, run_dir, cache_dir)


class RunContext:
    """What every runner shares: the run directory and its log, the seed, the device, timing, the
    ``results.json`` envelope and the atomic writes (the report is the command's step after the runner,
    :func:`audit.report_step.write_report`).

    Use it as a context manager around the run's body: an exception that is not a
    :class:`audit.errors.UserError` (the target's code raised, or an internal error) has its full
    traceback appended to the run's ``log.txt`` and leaves as :class:`audit.errors.AuditIncomplete`
    (exit status 3) naming that file; earlier runs and their files are never touched.
    """

    def __init__(self, out: str | os.PathLike, kind: str, target: str, *, seed: int = 0, quiet: bool = False,
                 device: str = "cpu", name: str | None = None, stages: Stages | None = None) -> None:
        self.kind, self.target, self.seed, self.quiet, self.device_name = kind, target, int(seed), quiet, device
        if device != "cpu":  # --device cuda without a GPU: a one-line error before the run directory exists
            _ = self.device
        self.paths = make_run_dir(out, kind, target, name)
        note_run_dir(self.paths.run_dir)
        self.stages = stages or Stages()
        self.stages.attach(self.paths)
        self.started = self.stages.started
        self.timing = self.stages.timing

    @property
    def run_dir(self) -> Path:
        return self.paths.run_dir

    @property
    def cache_dir(self) -> Path:
        return self.paths.cache_dir

    @property
    def log_path(self) -> Path:
        return self.paths.run_dir / "log.txt"

    @functools.cached_property
    def device(self):
        """The torch device the run trains on (``auto`` resolves to CUDA when available)."""
        # run_context is on the --help path (configure_console): imported only when a run needs it
        from targets.training import resolve_device

        return resolve_device(self.device_name)

    def rng(self, *keys: int):
        """A numpy generator for one named purpose of this run: ``default_rng([seed, *keys])``."""
        # run_context is on the --help path (configure_console): imported only when a run needs it
        import numpy as np

        return np.random.default_rng([self.seed, *keys])

    def say(self, message: str) -> None:
        """Log a stage message (see :meth:`RunPaths.log`)."""
        self.paths.log(message)

    def stage(self, name: str, text: str | None = None) -> contextlib.AbstractContextManager[None]:
        """A timed stage of the run (:meth:`Stages.stage`)."""
        return self.stages.stage(name, text)

    def _flat_detail(self, results: Mapping[str, Any]) -> dict[str, Any]:
        """``results`` with the kind's own block (``detail``, built typed by the runner as its record names it)
        written beside the envelope's keys, as results.json holds it.

        Raises:
            RuntimeError: a detail of another type than the kind's, or a key of the kind's block given beside the
                envelope's instead of in the block (a workbench bug: its runner built them).
        """
        from audit.results_file import detail_block

        results = dict(results)
        detail, block = results.pop("detail", None), detail_block(self.kind)
        loose = [key for key in block.keys() if key in results] if block is not None else []
        if loose:
            raise RuntimeError(f"{', '.join(loose)}: keys of the {self.kind} kind's block {block.__name__}, given "
                               f"beside the envelope's: build the block and pass it as detail (a workbench bug)")
        if detail is None:
            return results
        if block is None or not isinstance(detail, block):
            raise RuntimeError(f"the detail of a {self.kind} run is a {type(detail).__name__}, not the block its "
                               f"record names ({block.__name__ if block else 'none'}): a workbench bug")
        return results | detail.to_dict()

    def finish(self, results: RunResults, config: dict) -> Outcome:
        """Complete ``results`` with the envelope (schema version, kind, seed, time, host, timing) and write
        config.json (with package versions) and results.json atomically; returns the typed outcome written.
        The runner's work ends here: its report is the command's step (:func:`audit.report_step.write_report`).

        results.json is the typed :class:`audit.stats.outcome.Outcome` of the completed results, validated
        against the schema (:func:`audit.results_file.outcome_of`) and written by the one serialiser,
        :func:`audit.results_file.write_outcome`; results that do not follow the schema are a runner's bug and
        leave as :class:`audit.errors.AuditIncomplete` (exit 3).

        Args:
            results: the run's typed results (:class:`audit.run_results.RunResults`, checked where the runner
                built them; its ``detail`` is its kind's own block, :attr:`audit.kinds.RunKind.detail`).
            config: what config.json records (the command and its options).

        Returns:
            The run's :class:`audit.stats.outcome.Outcome`, as results.json holds it; every runner returns it.

        Raises:
            TypeError: ``results`` is not a :class:`audit.run_results.RunResults` (a workbench bug: its runner
                must build them typed); inside the run's block it leaves as ``AuditIncomplete``.
        """
        from audit.results_file import outcome_of, write_outcome  # jsonschema: only when a run is written
        from audit.run_results import RunResults
        from audit.stats.blocks import UnnamedKey
        from audit.stats.outcome import Outcome

        if not isinstance(results, RunResults):
            raise TypeError(f"finish takes the run's RunResults (audit.run_results), not a {type(results).__name__}: "
                            "its runner must build them typed (a workbench bug)")
        entries = {"schema_version": SCHEMA_VERSION, "kind": self.kind, "target": self.target, "seed": self.seed} \
            | self._flat_detail(results.entries()) | {"created": utc_now(), "host": host_info(),
                                                      "volatile": VOLATILE_KEYS}
        write_json(self.run_dir / "config.json", config | {"packages": package_versions()})
        self.timing["total_s"] = time.perf_counter() - self.started
        entries["timing"] = dict(self.timing)
        try:
            outcome = outcome_of(entries, "the results of this run", strict=True)
            assert isinstance(outcome, Outcome)  # a run's results (they carry "kind")
        except (UserError, UnnamedKey) as exc:  # a runner's bug, not the user's: the audit could not complete (exit 3)
            raise RuntimeError(f"{exc} (a workbench bug: its runner built them)") from None
        write_outcome(self.run_dir / "results.json", outcome)
        self.paths.log(f"wrote config.json and results.json (schema version {SCHEMA_VERSION})", logging.DEBUG)
        return outcome

    def __enter__(self) -> RunContext:
        self._device_scope: contextlib.AbstractContextManager = contextlib.nullcontext()
        if self.device_name != "cpu":
            # run_context is on the --help path (configure_console): imported only when a run needs it
            from targets.lm.device import using_lm_device

            self._device_scope = using_lm_device(self.device)  # the language-model code trains on the run's device
        self._device_scope.__enter__()
        return self

    def __exit__(self, kind, exc, tb) -> bool:
        self._device_scope.__exit__(kind, exc, tb)
        incomplete = close_run_log(self.paths, exc)
        if incomplete is not None:
            raise incomplete from exc
        return False


def close_run_log(paths: RunPaths, exc: BaseException | None) -> AuditIncomplete | None:
    """End a block of work on a run (its runner's, :class:`RunContext`; the command's report,
    :func:`finished_run`): an exception that is not a :class:`audit.errors.UserError` has its traceback appended
    to the run's log.txt, and the log is closed.

    Args:
        paths: the run's paths.
        exc: the exception leaving the block, or None.

    Returns:
        The :class:`audit.errors.AuditIncomplete` (exit 3, naming log.txt) to raise instead of ``exc``; None when
        ``exc`` leaves as it is (none, the user's error, an interrupt, or an ``AuditIncomplete``, which is given
        the log's path where it names none).
    """
    if exc is not None and not isinstance(exc, (UserError, KeyboardInterrupt)):
        paths.logger.error("the audit could not complete:\n%s",
                           "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip(),
                           extra=FILE_ONLY)
    paths.close_log()
    log_path = paths.run_dir / "log.txt"
    if exc is None or isinstance(exc, (UserError, KeyboardInterrupt)):
        return None
    if isinstance(exc, AuditIncomplete):
        exc.log_path = exc.log_path or str(log_path)
        return None
    if isinstance(exc, SystemExit):  # the workbench returns its status: a SystemExit is the audited code's
        return AuditIncomplete(sys_exit_called(exc), str(log_path))
    return AuditIncomplete(f"internal error: {type(exc).__name__}: {exc}", str(log_path))


@contextlib.contextmanager
def finished_run(run_dir: str | os.PathLike) -> Iterator[RunPaths]:
    """The paths of a run its runner has finished, for a step taken after it (its report,
    :func:`audit.report_step.write_report`): their log lines go to the run's log.txt, appended, and to stderr as
    :func:`configure_console` says; an exception leaves as it would have inside the run
    (:func:`close_run_log`), and the log is closed at the end.

    Args:
        run_dir: the run's directory (inside ``<out>``, the folder of runs).

    Yields:
        The run's :class:`RunPaths`.
    """
    run_dir = Path(run_dir)
    paths = RunPaths(run_dir.parent, run_dir, cache_dir_of(run_dir.parent))
    try:
        yield paths
    except BaseException as exc:
        incomplete = close_run_log(paths, exc)
        if incomplete is not None:
            raise incomplete from exc
        raise
    close_run_log(paths, None)
