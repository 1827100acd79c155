"""Thread policy for code the workbench runs on a user's behalf (plugins), in one place.

User code runs in the workbench's process with its libraries' default thread pools: OpenBLAS,
MKL and OpenMP (numpy, scipy, scikit-learn) and torch's intra-op pool each start one thread per
core. An audit calls that code thousands of times on small problems, where those threads mostly
spin and wait; on a shared machine they oversubscribe the cores and a scikit-learn fit can run
tens of times slower than single-threaded (measurements: README, "Audit your own code"). The
scikit-learn user guide ("Parallelism, resource management, and configuration: oversubscription")
describes the effect; threadpoolctl is the maintained way to limit BLAS and OpenMP pools at run
time.

Policy: while plugin code runs (:func:`thread_limit`), BLAS/OpenMP pools (threadpoolctl) and
torch's intra-op pool are limited to ``PRIVACY_AUDIT_PLUGIN_THREADS`` threads (default 1; ``0``
leaves the libraries' defaults), and restored afterwards. Parallelism across runs is the
workbench's job, not each call's. The project's own plugins (``opacus_mnist``, the DP-SGD
controls) are exempt: they follow the project's thread settings. The same context manager can
wrap any other code path (the training code, later).
"""

from __future__ import annotations

import contextlib
import os
from typing import Iterator

from audit.errors import UserError

#: Environment variable that overrides the number of threads plugin code may use (0 = no limit).
THREADS_ENV = "PRIVACY_AUDIT_PLUGIN_THREADS"
#: Threads per pool for plugin code unless ``THREADS_ENV`` says otherwise.
DEFAULT_THREADS = 1

__all__ = ["THREADS_ENV", "DEFAULT_THREADS", "plugin_threads", "thread_limit"]


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
    import torch
    from threadpoolctl import threadpool_limits

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
