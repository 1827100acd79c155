"""The supervised command (audit.supervisor.supervised): an ending of the command's process without a verdict is
exit status 3 with one line naming it; a status the command returned is kept; signals sent to the supervisor alone
reach the command. Each test forks this process (the child runs plain Python, no torch: safe to fork)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from audit.supervisor import ending, note_run_dir, supervised

ROOT = Path(__file__).resolve().parents[2]


def _supervised(command: Callable[[], int]) -> int:
    """``supervised(command)`` in this test; the child ends as soon as the command returned (a child must not go
    on running pytest)."""
    parent = os.getpid()
    code = supervised(command)
    if os.getpid() != parent:
        os._exit(code)
    return code


def _hard_exit() -> int:
    os._exit(0)


def _sigkill() -> int:
    os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(30)
    return 0


def _noted_then_hard_exit() -> int:
    note_run_dir("/somewhere/run-1")
    os._exit(0)


def test_a_status_the_command_returns_is_the_supervisors(capsys):
    assert _supervised(lambda: 1) == 1
    assert _supervised(lambda: 0) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(("command", "said"), [(_hard_exit, "ended with exit status 0 before reaching a verdict"),
                                               (_sigkill, "was killed by SIGKILL before reaching a verdict")])
def test_an_ending_without_a_verdict_is_exit_3_in_one_line(command, said, capsys):
    assert _supervised(command) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: the audit could not complete: ") and said in err


def test_the_line_names_the_run_log_when_the_run_had_a_folder(capsys):
    assert _supervised(_noted_then_hard_exit) == 3
    assert capsys.readouterr().err.rstrip().endswith("its log: /somewhere/run-1/log.txt")


#: A process that runs ``supervised`` on a command sending ``SIGNAL`` to its supervisor alone (as ``kill`` does) and
#: exits with the status it returns. Its own process, single-threaded as the command line is, with SIGINT's
#: default handler: a pytest-xdist worker ignores SIGINT and a process it starts inherits that, so a forwarded SIGINT
#: was ignored there (exit 0 after the command's 30 s sleep, in two fresh clones' make test), as it is for any
#: command started with SIGINT ignored (a background job of a non-interactive shell).
_SIGNALLED = """
import os, signal, sys, time
from audit.supervisor import supervised

signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal: pytest-xdist workers ignore SIGINT

def command():
    try:
        os.kill(os.getppid(), signal.SIGNAL)
        time.sleep(30)
    except KeyboardInterrupt:
        return 130
    return 0

sys.exit(supervised(command))
"""


def _terminates_its_supervisor() -> int:
    os.kill(os.getppid(), signal.SIGTERM)
    time.sleep(30)
    return 0


def _signalled(name: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _SIGNALLED.replace("SIGNAL", name)], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))


def test_signals_sent_to_the_supervisor_alone_reach_the_command():
    interrupted = _signalled("SIGINT")
    assert interrupted.returncode == 130, interrupted.stderr
    terminated = _signalled("SIGTERM")
    assert terminated.returncode == 3 and "was killed by SIGTERM" in terminated.stderr


def test_ending_names_the_status_or_the_signal():
    assert "exit status 7" in ending(7) and "SIGSEGV" in ending(-signal.SIGSEGV)
    assert ending(0, "/r").endswith("its log: /r/log.txt")


def test_without_sigtimedwait_the_parent_forwards_by_handlers(monkeypatch, capsys):
    """macOS has no sigtimedwait: the fallback still turns a hard exit into exit 3 and forwards a SIGTERM."""
    monkeypatch.delattr(signal, "sigtimedwait")
    assert _supervised(lambda: 1) == 1
    assert _supervised(_hard_exit) == 3
    assert _supervised(_terminates_its_supervisor) == 3
    err = capsys.readouterr().err
    assert "ended with exit status 0" in err and "was killed by SIGTERM" in err
