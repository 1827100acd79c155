"""The report is the command's step (:mod:`audit.report_step`), not the runner's: a runner's ``finish`` writes
results.json and config.json only; the command (:meth:`audit.kinds.RunKind.execute`, which ``run``, ``sweep``
and ``rerun`` call) renders report.html once, refreshes the index of the runs and logs ``report written`` before
the summary is made; a library caller of a runner gets the report when it asks for it (``write_report``), drawn
from the outcome and the config the runner recorded, without the package versions ``finish`` adds (as the
report showed when ``finish`` drew it); a report that cannot be drawn is an incomplete audit, its traceback in
the run's log.txt."""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest

from audit.errors import AuditIncomplete, UserError
from audit.kinds import RunKind
from audit.report_step import write_report
from audit.results_header import ResultsHeader
from audit.run_context import RunContext
from audit.run_results import RunResults, Unbounded
from audit.stats.outcome import Outcome, Verdict

RESULTS = RunResults(header=ResultsHeader(description="a target", delta=None, confidence=0.95, epsilon_theory=None),
                     judgement=Unbounded(verdict=Verdict(status="no-claim", text="no claim tested")))


@dataclass(frozen=True, kw_only=True)
class ExampleOptions:
    """The options of the example kind's runner.

    Attributes:
        out: the folder of runs.
        seed: the seed.
    """

    out: str
    seed: int = 0


def run_example(opts: ExampleOptions) -> tuple[Path, Outcome]:
    """A runner as every kind's ends: typed results handed to ``finish``."""
    ctx = RunContext(opts.out, "example", "laplace_count", seed=opts.seed, quiet=True)
    with ctx:
        return ctx.run_dir, ctx.finish(RESULTS, {"command": "run example", "options": asdict(opts)})


def summary_example(run_dir: Path, outcome: Outcome) -> list[str]:
    """The example kind's console lines; logged when made, so that their order against the report is seen."""
    logging.getLogger("audit.test").info("summary made")
    return [f"report:    {run_dir / 'report.html'}"]


EXAMPLE = RunKind(name="example", command="run example", options=f"{__name__}:ExampleOptions",
                  run=f"{__name__}:run_example", summary=f"{__name__}:summary_example", register=lambda *_: None)


@pytest.fixture
def reported():
    """The report and summary lines the ``audit`` loggers emit during the test, in order (a handler on ``audit``
    itself: the command line's console stops propagation there)."""
    lines: list[str] = []
    handler = logging.Handler(logging.INFO)
    handler.emit = lambda record: lines.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("audit")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield lambda: [line for line in lines if line.startswith(("report written", "summary made"))]
    logger.removeHandler(handler)
    logger.setLevel(level)


def test_a_library_caller_of_a_runner_gets_no_report_unless_it_asks(tmp_path, reported) -> None:
    run_dir, outcome = run_example(ExampleOptions(out=str(tmp_path)))
    assert (run_dir / "results.json").is_file() and (run_dir / "config.json").is_file()
    assert not (run_dir / "report.html").exists() and not (tmp_path / "index.html").exists()
    assert reported() == []
    assert write_report(run_dir, outcome) == run_dir / "report.html"
    assert (run_dir / "report.html").is_file() and (tmp_path / "index.html").is_file()
    assert reported() == [f"report written: {run_dir / 'report.html'}"]
    log = (run_dir / "log.txt").read_text(encoding="utf-8").splitlines()
    assert log[-2].endswith(f"report written: {run_dir / 'report.html'}") and "index refreshed" in log[-1]
    html = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "options.out" in html and "packages." not in html  # the runner's config, not what finish added


def test_the_command_renders_the_report_once_before_the_summary(tmp_path, reported) -> None:
    run_dir, outcome, lines = EXAMPLE.execute(ExampleOptions(out=str(tmp_path)))
    assert outcome.kind == "example" and lines == [f"report:    {run_dir / 'report.html'}"]
    assert (run_dir / "report.html").is_file() and (tmp_path / "index.html").is_file()
    assert reported() == [f"report written: {run_dir / 'report.html'}", "summary made"]


def test_a_report_that_cannot_be_drawn_is_an_incomplete_audit(tmp_path, monkeypatch) -> None:
    run_dir, outcome = run_example(ExampleOptions(out=str(tmp_path)))

    def broken(*_args, **_kwargs):
        raise ValueError("a figure could not be drawn")

    monkeypatch.setattr("reports.html.render_report", broken)
    with pytest.raises(AuditIncomplete, match="internal error: ValueError: a figure could not be drawn") as raised:
        write_report(run_dir, outcome)
    assert raised.value.log_path == str(run_dir / "log.txt")
    assert "ValueError: a figure could not be drawn" in (run_dir / "log.txt").read_text(encoding="utf-8")


def test_a_report_that_cannot_be_written_is_the_users_error_naming_the_fix(tmp_path) -> None:
    """An output folder the report cannot be written into (a folder where index.html goes; as root, permissions
    stop nothing) is a one-line UserError naming the fix, as ``make_run_dir`` says it (issue 53), not exit 3."""
    run_dir, outcome = run_example(ExampleOptions(out=str(tmp_path)))
    (tmp_path / "index.html").mkdir()
    with pytest.raises(UserError, match=rf"cannot write to output directory {tmp_path} \(Is a directory\); pass a "
                                        r"writable --out DIR"):
        write_report(run_dir, outcome)
