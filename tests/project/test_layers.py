"""The layers of the package, enforced on the import graph (read with ast: every import statement,
also those inside functions):

* ``audit.errors`` and ``audit.kind_table`` (the table of kinds, read on demand) import nothing of the
  project;
* ``audit.theory`` imports only ``audit.theory`` and ``audit.errors``;
* ``audit.stats`` imports only ``audit.stats``, ``audit.theory`` and ``audit.errors``;
* ``targets`` and ``attacks`` import from ``audit`` only ``audit.theory``, ``audit.stats`` and
  ``audit.errors``; neither imports the other;
* ``reports`` imports nothing from ``targets`` or ``attacks``, and from ``audit`` only ``audit.errors``,
  ``audit.io``, ``audit.theory``, ``audit.stats``, ``audit.results_file`` (the one loader of the typed
  outcome) and ``audit.kind_table`` (where a kind's look is read on demand, :mod:`reports.presentation`;
  never the kinds themselves);
* only the command line (``audit.cli``, ``audit.commands``) imports ``audit.commands``: a kind's package
  never imports the command that loads it;
* a name imported from another project module is public (no leading underscore);
* no import circle among the modules (function-level imports counted: a circle is a design knot even
  where Python's lazy import would tolerate it);
* no function longer than :data:`MAX_FUNCTION_LINES` lines (a nested function counts inside its parent).
"""

from __future__ import annotations

import ast
from pathlib import Path

from helpers import ROOT

PACKAGES = ("audit", "targets", "attacks", "reports")
#: Each bottom layer and what it may import of the project.
ALLOWED = {
    "audit.errors": (),
    "audit.kind_table": (),
    "audit.theory": ("audit.theory", "audit.errors"),
    "audit.stats": ("audit.stats", "audit.theory", "audit.errors"),
}

#: The longest a function may be, in lines from its ``def`` to its last line.
MAX_FUNCTION_LINES = 80
#: What ``reports`` may import of ``audit``.
REPORTS_FROM_AUDIT = ("audit.errors", "audit.io", "audit.theory", "audit.stats", "audit.results_file",
                      "audit.kind_table")

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
        if _in(src, "reports") and _in(dst, "audit") and not _in(dst, *REPORTS_FROM_AUDIT):
            found.append(f"{where}: reports import from audit only {', '.join(REPORTS_FROM_AUDIT)}")
        if _in(dst, "audit.commands") and not _in(src, "audit.commands", "audit.cli"):
            found.append(f"{where}: only the command line imports audit.commands")
        private = [n for n in names if n.startswith("_")]
        if private and dst != src:
            found.append(f"{where}: private name(s) {private} used across modules; make them public")
    return found


def _module_of(name: str, modules: set[str]) -> str | None:
    """The project module that an import of ``name`` loads (``a.b.c`` may name ``c`` in module ``a.b``)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def circles(imports: list[Import]) -> list[list[str]]:
    """The import circles: strongly connected components of more than one module (Tarjan's algorithm,
    iterative). A package's ``__init__`` imported by its own submodules is not an edge."""
    modules = {src for src, *_ in imports} | {dst for _, dst, *_ in imports}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for src, dst, names, _ in imports:
        for target in [dst] + [f"{dst}.{n}" for n in names]:
            module = _module_of(target, modules)
            if module and module != src and not src.startswith(module + "."):
                graph[src].add(module)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_circle() -> None:
    assert circles(project_imports()) == []


def test_a_circle_is_found() -> None:
    made = [("audit.a", "audit.b", [], 1), ("audit.b", "audit.c", ["x"], 2), ("audit.c", "audit", ["a"], 3),
            ("audit.d", "audit.a", [], 4), ("audit.a.e", "audit.a", [], 5)]
    assert circles(made) == [["audit.a", "audit.b", "audit.c"]]
    assert circles(made[:2] + made[3:]) == []


def test_import_graph_points_down_the_layers() -> None:
    imports = project_imports()
    assert len(imports) > 100  # the walk found the project
    assert violations(imports) == []


def test_each_rule_can_fail() -> None:
    bad = [("audit.stats.rates", "audit.dp.runner", ["play"], 1),
           ("audit.theory.claims", "audit.stats.rates", ["x"], 2),
           ("audit.errors", "audit.io", ["x"], 3), ("targets.training", "audit.cache", ["x"], 4),
           ("attacks.lira", "targets.models", ["x"], 5), ("reports.html", "targets.registry", ["y"], 6),
           ("audit.dp.runner", "targets.training", ["_private"], 7), ("reports.html", "audit.kinds", ["k"], 8),
           ("audit.dp.command", "audit.commands.run", ["add_kind"], 9)]
    assert [len(violations([imp])) for imp in bad] == [1] * len(bad)
    assert violations([("audit.dp.runner", "targets.training", ["train_models"], 8)]) == []


def long_functions(limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """``path:function (lines)`` of every function of the packages longer than ``limit`` lines."""
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = node.end_lineno - node.lineno + 1
                    if lines > limit:
                        found.append(f"{path.relative_to(ROOT)}:{node.name} ({lines} lines)")
    return found


def test_no_function_over_the_limit() -> None:
    assert long_functions() == []
    assert long_functions(limit=40)  # the walk finds functions (some are longer than 40 lines)
