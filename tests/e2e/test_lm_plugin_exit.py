"""A malformed language-model trainer plugin through ``python -m audit`` in a process of its own: exit status 2 and
the line naming its bad field (the contract's unit tests: tests/plugins/test_lm_plugin.py)."""

from __future__ import annotations

import subprocess
import sys

from helpers import ROOT


def test_malformed_lm_plugin_exits_2(tmp_path):
    (tmp_path / "bad_lm.py").write_text("def lm():\n    return {'kind': 'lm_trainer', 'texts': ['a'] * 12}\n")
    done = subprocess.run([sys.executable, "-m", "audit", "run", "dp", "--target", "bad_lm:lm", "--one-run",
                           "--out", str(tmp_path / "runs")], capture_output=True, text=True,
                          env={"PYTHONPATH": f"{tmp_path}:{ROOT}", "PATH": "/usr/bin:/bin"}, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "field 'train' must be a function" in done.stderr
