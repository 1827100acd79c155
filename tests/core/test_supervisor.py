"""The supervised command (audit.supervisor.supervised): an ending of the command's process without a verdict is
exit status 3 with one line naming it; a status the command returned is kept; signals sent to the supervisor alone
reach the command.

Each case runs in a fresh Python process (:data:`_CASE`), single-threaded as the command line is when it forks.
Never in the pytest process: a pytest-xdist worker has threads (execnet's, and torch's or XLA's after the tests
before), and a fork of it can deadlock in the child on a lock another thread held (seen: a child stuck on a futex, its
parent waiting for it, the whole make test stopped until CI's 90-minute limit), or, where the child does not end,
run the worker's remaining tests a second time."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest
from helpers import ROOT

from audit.supervisor import ending

#: A process that runs ``supervised`` on the command named by its first argument and exits with the status it
#: returns; with a second argument ``no-sigtimedwait``, as on macOS (no ``signal.sigtimedwait``). SIGINT has its
#: default handler, as in a terminal: a process started by a pytest-xdist worker inherits the worker's ignored SIGINT
#: (a forwarded SIGINT was ignored there: exit 0 after the command's sleep, in two fresh clones' make test), as any
#: command started with SIGINT ignored does (a background job of a non-interactive shell).
_CASE = """
import os, signal, sys, time
from audit.supervisor import note_run_dir, supervised

signal.signal(signal.SIGINT, signal.default_int_handler)
if sys.argv[2:] == ["no-sigtimedwait"]:
    del signal.sigtimedwait

def hard_exit():
    os._exit(0)

def sigkill():
    os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(30)
    return 0

def noted_then_hard_exit():
    note_run_dir("/somewhere/run-1")
    os._exit(0)

def signals_its_supervisor(name):
    def command():
        try:
            os.kill(os.getppid(), getattr(signal, name))
            time.sleep(30)
        except KeyboardInterrupt:
            return 130
        return 0
    return command

COMMANDS = {"returns 1": lambda: 1, "returns 0": lambda: 0, "hard exit": hard_exit, "sigkill": sigkill,
            "noted then hard exit": noted_then_hard_exit, "sends SIGINT": signals_its_supervisor("SIGINT"),
            "sends SIGTERM": signals_its_supervisor("SIGTERM")}
parent = os.getpid()
code = supervised(COMMANDS[sys.argv[1]])
if os.getpid() != parent:  # the child: it ends with the command's status, as the command line's child does
    os._exit(code)
sys.exit(code)
"""


def _supervised(command: str, *more: str) -> subprocess.CompletedProcess:
    """The :data:`_CASE` process for ``command`` (its exit status and stderr); 60 s at most."""
    return subprocess.run([sys.executable, "-c", _CASE, command, *more], capture_output=True, text=True, timeout=60,
                          cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def test_a_status_the_command_returns_is_the_supervisors():
    for command, status in (("returns 1", 1), ("returns 0", 0)):
        done = _supervised(command)
        assert (done.returncode, done.stderr) == (status, ""), done.stderr


@pytest.mark.parametrize(("command", "said"), [("hard exit", "ended with exit status 0 before reaching a verdict"),
                                               ("sigkill", "was killed by SIGKILL before reaching a verdict")])
def test_an_ending_without_a_verdict_is_exit_3_in_one_line(command, said):
    done = _supervised(command)
    assert done.returncode == 3, done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: the audit could not complete: ")
    assert said in done.stderr


def test_the_line_names_the_run_log_when_the_run_had_a_folder():
    done = _supervised("noted then hard exit")
    assert done.returncode == 3 and done.stderr.rstrip().endswith("its log: /somewhere/run-1/log.txt")


def test_signals_sent_to_the_supervisor_alone_reach_the_command():
    interrupted = _supervised("sends SIGINT")
    assert interrupted.returncode == 130, interrupted.stderr
    terminated = _supervised("sends SIGTERM")
    assert terminated.returncode == 3 and "was killed by SIGTERM" in terminated.stderr


def test_ending_names_the_status_or_the_signal():
    assert "exit status 7" in ending(7) and "SIGSEGV" in ending(-signal.SIGSEGV)
    assert ending(0, "/r").endswith("its log: /r/log.txt")


def test_without_sigtimedwait_the_parent_forwards_by_handlers():
    """macOS has no sigtimedwait: the fallback still turns a hard exit into exit 3 and forwards a SIGTERM."""
    assert _supervised("returns 1", "no-sigtimedwait").returncode == 1
    hard = _supervised("hard exit", "no-sigtimedwait")
    assert hard.returncode == 3 and "ended with exit status 0" in hard.stderr
    terminated = _supervised("sends SIGTERM", "no-sigtimedwait")
    assert terminated.returncode == 3 and "was killed by SIGTERM" in terminated.stderr
