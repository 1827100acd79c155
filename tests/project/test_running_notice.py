"""The suite's own progress lines (tests/running_notice.py): a test running long is named once it passes the first
notice, again every interval after, and never once it has finished."""

from running_notice import LongTestNotice


class _Reporter:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def write_line(self, line: str) -> None:
        self.lines.append(line)


def test_a_long_test_is_named_after_the_first_notice_then_every_interval(monkeypatch) -> None:
    notice = LongTestNotice(_Reporter(), first_s=60, every_s=30)
    clock = iter([100.0])
    monkeypatch.setattr("running_notice.time.monotonic", lambda: next(clock))
    notice.pytest_runtest_logstart("tests/e2e/test_a.py::test_slow")
    assert notice.due(159.0) == []
    assert notice.due(160.0) == [("tests/e2e/test_a.py::test_slow", 60.0)]
    assert notice.due(189.0) == []  # named at 160 s: the next notice is 30 s later
    assert notice.due(190.0) == [("tests/e2e/test_a.py::test_slow", 90.0)]
    notice.pytest_runtest_logfinish("tests/e2e/test_a.py::test_slow")
    assert notice.due(1000.0) == []


def test_the_watcher_writes_the_notice_on_the_terminal() -> None:
    reporter = _Reporter()
    notice = LongTestNotice(reporter, first_s=0.0, every_s=3600, tick_s=0.01)
    notice.pytest_runtest_logstart("tests/e2e/test_b.py::test_long")
    notice.pytest_sessionstart()
    notice.thread.join(timeout=0.5)  # the watcher ticks until the session ends
    notice.pytest_sessionfinish()
    notice.thread.join(timeout=5)
    assert not notice.thread.is_alive()
    assert reporter.lines == ["... still running after 0 s: tests/e2e/test_b.py::test_long"]
