"""Progress of a long test on the terminal: a test that has run for :data:`FIRST_NOTICE_S` seconds is named
(``... still running after 60 s: tests/e2e/...::test_x``) and named again every :data:`EVERY_S` seconds until it
ends, so a slow end-to-end run is never mistaken for a hang. Registered by ``tests/conftest.py`` in the process
that writes the terminal: the only one without pytest-xdist, the controller with it (xdist relays each worker's
``pytest_runtest_logstart``/``logfinish`` there, so a worker's long test is named by the controller)."""

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
    """Register :class:`LongTestNotice` where the terminal is written (not in an xdist worker, nor with ``-p
    no:terminal``)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and not hasattr(config, "workerinput"):
        config.pluginmanager.register(LongTestNotice(reporter), "long-test-notice")
