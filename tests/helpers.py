"""Helpers shared by the test files (the folders' ``conftest.py`` files hold the fixtures): the
repository's paths, which do not depend on how deep a test file lies under ``tests/``."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np
from scipy import stats

#: The repository root (``tests/`` is directly below it).
ROOT = Path(__file__).resolve().parents[1]
#: Finished runs checked in for the tests that read a run without training one.
FIXTURES = ROOT / "tests" / "fixtures"
#: One cheap run of every kind (argv after ``python -m audit``, without --out): the session fixture
#: ``kind_runs`` (tests/conftest.py) runs each once for every test that needs a finished run of a kind.
KIND_RUNS = {
    "membership": ["run", "membership", "--target", "nonprivate_digits", "--quick", "--canaries", "120"],
    "dp": ["run", "dp", "--target", "dpgd_logreg_digits", "--runs", "60", "--device", "cpu"],
    "mechanism": ["run", "mechanism", "--target", "laplace_count", "--draws", "3000"],
    "inversion": ["run", "inversion", "--target", "nonprivate_logreg_digits", "--quick", "--steps", "30",
                  "--black-box-steps", "2"],
    "extraction": ["run", "extraction", "--target", "dperm_digits", "--quick"],
    "reconstruction": ["run", "reconstruction", "--target", "dperm_breast_cancer", "--candidates", "10", "--runs",
                       "60"],
    "sweep": ["sweep", "dp", "--target", "dpgd_logreg_digits", "--epsilons", "1,2", "--runs", "40", "--quick",
              "--device", "cpu"],
}

#: The quick run of the built-in tiny GPT (argv after ``python -m audit``, without --out), made once per session by
#: the fixture ``tinygpt_quick_run`` (tests/conftest.py); the LM membership tutorial runs the same command.
TINYGPT_QUICK = ["run", "membership", "--target", "nonprivate_tinygpt", "--quick", "--references", "1"]


def built_once(tmp_path_factory, name: str, build: Callable[[Path], None]) -> Path:
    """The folder ``name`` that ``build(folder)`` fills, made once per test session and shared by the pytest-xdist
    workers: the first worker to ask builds it under a file lock, the others wait for it and read it (the pattern
    of pytest-xdist's documentation, "Making session-scoped fixtures execute only once"). Without xdist it is a
    folder of the session's own base temp."""
    from filelock import FileLock

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the workers' base temps are folders of one session folder
    folder = root / name
    with FileLock(f"{folder}.lock"):
        if not (folder / ".built").exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            (folder / ".built").touch()
    return folder


def copy_quick_base(run_dir: Path, cache: Path) -> None:
    """Copy the quick base (``lm-base-*.safetensors``) from the cache of the quick tiny GPT's run ``run_dir`` into
    the language-model cache folder ``cache`` (made if missing; a base already there is kept)."""
    cache.mkdir(parents=True, exist_ok=True)
    for base in (run_dir.parent / "cache").glob("lm-base-*.safetensors"):
        if not (cache / base.name).exists():
            shutil.copy2(base, cache / base.name)


def docs_hooks() -> ModuleType:
    """The documentation site's build hooks (``docs/hooks.py``: the generated CLI reference, schema page and
    the rest), loaded as a module: the tests check the site against what the hooks generate."""
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def python_in(root: Path, *argv: str) -> subprocess.CompletedProcess:
    """``python ARGV`` in a fresh interpreter whose working folder and ``PYTHONPATH`` are ``root`` (the repository
    or a copy of it): its exit status and captured text output (at most 300 s)."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([sys.executable, *argv], cwd=root, env=env, capture_output=True, text=True, timeout=300)


def read_results(run_dir: Path) -> dict:
    """The ``results.json`` of a finished run."""
    return json.loads((run_dir / "results.json").read_text())


def results_in(out: Path) -> dict:
    """The ``results.json`` of the one run written under ``out`` (an audit's ``--out`` folder)."""
    (run_dir,) = (path.parent for path in out.glob("*/results.json"))
    return read_results(run_dir)


def without_volatile(results: dict) -> dict:
    """``results`` less the keys it lists as volatile (timings, paths, versions): what the same command
    and seed must reproduce exactly."""
    return {key: value for key, value in results.items() if key not in results["volatile"]}


def max_exceedances(reps: int, p: float, tail: float = 1e-3) -> int:
    """Smallest c with P[Bin(reps, p) > c] < tail: how many of ``reps`` independent checks, each failing
    with probability at most ``p``, may fail before a correct implementation is rejected (at level ``tail``)."""
    c = 0
    while stats.binom.sf(c, reps, p) >= tail:
        c += 1
    return c


def halves(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A seeded random split of ``range(n)`` into two halves (members, non-members)."""
    perm = np.random.default_rng(seed).permutation(n)
    return perm[: n // 2], perm[n // 2:]


#: The envelope a hand-built results dict of a unit test lacks (:func:`typed_outcome` fills it in).
ENVELOPE = {"schema_version": 4, "kind": "dp", "target": "t", "seed": 0, "created": "2026-01-01T00:00:00Z",
            "host": {"python": "3.11", "platform": "test"}, "timing": {"total_s": 1.0}, "volatile": [],
            "verdict": {"status": "no-claim", "text": ""}, "lower_bounds": [], "best_lower_bound": None,
            "epsilon_theory": None, "delta": None, "confidence": 0.95}


def typed_outcome(results: dict):
    """The typed outcome (:class:`audit.stats.outcome.Outcome`) of a hand-built results dict, its envelope
    completed from :data:`ENVELOPE` (not validated: unit tests build only the blocks they test)."""
    from audit.results_file import detail_block
    from audit.stats.outcome import Outcome

    data = ENVELOPE | results
    detail = detail_block(data["kind"])  # the kind's block, as the loader reads it, unless its required keys lack
    typed = detail is not None and (not detail.required_keys() or set(detail.keys()) & set(data))
    return Outcome.from_dict(data, detail=detail if typed else None)
