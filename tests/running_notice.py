"""Progress of a long test on the terminal: a test that has run for :data:`FIRST_NOTICE_S` seconds is named
(``... still running after 60 s: tests/e2e/...::test_x``) and named again every :data:`EVERY_S` seconds until it
ends, so a slow end-to-end run is never mistaken for a hang. Registered by ``tests/conftest.py`` in the
pytest-xdist controller (``make test``), which writes the terminal and to which xdist relays each worker's
``pytest_runtest_logstart``/``logfinish``. In one process the notice would be captured with the test's own
output, so it is registered there only with ``-s``; without it, pytest's line already names the running test's
file (and with ``-v`` the test, before it runs)."""

from __future__ import annotations

import threading
import time

import pytest

#: Seconds a test runs before it is named on the terminal, then the interval of the next notices.
FIRST_NOTICE_S = 60.0
EVERY_S = 60.0


class LongTestNotice:
    """Pytest plugin: a watcher thread names each test running longer than :data:`FIRST_NOTICE_S`."""

    def __init__(self, reporter, first_s: float = FIRST_NOTICE_S, every_s: float = EVERY_S, tick_s: float = 5.0):
        self.reporter, self.first_s, self.every_s, self.tick_s = reporter, first_s, every_s, tick_s
        self.running: dict[str, tuple[float, float]] = {}  # nodeid -> (start, when to name it next)
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="long-test-notice", daemon=True)

    def pytest_sessionstart(self) -> None:
        self.thread.start()

    def pytest_sessionfinish(self) -> None:
        self.stop.set()

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        now = time.monotonic()
        with self.lock:
            self.running[nodeid] = (now, now + self.first_s)

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        with self.lock:
            self.running.pop(nodeid, None)

    def due(self, now: float) -> list[tuple[str, float]]:
        """(nodeid, seconds it has run) of the tests to name now; their next notice moves on by ``every_s``."""
        out = []
        with self.lock:
            for nodeid, (start, next_at) in self.running.items():
                if now >= next_at:
                    out.append((nodeid, now - start))
                    self.running[nodeid] = (start, now + self.every_s)
        return out

    def _watch(self) -> None:
        while not self.stop.wait(self.tick_s):
            for nodeid, ran in self.due(time.monotonic()):
                took = f"{ran:.0f} s" if ran < 120 else f"{ran / 60:.0f} min"
                self.reporter.write_line(f"... still running after {took}: {nodeid}")


def register(config: pytest.Config) -> None:
    """Register :class:`LongTestNotice` in the xdist controller, or in a single process run with ``-s`` (never in
    an xdist worker, nor with ``-p no:terminal``)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    controller = config.pluginmanager.has_plugin("dsession")  # xdist's distributed session: -n N with N > 0
    uncaptured = config.getoption("capture") == "no"
    if reporter is not None and not hasattr(config, "workerinput") and (controller or uncaptured):
        config.pluginmanager.register(LongTestNotice(reporter), "long-test-notice")
