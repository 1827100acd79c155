"""The supervised gate: the user's code runs in a process whose ending cannot become the audit's verdict.

A plugin's ``train`` that calls ``os._exit(0)`` (or a library's hard exit), or a process killed by a signal,
ended the audit with that status: a CI read exit 0 as "consistent" with no results written. Two supervisors
close that door, each at the cost of at most one process start:

* :func:`supervised` — the command line (``python -m audit ...``, run as the whole process). After the light
  parse (no numpy, torch or user code imported yet, so a fork is safe) the process forks; the child runs the
  command and writes its exit status into a pipe just before it returns it; the parent waits. A status in the
  pipe is the command's; a child that ended without writing one ended without a verdict: exit 3 with one line
  naming how (exit status or signal). Signals sent to the parent alone (``kill``, a CI's timeout) are
  forwarded to the child; a terminal's Ctrl-C reaches both already and is not sent twice; the child dies
  with the parent (``PR_SET_PDEATHSIG`` on Linux).
* :func:`call_in_child` — :func:`audit.testing.assert_private` inside pytest, a process whose threads (OpenMP,
  XLA) make a plain fork unsafe (a forked child's first OpenMP region waits for ever on threads that were not
  copied): the audit runs in a child of a fork server (:func:`serve`, started once per process with the
  workbench imported, so each audit costs a fork), which answers through a JSON file. Unlike
  multiprocessing's fork server it never runs the caller's ``__main__`` again, so a plain script may call
  ``assert_private`` at its top level.

Both need a POSIX system with ``fork`` (Linux, macOS); elsewhere the command runs unsupervised, as before.
Without ``sigtimedwait`` (macOS) the parent forwards SIGTERM and SIGHUP through handlers and ignores SIGINT (a
terminal's Ctrl-C reaches the child itself; a SIGINT sent to the parent alone is not forwarded), and without
``PR_SET_PDEATHSIG`` a child outlives a parent killed by SIGKILL. The guarantees are listed in
``docs/reliability.md``.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import importlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from audit.errors import AuditIncomplete, UserError, sys_exit_called
from audit.io import write_json

#: Signals the parent forwards to the child when they were sent to the parent alone.
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: ``si_code`` of a signal the kernel generated for a whole process group (a terminal's Ctrl-C, a hangup):
#: the child received it too, so it is not forwarded (Linux ``SI_KERNEL``).
SI_KERNEL = 0x80
#: ``prctl`` option: the signal a process receives when its parent dies (Linux ``PR_SET_PDEATHSIG``).
PR_SET_PDEATHSIG = 1
#: Modules the fork server (:func:`serve`) imports once, so that each audit's child starts with them: the runners,
#: and the report's renderer (matplotlib, jinja2), which every audit's child would otherwise import again (measured:
#: 2.6 s of a 4 s mechanism audit).
PRELOADED = ["audit.testing", "reports.html", "reports.plots"]
#: The open end of the pipe to the supervising parent, in the supervised child (empty elsewhere).
_CHANNEL: list[int] = []


def ending(status: int, run_dir: str | None = None) -> str:
    """The one line saying how a process ended without a verdict; ``status`` as
    :func:`os.waitstatus_to_exitcode` gives it (negative: killed by that signal)."""
    if status < 0:
        name = signal.Signals(-status).name if -status in signal.valid_signals() else f"signal {-status}"
        how = (f"its process was killed by {name} before reaching a verdict (the code it ran, the system's "
               f"out-of-memory killer, or a signal sent to it)")
    else:
        how = (f"its process ended with exit status {status} before reaching a verdict: the code it ran ended the "
               f"process (os._exit, sys.exit or a library's hard exit); no result was written")
    return how + (f"; its log: {Path(run_dir) / 'log.txt'}" if run_dir else "")


def note_run_dir(run_dir: str | os.PathLike) -> None:
    """Tell the supervising parent (if any) the run directory this process writes, for its line when the process
    ends without a verdict."""
    if _CHANNEL:
        with contextlib.suppress(OSError):
            os.write(_CHANNEL[0], f"run {os.fspath(run_dir)}\n".encode())


def supervised(command: Callable[[], int], *, parent_exits: bool = False) -> int:
    """Run ``command`` in a forked child and return its exit status; exit status 3, with one line on stderr,
    when the child ended without returning one (module docstring).

    Args:
        command: the command line's command, returning the process's exit status. Called in the child only.
        parent_exits: the parent ends the process with that status instead of returning it (it ran none of the
            command, so it has nothing to finalise: the interpreter's shutdown, as long as the command's, is saved).

    Returns:
        The command's exit status (in the child; in the parent unless ``parent_exits``), or 3.
    """
    if not hasattr(os, "fork"):
        return command()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    read_end, write_end = os.pipe()
    waited = {*FORWARDED, signal.SIGCHLD}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, waited)  # no signal lost between the fork and the wait
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        _die_with(parent)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        _CHANNEL[:] = [write_end]
        code = command()
        os.write(write_end, f"exit {code}\n".encode())
        os.close(write_end)
        return code
    os.close(write_end)
    try:
        status = _wait_forwarding(pid, waited) if hasattr(signal, "sigtimedwait") else _wait_handling(pid, mask)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    code = _verdict(_read_available(read_end), status)
    if parent_exits:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _verdict(said: list[str], status: int) -> int:
    """The exit status the child handed over in ``said`` (its lines in the pipe); else 3, with the line saying how
    it ended (``status``)."""
    codes = [line.split()[1] for line in said if line.startswith("exit ")]
    if codes:
        return int(codes[-1])
    runs = [line[4:] for line in said if line.startswith("run ")]
    sys.stderr.write(f"error: the audit could not complete: {ending(status, runs[-1] if runs else None)}\n")
    return 3


def _die_with(parent: int) -> None:
    """This child is killed when its parent dies (Linux; elsewhere nothing happens)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(3)


