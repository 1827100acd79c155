"""Thread policy of the workbench, in one place: training (:func:`training_threads`) and code run
on a user's behalf (plugins, :func:`thread_limit`).

**Training.** DP-SGD on small models runs many small kernels per step (a few hundred
microseconds to a few milliseconds each). torch's intra-op pool (OpenMP) splits each kernel over
its threads and waits for all of them at the end; when another process takes one of the cores,
every kernel waits for the descheduled thread, and an epoch took 3.1x its idle time beside one
busy loop on 2 cores. Policy:

* intra-op threads per training process = the CPUs it may use (:func:`usable_cpus`: the affinity
  mask ``os.sched_getaffinity``, the cgroup CPU quota, ``OMP_NUM_THREADS`` when set — the
  smallest) minus the CPUs other processes keep busy right now (:func:`busy_cpus`), at least 1;
  re-decided while training runs (:class:`TrainingThreads`, every :data:`RECHECK_S` seconds), so
  a busy loop or a second audit that starts later shrinks the pool instead of stalling it;
* parallelism across models is the executors' job (:mod:`audit.executors`): a local process pool
  gives each of its N workers ``OMP_NUM_THREADS = usable // N`` (single-threaded torch per worker
  on a 2-core machine with 2 workers), Ray gives each task its one CPU; torch's inter-op pool is
  not used;
* ``PRIVACY_AUDIT_THREADS=N`` pins the intra-op threads (no adaptation).

The thread count never changes results: a model's training is bit-identical with 1 and 2 threads
(tests/e2e/test_executors.py), and ``benchmarks/bench_training.py`` checks 1 thread against the
policy's count on the machine it runs on (``threads_identical``).

**Plugins.** User code runs in the workbench's process with its libraries' default thread pools:
OpenBLAS, MKL and OpenMP (numpy, scipy, scikit-learn) and torch's intra-op pool each start one
thread per core. An audit calls that code thousands of times on small problems, where those threads
mostly spin and wait; on a shared machine they oversubscribe the cores and a scikit-learn fit can
run tens of times slower than single-threaded (measurements: docs/reference/plugins.md, "Randomness,
outputs, threads and provenance"). The scikit-learn user guide ("Parallelism, resource management,
and configuration: oversubscription") describes the effect; threadpoolctl is the maintained way to
limit BLAS and OpenMP pools at run time. While plugin code runs (:func:`thread_limit`), BLAS/OpenMP
pools (threadpoolctl) and torch's intra-op pool are limited to ``PRIVACY_AUDIT_PLUGIN_THREADS``
threads (default 1; ``0`` leaves the libraries' defaults), and restored afterwards. The project's
own plugins (``opacus_mnist``, the DP-SGD controls) are exempt: they follow the training policy. """

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Iterator
from pathlib import Path

import torch
from threadpoolctl import threadpool_limits

from audit.errors import UserError

#: Environment variable that overrides the number of threads plugin code may use (0 = no limit).
THREADS_ENV = "PRIVACY_AUDIT_PLUGIN_THREADS"
#: Threads per pool for plugin code unless ``THREADS_ENV`` says otherwise.
DEFAULT_THREADS = 1

#: Environment variable pinning the intra-op threads of training (a whole number >= 1).
TRAINING_THREADS_ENV = "PRIVACY_AUDIT_THREADS"
#: Seconds between two decisions of the training policy while a training call runs.
RECHECK_S = 1.0

__all__ = ["THREADS_ENV", "DEFAULT_THREADS", "TRAINING_THREADS_ENV", "RECHECK_S", "plugin_threads", "thread_limit",
           "torch_threads", "usable_cpus", "busy_cpus", "training_threads", "TrainingThreads"]


def plugin_threads() -> int:
    """Threads per pool for plugin code: ``THREADS_ENV`` (a whole number; 0 = no limit) or
    ``DEFAULT_THREADS``; anything else is a one-line error."""
    raw = os.environ.get(THREADS_ENV, "").strip()
    if not raw:
        return DEFAULT_THREADS
    if not raw.isdigit():
        raise UserError(f"{THREADS_ENV} must be a whole number of threads (0 = the libraries' defaults); got {raw!r}")
    return int(raw)


@contextlib.contextmanager
def thread_limit(threads: int | None = None) -> Iterator[None]:
    """Limit BLAS/OpenMP pools (threadpoolctl) and torch's intra-op pool to ``threads`` inside the
    block (None: :func:`plugin_threads`; 0: no limit), restoring them on exit."""

    n = plugin_threads() if threads is None else int(threads)
    if n == 0:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        with threadpool_limits(limits=n):
            yield
    finally:
        torch.set_num_threads(before)


