"""Compare two folders written by ``tools/small_runs.sh`` (a baseline and a run of changed code): per run,
``results.json`` less its volatile keys, every PNG byte for byte, and ``report.html`` with its volatile
values masked (the creation time, the timing and host rows, config.json's packages and ``--out``); then
the comparison's HTML, PNG and JSON (its own paths aside).

Usage (from the repository root): ``python tools/compare_small_runs.py BASELINE_DIR NEW_DIR``; exit status
0 when everything matches, 1 otherwise.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

#: Report rows whose values change from run to run (see ``volatile`` in results.json) or with ``--out``.
_VOLATILE_ROWS = re.compile(r"<tr><th>(?:timing\.|host\.|packages\.|options\.out</th>|[\w.-]+_s</th>)[^\n]*</tr>\n?")


def _stable(path: Path) -> dict:
    results = json.loads(path.read_text(encoding="utf-8"))
    return {key: value for key, value in results.items() if key not in results.get("volatile", [])}


def _masked(path: Path) -> str:
    text = re.sub(r"created [0-9T:\-Z]+", "created …", path.read_text(encoding="utf-8"))
    return _VOLATILE_ROWS.sub("", text)


def compare_run(old: Path, new: Path) -> list[str]:
    """What differs between two runs of the same small run (empty: nothing)."""
    problems = [] if _stable(old / "results.json") == _stable(new / "results.json") else ["results.json"]
    for png in sorted({p.name for p in old.glob("*.png")} | {p.name for p in new.glob("*.png")}):
        if not (old / png).is_file() or not (new / png).is_file() or \
                (old / png).read_bytes() != (new / png).read_bytes():
            problems.append(png)
    if _masked(old / "report.html") != _masked(new / "report.html"):
        problems.append("report.html")
    return problems


def compare_comparisons(old: Path, new: Path) -> list[str]:
    """What differs between the two comparisons under ``compare/`` (one each)."""
    (old_dir,), (new_dir,) = ([d for d in (root / "compare").iterdir() if d.is_dir()] for root in (old, new))

    def text(run_dir: Path, root: Path, name: str) -> str:  # the runs compared lie under each root
        return (run_dir / name).read_text(encoding="utf-8").replace(str(root), "ROOT")

    problems = [] if text(old_dir, old, "compare.html") == text(new_dir, new, "compare.html") else ["compare.html"]
    if (old_dir / "compare_roc.png").read_bytes() != (new_dir / "compare_roc.png").read_bytes():
        problems.append("compare_roc.png")
    first, second = (json.loads(text(d, root, "compare.json")) for d, root in ((old_dir, old), (new_dir, new)))
    if {k: v for k, v in first.items() if k not in ("figure", "html")} != \
            {k: v for k, v in second.items() if k not in ("figure", "html")}:
        problems.append("compare.json")
    return problems


def main(old: Path, new: Path) -> int:
    """Print one line per run; returns the exit status."""
    failed = False
    for run in sorted(p for p in old.iterdir() if p.is_dir() and p.name != "compare" and not p.name.startswith(".")):
        problems = compare_run(run, new / run.name)
        failed |= bool(problems)
        print(f"{run.name:28} {'DIFFERS: ' + ', '.join(problems) if problems else 'same'}")
    problems = compare_comparisons(old, new)
    failed |= bool(problems)
    print(f"{'compare':28} {'DIFFERS: ' + ', '.join(problems) if problems else 'same'}")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
