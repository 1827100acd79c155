"""The documentation site is tested like code: its pages run (the other checks of the site are in
tests/project/test_docs.py).

* Every code block of ``docs/tutorials/*.md`` runs, in order, in a fresh folder per page: a
  ``python`` block with ``title="NAME"`` is written to that file, any other ``python`` block is run
  with this interpreter, a ``bash`` block runs under ``bash -e -o pipefail`` (``python`` there is this
  interpreter, with the repository on its path after the block's own ``PYTHONPATH``; ``examples/`` is
  linked into the folder). ``text`` blocks are output and ``yaml`` blocks CI configuration; no other
  language may appear. A block preceded by ``<!-- docs-test: requires MODULE -->`` runs only where
  MODULE imports. The tutorials use small options, so the pages together take well under a minute. A block
  that runs the quick tiny GPT (``helpers.TINYGPT_QUICK``, pretraining its base first) finds that base in its
  ``runs/cache``, copied from the session's own run of that command (the fixture ``tinygpt_quick_run``), as a
  reader who ran it before would; the pages' language-model cache (``PRIVACY_AUDIT_CACHE``) is a folder of the page,
  holding that quick base when a block reads the cache (``lm_cache_dir()``: the Trainer tutorial's plugin).
* The CLI reference is generated from the parser (``docs/hooks.py``): it covers every command and run
  kind, and its text is what ``python -m audit ... --help`` prints.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, TINYGPT_QUICK, copy_quick_base, docs_hooks

DOCS = ROOT / "docs"
TUTORIALS = sorted((DOCS / "tutorials").glob("*.md"))
FENCE = re.compile(r"^(?:<!-- docs-test: (?P<marker>[^>]*?) -->\n)?"
                   r"```(?P<lang>\w+)(?P<info>[^\n]*)\n(?P<body>.*?)^```$", re.M | re.S)
EXECUTED, NOT_EXECUTED = {"python", "bash"}, {"text", "yaml"}
#: The pages' language-model cache (``PRIVACY_AUDIT_CACHE``), a folder of the page's own: never the user's.
LM_CACHE = "lm-cache"


def code_blocks(page: Path) -> list[dict]:
    """The fenced blocks of ``page``: language, title (or None), body, requirement (or None)."""
    blocks = []
    for match in FENCE.finditer(page.read_text(encoding="utf-8")):
        title = re.search(r'title="([^"]+)"', match["info"])
        marker = (match["marker"] or "").strip()
        blocks.append({"lang": match["lang"], "title": title and title[1], "body": match["body"],
                       "requires": marker.removeprefix("requires ").strip() if marker.startswith("requires")
                       else None})
    return blocks


def _importable(module: str) -> bool:
    try:
        __import__(module)
    except Exception:  # noqa: BLE001 - e.g. diffprivlib raising on import with a newer scikit-learn
        return False
    return True


def _shim(folder: Path) -> dict:
    """An environment whose ``python`` is this interpreter, with the repository importable."""
    bin_dir = folder / ".bin"
    bin_dir.mkdir()
    shim = bin_dir / "python"
    shim.write_text(f'#!/bin/sh\nPYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{ROOT}" exec "{sys.executable}" "$@"\n')
    shim.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", MPLBACKEND="Agg",
               PRIVACY_AUDIT_CACHE=str(folder / LM_CACHE))
    env.pop("PYTHONPATH", None)
    return env


def _seed_lm_cache(body: str, folder: Path, request: pytest.FixtureRequest) -> None:
    """Copy the quick tiny GPT's cached base into ``folder/runs/cache`` when ``body`` runs that command, and into the
    page's language-model cache (``PRIVACY_AUDIT_CACHE``, :data:`LM_CACHE`) when ``body`` reads that cache."""
    if " ".join(TINYGPT_QUICK[2:5]) in body and not (folder / "runs" / "cache").exists():
        run_dir, _ = request.getfixturevalue("tinygpt_quick_run")
        shutil.copytree(run_dir.parent / "cache", folder / "runs" / "cache")
    if "lm_cache_dir()" in body:
        copy_quick_base(request.getfixturevalue("tinygpt_quick_run")[0], folder / LM_CACHE)


@pytest.mark.parametrize("page", TUTORIALS, ids=[p.stem for p in TUTORIALS])
def test_tutorial_code_blocks_run(page: Path, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    blocks = code_blocks(page)
    assert any(b["lang"] in EXECUTED for b in blocks), f"{page.name} has no executed code block"
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    env = _shim(tmp_path)
    for block in blocks:
        lang = block["lang"]
        assert lang in EXECUTED | NOT_EXECUTED, f"{page.name}: a ```{lang} block would not be executed"
        if lang in NOT_EXECUTED or (block["requires"] and not _importable(block["requires"])):
            continue
        _seed_lm_cache(block["body"], tmp_path, request)
        if lang == "python" and block["title"]:
            (tmp_path / block["title"]).write_text(block["body"], encoding="utf-8")
            continue
        command = ["python", "-c", block["body"]] if lang == "python" else \
            ["bash", "-e", "-o", "pipefail", "-c", block["body"]]
        done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, (f"{page.name}: block failed (exit {done.returncode}):\n{block['body']}\n"
                                      f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}")


def test_cli_reference_is_the_parser_help() -> None:
    hooks = docs_hooks()
    texts = dict(hooks.help_texts())
    from audit.kinds import run_kinds

    for kind in run_kinds():
        assert f"python -m audit {kind.command}" in texts
    for command in ("list", "report", "rerun", "compare", "bound"):
        assert f"python -m audit {command}" in texts
    env = dict(os.environ, COLUMNS=str(hooks.HELP_WIDTH), PYTHONPATH=str(ROOT))
    for words in ([], ["run", "membership"]):
        printed = subprocess.run([sys.executable, "-m", "audit", *words, "--help"], cwd=ROOT, env=env,
                                 capture_output=True, text=True, check=True).stdout
        assert printed == texts[" ".join(["python -m audit", *words])]
    assert "python -m audit run membership" in hooks.cli_reference()
