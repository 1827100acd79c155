"""``built_once`` (tests/helpers.py): a session folder shared by the pytest-xdist workers is built by the first
that asks, once, and read by the others; a build that failed halfway is built again."""

from pathlib import Path

import pytest
from helpers import built_once


class _Factory:
    """What built_once reads of pytest's TempPathFactory: the base temp folder (a worker's under xdist)."""

    def __init__(self, base: Path) -> None:
        self.base = base

    def getbasetemp(self) -> Path:
        return self.base


def test_two_workers_share_one_build(tmp_path, monkeypatch) -> None:
    builds = []

    def build(folder: Path) -> None:
        builds.append(folder)
        (folder / "made.txt").write_text("once")

    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    first = built_once(_Factory(tmp_path / "popen-gw0"), "thing", build)
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    second = built_once(_Factory(tmp_path / "popen-gw1"), "thing", build)
    assert first == second == tmp_path / "thing" and builds == [first]
    assert (second / "made.txt").read_text() == "once"


def test_without_xdist_the_folder_is_the_sessions_own_and_a_failed_build_is_redone(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)

    def broken(folder: Path) -> None:
        (folder / "half.txt").write_text("half")
        raise RuntimeError("build failed")

    with pytest.raises(RuntimeError):
        built_once(_Factory(tmp_path), "thing", broken)
    folder = built_once(_Factory(tmp_path), "thing", lambda f: (f / "whole.txt").write_text("whole"))
    assert folder == tmp_path / "thing" and sorted(p.name for p in folder.iterdir()) == [".built", "whole.txt"]