def _wait_forwarding(pid: int, waited: set[int]) -> int:
    """Wait for the child ``pid`` (its status as :func:`os.waitstatus_to_exitcode` gives it), forwarding the
    signals sent to this process alone (module docstring)."""
    while True:
        info = signal.sigtimedwait(waited, 1.0)
        if info is not None and info.si_signo in FORWARDED and info.si_code != SI_KERNEL:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, info.si_signo)
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)


def _wait_handling(pid: int, mask: set[int]) -> int:
    """:func:`_wait_forwarding` where ``sigtimedwait`` is missing (macOS): handlers forward SIGTERM and SIGHUP, SIGINT
    is ignored (the terminal's reaches the child), then the signals blocked since the fork are let in (``mask``)."""
    def forward(signo: int, _frame: Any) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signo)

    handlers = {signo: forward for signo in FORWARDED if signo != signal.SIGINT} | {signal.SIGINT: signal.SIG_IGN}
    previous = {signo: signal.signal(signo, handler) for signo, handler in handlers.items()}
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    try:
        _, status = os.waitpid(pid, 0)  # retried after each handler (PEP 475)
    finally:
        for signo, handler in previous.items():
            signal.signal(signo, handler)
    return os.waitstatus_to_exitcode(status)


def _read_available(fd: int) -> list[str]:
    """The lines written into the pipe ``fd`` so far (a grandchild holding its other end does not block this)."""
    os.set_blocking(fd, False)
    chunks = []
    with contextlib.suppress(BlockingIOError):
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks).decode(errors="replace").splitlines()


def call_in_child(function: Callable[..., str], *args: Any) -> str:
    """``function(*args)`` run in a child of this process's fork server (:func:`serve`); returns what it returned
    (a path).

    The call is sent with cloudpickle, the serialiser Ray and joblib send functions with: lambdas, closures and
    local functions by value (with the values of the globals they read), importable functions by name (the
    child imports their module afresh, so a monkeypatch of this process does not reach them); a mutation the call
    makes to an object of this process stays in the child. The child has this process's environment variables,
    working directory, ``sys.path`` and torch thread count; what it prints goes to this process's stderr. The
    bytes are made here and read back only by the child a moment later: they never come from a file or another
    party (the rule against untrusted pickles, docs/reliability.md, is about those).

    Raises:
        UserError: an argument cannot be sent to the child, or ``function`` raised one.
        AuditIncomplete: ``function`` raised anything else (the message names it and carries its traceback), or
            the child ended without an answer (:func:`ending`).
    """
    import cloudpickle  # the command line imports this module: its --help stays light

    try:
        payload = cloudpickle.dumps((function, args))
    except Exception as exc:  # cloudpickle's errors for what it cannot send (a lock, an open file, a generator)
        raise UserError(f"the audit runs in a child process so that the code's own exit cannot decide the test, and "
                        f"its target cannot be sent there ({type(exc).__name__}: {exc}): pass 'module:factory' or a "
                        f"factory that holds no open resource") from None
    with tempfile.TemporaryDirectory(prefix="privacy-audit-child-") as folder:
        answer = Path(folder) / "answer.json"
        threads = sys.modules["torch"].get_num_threads() if "torch" in sys.modules else None
        job = {"environ": dict(os.environ), "cwd": os.getcwd(), "path": list(sys.path), "threads": threads,
               "answer": str(answer)}
        status = _SERVER.run(job, payload)
        if not answer.is_file():
            raise AuditIncomplete(ending(status))
        said = json.loads(answer.read_text(encoding="utf-8"))
    if said.get("error") == "UserError":
        raise UserError(said["message"])
    if "error" in said:
        raise AuditIncomplete(said["message"], said.get("log"))
    return said["value"]


