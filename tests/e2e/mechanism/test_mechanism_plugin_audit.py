"""A mechanism plugin (`--target module:factory`, the factories of tests/fixtures/user_dp_code.py) audited by
``run mechanism`` end to end: the correct Laplace mechanism is consistent with its claim, the one with half the
noise scale a violation, exit status 1 with ``--fail-above-claim`` (loading and validation: tests/plugins/)."""

from __future__ import annotations

import json

import pytest

from audit.cli import main


@pytest.mark.parametrize("factory, status, code", [("correct", "consistent", 0), ("half_scale", "violation", 1)])
def test_mechanism_plugin_audit(plugin_module, factory, status, code, tmp_path, capsys):
    out = tmp_path / "runs"
    assert main(["run", "mechanism", "--target", f"{plugin_module}:{factory}", "--quiet", "--fail-above-claim",
                 "--out", str(out)]) == code
    (run,) = [p for p in out.iterdir() if p.is_dir() and p.name != "cache"]
    results = json.loads((run / "results.json").read_text())
    assert results["verdict"]["status"] == status
    assert results["game"]["test_fitted_on"].startswith("20000 separate draws")
    assert (run / "report.html").is_file()
    capsys.readouterr()
