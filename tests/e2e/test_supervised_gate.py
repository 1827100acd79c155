"""The supervised gate (docs/reliability.md): a plugin whose code ends the process — ``os._exit(0)``, a SIGKILL sent
to itself, ``sys.exit(0)`` — ends ``run dp --check-config``, ``run dp --one-run`` and ``run mechanism`` with exit
status 3 and one line, never 0, with no results.json; ``assert_private`` raises. The hard exits are run through the
real command line (a process of its own, supervised); ``sys.exit`` is caught inside the process, so those cases run
in this one."""

from __future__ import annotations

import subprocess
import sys

import pytest

from audit.cli import main
from audit.errors import AuditIncomplete
from audit.testing import assert_private

#: Each mode of the gate with its hostile plugins (tests/fixtures/hostile_plugins.py).
MODES = {"check-config": ["run", "dp", "--check-config", "--fail-above-claim"],
         "one-run": ["run", "dp", "--one-run", "--fail-above-claim"],
         "mechanism": ["run", "mechanism", "--fail-above-claim"]}


def _target(module: str, mode: str, ending: str) -> str:
    return f"{module}:{'mechanism' if mode == 'mechanism' else 'trainer'}_{ending}"


@pytest.mark.parametrize(("mode", "ending", "said"), [("check-config", "hard_exit", "exit status 0"),
                                                      ("one-run", "sigkill", "killed by SIGKILL"),
                                                      ("mechanism", "hard_exit", "exit status 0")])
def test_a_hard_ending_of_the_code_is_exit_3_from_the_command_line(hostile_module, mode, ending, said, tmp_path):
    out = tmp_path / "runs"
    target = _target(hostile_module, mode, ending)
    done = subprocess.run([sys.executable, "-m", "audit", *MODES[mode], "--target", target, "--quick", "--quiet",
                           "--out", str(out)], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 3, done.stderr
    assert done.stderr.count("\n") == 1 and "could not complete" in done.stderr and said in done.stderr
    assert not list(out.glob("*/results.json")) and {p.name for p in tmp_path.iterdir()} <= {"runs"}


@pytest.mark.parametrize("mode", list(MODES))
def test_sys_exit_in_the_code_is_exit_3(hostile_module, mode, tmp_path, capsys):
    out = tmp_path / "runs"
    code = main([*MODES[mode], "--target", _target(hostile_module, mode, "sys_exit"), "--quick", "--quiet",
                 "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 3 and err.count("\n") == 1 and "raised SystemExit: 0" in err
    assert not list(out.glob("*/results.json"))


@pytest.mark.parametrize("ending", ["hard_exit", "sigkill", "sys_exit"])
def test_assert_private_raises_when_the_code_ends_its_process(hostile_module, ending, tmp_path):
    with pytest.raises(AuditIncomplete, match="before reaching a verdict|raised SystemExit"):
        assert_private(f"{hostile_module}:trainer_{ending}", one_run=True, out=tmp_path)
    assert not list(tmp_path.glob("*/results.json"))