@contextlib.contextmanager
def torch_threads(threads: int) -> Iterator[None]:
    """torch's intra-op pool limited to ``threads`` inside the block (no effect when it is smaller).

    Training runs its reductions over the examples of a batch in ``torch_threads(1)``: split over
    threads, a sum is added in an order that depends on the thread count (oneDNN's weight gradients,
    matrix products with a long inner dimension), so one thread keeps results independent of it."""

    before = torch.get_num_threads()
    if before <= threads:
        yield
        return
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _whole_number(name: str, minimum: int) -> int | None:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < minimum:
        raise UserError(f"{name} must be a whole number >= {minimum}; got {raw!r}")
    return int(raw)


def _cgroup_quota() -> int | None:
    """CPUs of the cgroup v2 quota (``cpu.max``: "QUOTA PERIOD"), rounded up; None without one."""
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
    except (OSError, ValueError):
        return None
    return None if quota == "max" else max(1, math.ceil(int(quota) / int(period)))


def usable_cpus() -> int:
    """CPUs this process may use: the smallest of its affinity mask (``os.sched_getaffinity``,
    else ``os.cpu_count()``), the cgroup CPU quota and ``OMP_NUM_THREADS`` (when set)."""
    counts = [len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1]
    quota = _cgroup_quota()
    if quota is not None:
        counts.append(quota)
    omp = os.environ.get("OMP_NUM_THREADS", "").strip()
    if omp.isdigit() and int(omp) > 0:
        counts.append(int(omp))
    return max(1, min(counts))


def _running_threads_of_this_process() -> int:
    running = 0
    for task in os.scandir("/proc/self/task"):
        try:
            stat = Path(task.path, "stat").read_text()
        except OSError:  # the thread ended
            continue
        running += stat.rsplit(")", 1)[1].split()[0] == "R"
    return running


def busy_cpus(samples: int = 3, gap_s: float = 0.0005) -> int:
    """CPUs that other processes' runnable threads take right now: the kernel's count of runnable
    threads (``/proc/loadavg``, fourth field) minus this process's running threads, the smallest of
    ``samples`` readings ``gap_s`` apart (a thread that runs only for a moment is not a busy CPU).

    0 where it cannot be known for the CPUs this process runs on: outside Linux, or when the
    affinity mask or a cgroup quota confines the process to part of the machine (the count is
    machine-wide)."""
    if not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < (os.cpu_count() or 1) \
            or _cgroup_quota() is not None:
        return 0
    readings = []
    try:
        for i in range(samples):
            if i:
                time.sleep(gap_s)
            running = int(Path("/proc/loadavg").read_text().split()[3].split("/")[0])
            readings.append(max(0, running - _running_threads_of_this_process()))
    except (OSError, ValueError, IndexError):
        return 0
    return min(readings)


_last_decision: tuple[float, int] | None = None  # (time.monotonic(), threads) of the last adaptive decision


def training_threads(max_age_s: float = 0.0) -> int:
    """Intra-op threads for training now: ``PRIVACY_AUDIT_THREADS`` when set, else
    :func:`usable_cpus` minus :func:`busy_cpus`, at least 1 (see the module docstring); a decision
    taken less than ``max_age_s`` seconds ago is reused."""
    global _last_decision
    pinned = _whole_number(TRAINING_THREADS_ENV, 1)
    if pinned is not None:
        return pinned
    now = time.monotonic()
    if _last_decision is None or now - _last_decision[0] >= max_age_s:
        _last_decision = (now, max(1, usable_cpus() - busy_cpus()))
    return _last_decision[1]


class TrainingThreads:
    """The training policy applied to torch's intra-op pool while a training call runs.

    ``with TrainingThreads() as policy:`` sets :func:`training_threads`; ``policy.tick()`` (once per
    step) re-decides when :data:`RECHECK_S` seconds have passed; on exit the previous setting is
    restored. ``history`` lists the thread counts used, in order.
    """

    def __init__(self, recheck_s: float = RECHECK_S) -> None:
        self.recheck_s = recheck_s
        self.history: list[int] = []

    def _apply(self) -> None:

        threads = training_threads(self.recheck_s)
        if threads != torch.get_num_threads():
            torch.set_num_threads(threads)
        if not self.history or self.history[-1] != threads:
            self.history.append(threads)
        self._next = time.monotonic() + self.recheck_s

    def __enter__(self) -> TrainingThreads:

        self._before = torch.get_num_threads()
        self._apply()
        return self

    def tick(self) -> None:
        if time.monotonic() >= self._next:
            self._apply()

    def __exit__(self, *exc) -> None:

        torch.set_num_threads(self._before)
