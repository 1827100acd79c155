"""Settings and fixtures shared by the whole suite (layout and lanes: tests/README.md).

Property-based tests draw their examples deterministically (a fixed seed derived from each test), so
every run of the suite checks the same cases."""

import contextlib
import io
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import running_notice
from helpers import FIXTURES, KIND_RUNS, TINYGPT_QUICK, built_once, copy_quick_base
from hypothesis import settings

settings.register_profile("deterministic", derandomize=True)
settings.load_profile("deterministic")


@pytest.hookimpl(trylast=True)  # after the terminal reporter is registered
def pytest_configure(config: pytest.Config) -> None:
    """Name a long test on the terminal while it runs (tests/running_notice.py)."""
    running_notice.register(config)


#: Files whose tests pytest-xdist hands out one test at a time (``--dist loadfile`` otherwise keeps a file on one
#: worker): long tests that share no module-scoped fixture, so that both workers share them (tests/README.md, "Time").
PER_TEST_FILES = frozenset({"tests/e2e/test_docs_runs.py"})
#: The longest units of work, started first (longest-processing-time order: the last unit a worker starts is then
#: short and the two workers finish together); measured with ``--durations`` (tests/README.md, "The slowest tests").
#: A test id names one test of a :data:`PER_TEST_FILES` file, a path a whole file.
LONGEST_FIRST = (
    "tests/e2e/test_docs_runs.py::test_tutorial_code_blocks_run[opacus]",
    "tests/e2e/montecarlo/test_soundness.py",
    "tests/e2e/test_docs_runs.py::test_tutorial_code_blocks_run[hf-trainer]",
    "tests/e2e/test_bench_gpu.py",
    "tests/e2e/test_bench_gate_cost.py",
    "tests/e2e/test_docs_runs.py::test_tutorial_code_blocks_run[lm-membership]",
    "tests/e2e/test_docs_runs.py::test_tutorial_code_blocks_run[trained-model]",
    "tests/e2e/test_docs_runs.py::test_tutorial_code_blocks_run[lm-dp-finetuning]",
    "tests/e2e/test_docs_runs.py::test_tutorial_code_blocks_run[mechanisms]",
    "tests/e2e/test_bench_training.py",
    "tests/e2e/dp/test_opacus_controls.py",
    "tests/e2e/test_docs_runs.py::test_tutorial_code_blocks_run[jax]",
    "tests/e2e/dp/test_shuffle_control.py",
    "tests/e2e/test_toy_kind.py",
)


def _unit_of_work(nodeid: str) -> str:
    """The unit pytest-xdist schedules ``nodeid`` in: its file, or itself in a :data:`PER_TEST_FILES` file."""
    path = nodeid.split("::", 1)[0]
    return nodeid if path in PER_TEST_FILES else path


def _order(item: pytest.Item) -> tuple[bool, int]:
    """Slow tests first; among them the :data:`LONGEST_FIRST` units in that order, then the others."""
    unit = _unit_of_work(item.nodeid)
    rank = LONGEST_FIRST.index(unit) if unit in LONGEST_FIRST else len(LONGEST_FIRST)
    return item.get_closest_marker("slow") is None, rank


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slow tests first, the longest of them (:data:`LONGEST_FIRST`) at their head, each lane otherwise in file
    order (a stable sort): with ``-n 2`` (pytest-xdist, ``--dist loadfile``) the workers start on the long
    end-to-end files and the many short unit files fill the gaps at the end, instead of one worker finishing a long
    file alone. No test depends on the order (tests/README.md)."""
    items.sort(key=_order)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """``--dist loadfile`` with the tests of :data:`PER_TEST_FILES` handed out one by one (pytest-xdist's own
    file scheduler otherwise); any other ``--dist`` mode is xdist's."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class Scheduler(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _unit_of_work(nodeid)

    return Scheduler(config, log)


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


