"""Reliability: kill-and-resume, reproducibility, a tampered cache retrained, quiet runs with logs in the run
directory (bad input in one table: tests/cli/test_bad_input.py; safe loading in the code:
tests/project/test_code_safety.py)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from helpers import ROOT, read_results, without_volatile

from audit.cache import cached_models, load_entry, save_entry
from audit.cli import main

#: A small, fast trained-model audit (MLP on digits, --quick preset, loss attack only).
SMALL = ["run", "membership", "--target", "nonprivate_digits", "--quick", "--attack", "loss", "--seed", "3"]


def _cli(args: list[str], **kwargs) -> subprocess.Popen:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, "-m", "audit", *args], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> tuple[Path, str]:
    """SMALL run once to the end in this process (its run directory and what it wrote to stderr): the reference of
    the kill-and-resume test and the first of the two runs of the reproducibility test."""
    out, err = tmp_path_factory.mktemp("uninterrupted"), io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(SMALL + ["--out", str(out), "--quiet"]) == 0
    (run_dir,) = _run_dirs(out)
    return run_dir, err.getvalue()


def _run_dirs(out: Path) -> list[Path]:
    return sorted(p for p in out.iterdir() if p.is_dir() and p.name != "cache") if out.exists() else []


def _wait_for(condition, proc: subprocess.Popen, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, f"finished before the condition held: {proc.communicate()}"
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_kill_and_resume_gives_the_uninterrupted_results(tmp_path, uninterrupted):
    out = tmp_path / "interrupted"
    cache = out / "cache"
    # 1. SIGKILL as soon as the first trained model is in the cache.
    proc = _cli(SMALL + ["--out", str(out), "--quiet"])
    _wait_for(lambda: cache.is_dir() and any(cache.glob("*.safetensors")), proc)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    killed_dir = _run_dirs(out)[0]
    assert not (killed_dir / "results.json").exists()
    cached = sorted(cache.glob("*.safetensors"))
    # 2. The same command again: reuses what finished, is interrupted with SIGINT (Ctrl-C).
    proc = _cli(SMALL + ["--out", str(out)])
    _wait_for(lambda: any("reused cached models" in p.joinpath("log.txt").read_text()
                          for p in _run_dirs(out) if p != killed_dir and p.joinpath("log.txt").exists()), proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    if proc.returncode != 0:  # interrupted before finishing (it may have finished first on a fast machine)
        assert proc.returncode == 130 and "interrupted" in err and "Traceback" not in err
    assert all(p.is_file() for p in cached)
    # 3. Once more to the end; the uninterrupted run (elsewhere, the fixture's) must give the same results.
    done = _cli(SMALL + ["--out", str(out), "--quiet"])
    assert done.wait(timeout=600) == 0, done.communicate()
    resumed = [p for p in _run_dirs(out) if (p / "results.json").exists()][-1]
    assert "reused cached models" in (resumed / "log.txt").read_text()
    fresh, _ = uninterrupted
    a, b = without_volatile(read_results(resumed)), without_volatile(read_results(fresh))
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def test_same_command_and_seed_give_identical_results_apart_from_volatile(tmp_path, capsys, uninterrupted):
    a, a_err = uninterrupted
    assert a_err == ""  # --quiet: no progress bars, no stage messages
    assert main(SMALL + ["--out", str(tmp_path / "b"), "--quiet"]) == 0
    assert capsys.readouterr().err == ""
    (b,) = _run_dirs(tmp_path / "b")
    ra, rb = json.loads((a / "results.json").read_text()), json.loads((b / "results.json").read_text())
    assert set(ra["volatile"]) >= {"created", "host", "timing"}
    volatile = set(ra["volatile"])
    assert {k: v for k, v in ra.items() if k not in volatile} == {k: v for k, v in rb.items() if k not in volatile}
    # The run directory and its log: the log records the stages, --quiet printed no progress.
    assert (a / "log.txt").read_text().strip()
    for name in ("config.json", "results.json", "report.html"):
        assert (a / name).is_file()


class _Bomb:
    """Unpickling this would create a marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_tampered_cache_entry_cannot_run_code_and_is_retrained(tmp_path, capsys):
    params = {"w": torch.arange(6, dtype=torch.float32).reshape(2, 3)}
    trained = []

    def train():
        trained.append(1)
        return params

    payload = {"what": "tiny"}
    cached_models(tmp_path, payload, train)
    (entry,) = tmp_path.glob("*.safetensors")
    marker = tmp_path / "PWNED"
    entry.write_bytes(pickle.dumps(_Bomb(marker)))  # an attacker swaps in a pickle
    loaded, hit = cached_models(tmp_path, payload, train)
    assert not hit and len(trained) == 2 and not marker.exists()
    assert "corrupt" in capsys.readouterr().err
    entry.write_bytes(entry.read_bytes()[:-7])  # truncated
    assert load_entry(entry, "whatever") is None
    save_entry(entry, "k", params)
    assert torch.equal(load_entry(entry, "k")["w"], params["w"])
