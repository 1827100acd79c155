"""The run machinery's chunks and executors (audit.executors), without a run: chunks are cached, reused and never
depend on the number of workers; executor options are checked (the same results on every executor:
tests/e2e/test_executors.py)."""

from __future__ import annotations

from itertools import pairwise

import pytest
import torch

from audit.errors import UserError
from audit.executors import Executor, Job, chunk_slices, make_executor, run_chunks


def _count(calls: list, value: int) -> dict:
    calls.append(value)
    return {"x": torch.tensor([value])}


def test_run_chunks_trains_only_what_is_missing(tmp_path):
    calls: list[int] = []
    chunks = [({"chunk": i}, Job(_count, {"calls": calls, "value": i})) for i in range(3)]
    first, reused = run_chunks(Executor(), tmp_path, chunks)
    assert calls == [0, 1, 2] and reused == [False, False, False]
    next(tmp_path.glob("*.safetensors")).unlink()  # one chunk lost (an interrupted run)
    calls.clear()
    again, reused = run_chunks(Executor(), tmp_path, chunks)
    assert len(calls) == 1 and sum(reused) == 2
    assert [r["x"].item() for r in again] == [r["x"].item() for r in first] == [0, 1, 2]


def test_chunk_boundaries_depend_on_the_call_only():
    assert chunk_slices(12, 8) == [slice(0, 6), slice(6, 12)]
    assert chunk_slices(1, 8) == [slice(0, 1)]
    for n in (1, 7, 8, 9, 256, 1001):
        parts = chunk_slices(n, 8)
        assert parts[0].start == 0 and parts[-1].stop == n and all(a.stop == b.start for a, b in pairwise(parts))
        sizes = [p.stop - p.start for p in parts]
        assert max(sizes) <= 8 and max(sizes) - min(sizes) <= 1


def test_executor_options_are_checked():
    with pytest.raises(UserError, match="--ray-address needs --executor ray"):
        make_executor("local", 1, "127.0.0.1:6379")
    with pytest.raises(UserError, match="unknown executor"):
        make_executor("dask")
    assert make_executor("local", 1).in_process and not make_executor("local", 2).in_process
