"""The layers of the package, enforced on the import graph (read with ast: every import statement,
also those inside functions):

* ``audit.errors`` imports nothing of the project;
* ``audit.theory`` imports only ``audit.theory`` and ``audit.errors``;
* ``audit.stats`` imports only ``audit.stats``, ``audit.theory`` and ``audit.errors``;
* ``targets`` and ``attacks`` import from ``audit`` only ``audit.theory``, ``audit.stats`` and
  ``audit.errors``; neither imports the other;
* ``reports`` imports nothing from ``targets`` or ``attacks``;
* a name imported from another project module is public (no leading underscore).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("audit", "targets", "attacks", "reports")
#: Each bottom layer and what it may import of the project.
ALLOWED = {
    "audit.errors": (),
    "audit.theory": ("audit.theory", "audit.errors"),
    "audit.stats": ("audit.stats", "audit.theory", "audit.errors"),
}

Import = tuple[str, str, list[str], int]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_imports() -> list[Import]:
    """(importing module, imported module, imported names, line) for every project import."""
    out = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            module = _module_name(path)
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    out += [(module, a.name, [], node.lineno) for a in node.names if a.name.split(".")[0] in PACKAGES]
                elif (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                      and node.module.split(".")[0] in PACKAGES):
                    out.append((module, node.module, [a.name for a in node.names], node.lineno))
    return out


def _in(module: str, *prefixes: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def violations(imports: list[Import]) -> list[str]:
    """Every import that breaks a rule of the module docstring, as a readable line."""
    found = []
    for src, dst, names, line in imports:
        where = f"{src} (line {line}) imports {dst}"
        for layer, allowed in ALLOWED.items():
            if _in(src, layer) and not _in(dst, *allowed):
                found.append(f"{where}: {layer} may import only {allowed or 'nothing of the project'}")
        if _in(src, "targets", "attacks") and _in(dst, "audit") and not _in(dst, *ALLOWED["audit.stats"]):
            found.append(f"{where}: targets/attacks may import from audit only theory, stats and errors")
        if (_in(src, "targets") and _in(dst, "attacks")) or (_in(src, "attacks") and _in(dst, "targets")):
            found.append(f"{where}: targets and attacks do not import each other")
        if _in(src, "reports") and _in(dst, "targets", "attacks"):
            found.append(f"{where}: reports never import targets or attacks")
        private = [n for n in names if n.startswith("_")]
        if private and dst != src:
            found.append(f"{where}: private name(s) {private} used across modules; make them public")
    return found


def test_import_graph_points_down_the_layers() -> None:
    imports = project_imports()
    assert len(imports) > 100  # the walk found the project
    assert violations(imports) == []


def test_each_rule_can_fail() -> None:
    bad = [("audit.stats.rates", "audit.dp.runner", ["play"], 1),
           ("audit.theory.claims", "audit.stats.rates", ["x"], 2),
           ("audit.errors", "audit.io", ["x"], 3), ("targets.training", "audit.cache", ["x"], 4),
           ("attacks.lira", "targets.models", ["x"], 5), ("reports.html", "targets.registry", ["y"], 6),
           ("audit.dp.runner", "targets.training", ["_private"], 7)]
    assert [len(violations([imp])) for imp in bad] == [1] * len(bad)
    assert violations([("audit.dp.runner", "targets.training", ["train_models"], 8)]) == []
