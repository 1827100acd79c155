"""The accounting figures remembered on disk (audit/theory/disk_cache.py): read back only under their own key and
code, rewritten when unreadable, never an error when the folder cannot be written; the noise calibration reads
what an earlier process searched."""

from __future__ import annotations

import json

import pytest

from audit.theory import disk_cache, dpsgd
from audit.theory.disk_cache import CACHE_ENV, remembered


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache" / disk_cache.SUBFOLDER


def _counting(value: float) -> tuple[list[int], object]:
    calls: list[int] = []

    def compute() -> float:
        calls.append(1)
        return value
    return calls, compute


def test_a_figure_is_computed_once_and_read_back_exactly(cache):
    calls, compute = _counting(0.1 + 0.2)  # a float whose shortest repr has 17 digits
    assert remembered("f", {"x": 1.5, "n": 3}, compute) == 0.1 + 0.2
    assert remembered("f", {"x": 1.5, "n": 3}, compute) == 0.1 + 0.2
    assert len(calls) == 1 and len(list(cache.glob("*.json"))) == 1
    assert not list(cache.glob("*.tmp"))  # written by renaming a whole file
    assert remembered("f", {"x": 1.5, "n": 4}, compute) == 0.1 + 0.2 and len(calls) == 2  # another question
    assert remembered("g", {"x": 1.5, "n": 3}, compute) == 0.1 + 0.2 and len(calls) == 3  # another name


def test_other_code_never_reads_the_figure(cache, monkeypatch):
    calls, compute = _counting(2.0)
    remembered("f", {"x": 1}, compute)
    monkeypatch.setattr(disk_cache, "accounting_fingerprint", lambda: "other sources")
    assert remembered("f", {"x": 1}, compute) == 2.0 and len(calls) == 2


@pytest.mark.parametrize("content", ["{not json", json.dumps({"key": "someone else's", "value": 1.0}),
                                     json.dumps({"value": float("inf")}), json.dumps([1.0]), ""])
def test_an_unreadable_or_foreign_entry_is_computed_again_and_rewritten(cache, content):
    calls, compute = _counting(3.0)
    remembered("f", {"x": 1}, compute)
    (entry,) = cache.glob("*.json")
    entry.write_text(content)
    assert remembered("f", {"x": 1}, compute) == 3.0 and len(calls) == 2
    assert json.loads(entry.read_text())["value"] == 3.0
    assert remembered("f", {"x": 1}, compute) == 3.0 and len(calls) == 2


def test_a_folder_that_cannot_be_written_only_costs_the_time(tmp_path, monkeypatch):
    blocker = tmp_path / "a file"
    blocker.write_text("")
    monkeypatch.setenv(CACHE_ENV, str(blocker))  # the cache folder would be inside a file
    calls, compute = _counting(4.0)
    assert remembered("f", {"x": 1}, compute) == 4.0 and remembered("f", {"x": 1}, compute) == 4.0
    assert len(calls) == 2


def test_a_failing_computation_writes_nothing(cache):
    def compute() -> float:
        raise ValueError("no figure")
    with pytest.raises(ValueError):
        remembered("f", {"x": 1}, compute)
    assert not cache.exists() or not list(cache.iterdir())


def test_the_calibration_reads_what_an_earlier_process_searched(cache, monkeypatch):
    args = (2.0, 1e-5, 0.1, 50)
    dpsgd.calibrate_noise_multiplier.cache_clear()  # as in a new process: only the disk remembers
    searched = dpsgd.calibrate_noise_multiplier(*args)
    assert dpsgd.DPSGDClaim(searched, 0.1, 50).epsilon(1e-5) <= 2.0
    dpsgd.calibrate_noise_multiplier.cache_clear()
    monkeypatch.setattr(dpsgd, "_search_noise_multiplier", lambda **kw: pytest.fail("searched again"))
    assert dpsgd.calibrate_noise_multiplier(*args) == searched
    dpsgd.calibrate_noise_multiplier.cache_clear()
    monkeypatch.setenv(CACHE_ENV, str(cache.parent.parent / "empty"))  # another folder: no entry, so it searches
    with pytest.raises(pytest.fail.Exception, match="searched again"):
        dpsgd.calibrate_noise_multiplier(*args)
    dpsgd.calibrate_noise_multiplier.cache_clear()


def test_a_write_that_fails_halfway_leaves_no_temporary_file(cache, monkeypatch):
    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(disk_cache.json, "dump", full_disk)
    calls, compute = _counting(5.0)
    assert remembered("f", {"x": 1}, compute) == 5.0
    assert cache.is_dir() and not list(cache.iterdir())
