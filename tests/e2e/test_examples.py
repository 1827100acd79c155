"""The worked examples in examples/ audited through ``assert_private``: an OpenDP measurement and a
diffprivlib model. They run where those libraries install and import, and are skipped with the
reason otherwise (diffprivlib 0.6.6 does not import with scikit-learn >= 1.8)."""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
from helpers import ROOT

from audit.testing import assert_private

EXAMPLES = ROOT / "examples"


@pytest.fixture()
def load_example(monkeypatch) -> Callable[[str], ModuleType]:
    """Import ``examples/<name>.py`` by its name, as a user's module (examples/ is not a package): the audit's
    child process imports it by that name (audit.supervisor.call_in_child)."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    return importlib.import_module


def _config(out: Path) -> dict:
    (path,) = out.glob("*/config.json")
    return json.loads(path.read_text())


def test_opendp_laplace_example(tmp_path, load_example):
    pytest.importorskip("opendp", reason="OpenDP is not installed: pip install -e '.[opendp]'")
    example = load_example("opendp_laplace")
    results = assert_private(example.mechanism, runs=1000, out=tmp_path / "ok")
    assert results.target == "opendp_laplace_sum" and results.delta == 0.0
    assert results.epsilon_theory == pytest.approx(1.0, abs=1e-6)  # OpenDP's own map, float-rounding included
    assert results.audited.reproducible is False  # OpenDP's secure sampler takes no seed
    assert "opendp" in _config(tmp_path / "ok")["plugin"]["packages"]
    with pytest.raises(AssertionError, match="exceeds the claimed epsilon 0.100"):
        assert_private(lambda: example.mechanism(claimed_epsilon=0.1), runs=1000, out=tmp_path / "wrong")


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # diffprivlib's own scipy calls
def test_diffprivlib_model_example(tmp_path, load_example):
    pytest.importorskip("diffprivlib", exc_type=ImportError,
                        reason="diffprivlib is not installed or does not import with this scikit-learn "
                               "(diffprivlib 0.6.6 needs scikit-learn < 1.8): pip install -e '.[diffprivlib]' "
                               "'scikit-learn<1.8'")
    example = load_example("diffprivlib_model")
    results = assert_private(example.trainer, attack="black-box/crafted", runs=40, out=tmp_path)
    assert results.target == "diffprivlib_logreg" and results.delta == 0.0
    assert results.audited.reproducible is True and results.audited.params["rng"] == "random_state"
    assert "diffprivlib" in _config(tmp_path)["plugin"]["packages"]
