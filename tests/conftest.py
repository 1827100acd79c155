"""Settings and fixtures shared by the whole suite (layout and lanes: tests/README.md).

Property-based tests draw their examples deterministically (a fixed seed derived from each test), so
every run of the suite checks the same cases."""

from collections.abc import Iterator

import pytest
from hypothesis import settings

settings.register_profile("deterministic", derandomize=True)
settings.load_profile("deterministic")


@pytest.fixture(scope="module")
def one_thread() -> Iterator[None]:
    """One BLAS/OpenMP thread and one torch thread for a module's tests (restored after it): small matrix
    products and small models are slower on several threads than on one, by tenfold when other processes
    hold the cores. A module asks for it with ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    import torch
    from threadpoolctl import threadpool_limits

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(limits=1):
            yield
    finally:
        torch.set_num_threads(threads)