@pytest.fixture(scope="session")
def kind_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One quick run of every kind (:data:`helpers.KIND_RUNS`) plus a comparison of the membership run,
    all in one folder of runs, made once per session: the run directory of each, by kind."""
    from audit.cli import main

    out = tmp_path_factory.mktemp("runs")
    dirs = {}
    for kind, argv in KIND_RUNS.items():
        before = set(out.iterdir())
        assert main([*argv, "--quiet", "--out", str(out)]) == 0, kind
        (dirs[kind],) = [p for p in set(out.iterdir()) - before if p.is_dir() and p.name != "cache"]
    before = set(out.iterdir())
    assert main(["compare", str(dirs["membership"]), "--out", str(out)]) == 0
    (dirs["compare"],) = [p for p in set(out.iterdir()) - before if p.is_dir()]
    return dirs


@pytest.fixture()
def lm_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The language-model cache (``PRIVACY_AUDIT_CACHE``, targets.lm.plugins.lm_cache_dir) set, for one test, to a
    folder of the session (one per pytest-xdist worker), never the user's ``~/.cache``: a base that one test
    pretrains (targets.lm.base.pretrained_base) the next test of the session loads. A module asks for it with
    ``pytestmark = pytest.mark.usefixtures("lm_cache")``."""
    from targets.lm.plugins import CACHE_ENV

    folder = tmp_path_factory.getbasetemp() / "lm-cache"
    monkeypatch.setenv(CACHE_ENV, str(folder))
    return folder


@pytest.fixture(scope="session")
def tinygpt_quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """``run membership --target nonprivate_tinygpt --quick --references 1`` (helpers.TINYGPT_QUICK), run once per
    session for every pytest-xdist worker: (its run directory, what it printed). Its ``--out`` folder holds the
    cache of the quick base (``cache/lm-base-*.safetensors``): an LM test or tutorial that runs the quick tiny GPT
    copies that ``cache`` folder into its own ``--out`` instead of pretraining the same base again."""
    from audit.cli import main

    def build(out: Path) -> None:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            assert main([*TINYGPT_QUICK, "--quiet", "--out", str(out)]) == 0
        (out / "stdout.txt").write_text(printed.getvalue())

    out = built_once(tmp_path_factory, "tinygpt-quick", build)
    (run_dir,) = (path.parent for path in out.glob("*/results.json"))
    return run_dir, (out / "stdout.txt").read_text()


@pytest.fixture()
def quick_base_cache(lm_cache: Path, tinygpt_quick_run: tuple[Path, str]) -> Path:
    """``lm_cache`` holding the quick base of the language-model targets (200 speeches, one epoch: the base of
    ``helpers.TINYGPT_QUICK``), copied from the session's ``tinygpt_quick_run``: code that fine-tunes the quick base
    from ``targets.lm.plugins.lm_cache_dir()`` (examples/zoo/hf_trainer_loops.py) loads it instead of pretraining
    it again, and never from or into the user's ``~/.cache``. A module asks for it with
    ``pytestmark = pytest.mark.usefixtures("quick_base_cache")``."""
    copy_quick_base(tinygpt_quick_run[0], lm_cache)
    return lm_cache


@pytest.fixture(scope="session")
def mnist():
    """The MNIST sample of targets.datasets (loaded once per session)."""
    from targets.datasets import load_mnist

    return load_mnist()


@pytest.fixture()
def plugin_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A user's plugin module (``tests/fixtures/user_dp_code.py``) copied into ``tmp_path``, on ``sys.path`` for one
    test: its name, for ``--target user_dp_code:FACTORY``."""
    shutil.copy(FIXTURES / "user_dp_code.py", tmp_path / "user_dp_code.py")
    monkeypatch.syspath_prepend(str(tmp_path))
    return "user_dp_code"


@pytest.fixture()
def hostile_module(monkeypatch: pytest.MonkeyPatch) -> str:
    """The plugins that end their process (``tests/fixtures/hostile_plugins.py``), importable for one test and by the
    processes it starts (``PYTHONPATH``): the module's name, for ``--target hostile_plugins:FACTORY``."""
    monkeypatch.syspath_prepend(str(FIXTURES))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(FIXTURES), os.environ.get("PYTHONPATH", "")]))
    return "hostile_plugins"


@pytest.fixture()
def membership_run(tmp_path: Path) -> Path:
    """A copy of the finished membership run in ``tests/fixtures`` (results.json + config.json), to render
    and change without training."""
    target = tmp_path / "run"
    shutil.copytree(FIXTURES / "run_membership", target)
    return target
