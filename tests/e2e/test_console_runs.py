"""``-q`` in a run: it silences the warnings of the user's code and libraries (Python warnings, Opacus's logger, a
library logger with no handler), and transformers imported inside its block does not undo it (what the CLI prints
otherwise: tests/cli/test_console_lines.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import ROOT

from audit.cli import main


def _warning_loop() -> dict:
    """The hooked loop of test_plugin_one_run, warning the way Opacus and other libraries do: a Python warning
    at the factory and at every training, a record of Opacus's logger and of a library logger with no
    handler."""
    import logging
    import warnings

    from hooked_softmax import hooked_plugin

    warnings.warn("factory warning from the user's code", UserWarning, stacklevel=1)
    plugin = hooked_plugin("warning_loop")
    inner = plugin["train"]

    def train(X, y, seed):
        warnings.warn("Secure RNG turned off (an Opacus-style warning)", UserWarning, stacklevel=1)
        logging.getLogger("opacus.data_loader").warning("Opacus logger warning")
        logging.getLogger("some_user_library").warning("library logger warning")
        return inner(X, y, seed)

    return plugin | {"train": train}


warning_loop = _warning_loop


def test_quiet_silences_transformers_imported_inside_the_block():
    """transformers sets its logger's level when first imported: a plugin module importing it under -q must not
    undo the quiet level (its config warnings printed under -q before)."""
    import os
    import subprocess
    import sys

    pytest.importorskip("transformers")
    code = ("import os\nfrom audit.quiet import quiet_libraries\nwith quiet_libraries(True):\n"
            "    from transformers import GPT2Config\n    GPT2Config(vocab_size=10)\n"
            "assert 'TRANSFORMERS_VERBOSITY' not in os.environ\n")
    env = {k: v for k, v in os.environ.items() if k != "TRANSFORMERS_VERBOSITY"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
    assert done.returncode == 0 and "bos_token_id" not in done.stderr, done.stderr


def _run(tmp_path, quiet: bool, caplog) -> tuple[int, list[str], list[str]]:
    import logging
    import warnings

    caplog.clear()
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING):
        warnings.simplefilter("always")
        code = main(["run", "dp", "--target", f"{Path(__file__).stem}:warning_loop", "--check-config",
                     "--out", str(tmp_path)] + (["-q"] if quiet else []))
    return code, [str(w.message) for w in caught], [r.getMessage() for r in caplog.records]


def test_quiet_silences_the_user_libraries_warnings(tmp_path, caplog):
    code, warned, logged = _run(tmp_path, True, caplog)
    assert code == 0 and not [w for w in warned if "factory warning" in w or "Secure RNG" in w]
    assert "Opacus logger warning" not in logged and "library logger warning" not in logged
    _, warned, logged = _run(tmp_path, False, caplog)
    assert any("Secure RNG" in w for w in warned)
    assert "Opacus logger warning" in logged and "library logger warning" in logged