class ForkServer:
    """The caller's side of :func:`serve`: a process started on first use (one interpreter start, the workbench
    imported once), which forks one child per job; restarted if it died. Jobs are sent one at a time."""

    def __init__(self) -> None:
        self._process: subprocess.Popen | None = None
        self._lock = threading.Lock()
        atexit.register(self.close)  # a no-op until a server was started

    def run(self, job: dict[str, Any], payload: bytes) -> int:
        """Run one job in a fresh child; returns the child's ending (:func:`os.waitstatus_to_exitcode`)."""
        with self._lock:
            process = self._started()
            header = json.dumps(job | {"size": len(payload)}).encode()
            try:
                process.stdin.write(header + b"\n" + payload)
                process.stdin.flush()
                line = process.stdout.readline()
            except OSError:
                line = b""
            if not line:  # the server itself died (its error is on stderr): the next job starts another
                self._process = None
                raise AuditIncomplete(f"the audit's fork server ended with exit status {process.wait()} before it "
                                      f"could run the audit (its error is printed above)")
            return int(line)

    def _started(self) -> subprocess.Popen:
        if self._process is None or self._process.poll() is not None:
            # the caller's sys.path, made absolute, before anything is imported: the server imports the workbench
            # the caller runs, whatever folder it starts in (`python -c` would put that folder first)
            path = [str(Path(entry or os.curdir).resolve()) for entry in sys.path]
            self._process = subprocess.Popen([sys.executable, "-c", BOOTSTRAP, json.dumps(path)],
                                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        return self._process

    def close(self) -> None:
        """End the server (it ends when its stdin closes) and wait for it."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.stdin.close()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()


#: The fork server's program: the caller's ``sys.path`` (its first argument, JSON), then :func:`serve`.
BOOTSTRAP = "import json, sys; sys.path[:] = json.loads(sys.argv[1]); from audit.supervisor import serve; serve()"
#: This process's fork server (:func:`call_in_child`).
_SERVER = ForkServer()


def serve() -> None:
    """The fork server's loop (:class:`ForkServer`): import :data:`PRELOADED`, then for each job read from stdin (a
    JSON header line, then the call's bytes) fork a child that runs it (:func:`_run_job`), and write the child's
    ending to stdout. Ends when stdin closes (the caller ended). Forking here is safe where forking the caller is
    not: this process has imported the workbench but run nothing (no OpenMP or XLA threads to lose)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the caller's and its child's to handle
    for module in PRELOADED:
        importlib.import_module(module)
    _warm()
    jobs, replies = sys.stdin.buffer, sys.stdout.buffer
    while header := jobs.readline():
        job = json.loads(header)
        payload = jobs.read(job["size"])
        pid = os.fork()
        if pid == 0:
            try:
                _run_job(job, payload)
            finally:  # an interrupt in the child: it never returns into this loop
                os._exit(1)
        _, status = os.waitpid(pid, 0)
        replies.write(f"{os.waitstatus_to_exitcode(status)}\n".encode())
        replies.flush()


def _warm() -> None:
    """In the fork server, what each audit's child would otherwise compute again (measured: 2.6 s of a 4 s mechanism
    audit): the installed distributions a plugin's packages are looked up in (config.json), and matplotlib's fonts,
    loaded by the report's first figure."""
    import io

    from matplotlib.figure import Figure

    from targets.plugins.loading import installed_distributions

    installed_distributions()
    figure = Figure(figsize=(1, 1))
    figure.text(0.5, 0.5, "0.5")
    figure.savefig(io.BytesIO(), format="png")


def _run_job(job: dict[str, Any], payload: bytes) -> None:
    """The fork server's child: the caller's state (environment, folder, ``sys.path``, threads), then its call;
    what the call returned, or the exception it raised, goes to the JSON file ``job["answer"]``. Never returns."""
    import cloudpickle

    signal.signal(signal.SIGINT, signal.default_int_handler)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)  # the server's stdout carries its replies: what the call prints goes to stderr
    os.environ.clear()
    os.environ.update(job["environ"])
    os.chdir(job["cwd"])
    sys.path[:] = job["path"]
    if job["threads"] is not None:
        sys.modules["torch"].set_num_threads(job["threads"])  # preloaded (audit.testing imports torch)
    try:
        function, args = cloudpickle.loads(payload)  # the caller's bytes, made a moment ago (call_in_child)
    except Exception as exc:  # a module the child cannot import by the name the caller had
        said: dict[str, Any] = {"error": "UserError", "message": f"the audit's child process could not read its "
                                f"target ({type(exc).__name__}: {exc}): make its module importable by that name"}
    else:
        said = _called(function, args)
    write_json(job["answer"], said)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _called(function: Callable[..., str], args: tuple) -> dict[str, Any]:
    """``function(*args)``: ``{"value": ...}``, or the error it raised as :func:`call_in_child` re-raises it."""
    try:
        return {"value": function(*args)}
    except UserError as exc:
        return {"error": "UserError", "message": str(exc)}
    except AuditIncomplete as exc:
        return {"error": "AuditIncomplete", "message": str(exc), "log": exc.log_path}
    except SystemExit as exc:
        return {"error": "AuditIncomplete", "message": sys_exit_called(exc)}
    except Exception as exc:  # reported to the caller with its traceback
        return {"error": type(exc).__name__,
                "message": f"{type(exc).__name__}: {exc}\n{''.join(traceback.format_exception(exc))}"}
