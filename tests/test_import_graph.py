"""The project's import graph: every module imports, no module takes part in an import cycle, and the
layering holds (telemetry imports neither backends nor tui; backends never imports tui).

The graph is read from the sources with ``ast``, imports inside functions included (a late import is
still a dependency, and a cycle through one only waits for the first call to bite); imports under
``if TYPE_CHECKING:`` are left out, since they never run.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from tests.support.paths import ROOT

PACKAGES = ("telemetry", "backends", "tui")
# A package may import only these of the three (besides itself).
ALLOWED = {"telemetry": set(), "backends": {"telemetry"}, "tui": {"telemetry", "backends"}}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    found = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if path.name != "__main__.py":  # importing one would run it
                found[module_name(path)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[tuple[str, list[str], int]]:
    """(module, names, level) of every import that can run: functions included, TYPE_CHECKING blocks not."""
    out: list[tuple[str, list[str], int]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            out.extend((a.name, [], 0) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            out.append((node.module or "", [a.name for a in node.names], node.level))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return out


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the project modules it imports (``from pkg import mod`` counts as importing ``pkg.mod``)."""
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        is_pkg = path.name == "__init__.py"
        here = name if is_pkg else name.rpartition(".")[0]
        edges = set()
        for target, names, level in _imports(ast.parse(path.read_text(), str(path))):
            if level:  # relative: from the module's own package, up level - 1
                base = here.split(".")
                base = base[: len(base) - (level - 1)]
                target = ".".join([*base, target] if target else base)
            for dep in [f"{target}.{n}" for n in names if f"{target}.{n}" in modules] or [target]:
                while dep and dep not in modules:  # `import a.b.c` of a non-module attribute: its module
                    dep = dep.rpartition(".")[0]
                if dep and dep != name:
                    edges.add(dep)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


MODULES = project_modules()
GRAPH = import_graph(MODULES)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_module_imports(name: str) -> None:
    importlib.import_module(name)


def test_no_import_cycle() -> None:
    assert cycles(GRAPH) == []


def test_layering() -> None:
    wrong = sorted(
        (name, dep)
        for name, deps in GRAPH.items()
        for dep in deps
        if (a := name.split(".")[0]) != (b := dep.split(".")[0]) and b not in ALLOWED[a]
    )
    assert wrong == []


def test_the_checks_see_what_they_look_for() -> None:
    """The graph finds a late import inside a function, and the cycle finder finds a cycle."""
    assert "tui.compare.app" in GRAPH["tui.chat.app"]  # imported inside ChatApp's methods only
    assert "backends.local.llama_adapter" in GRAPH["backends.local.template"]  # from backends.local import ...
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


LLAMA_PRIVATE = {"_ctx", "_batch", "_model", "_init_sampler", "_seed"}


def test_only_the_adapter_touches_llama_cpp_python() -> None:
    """An upgrade of llama-cpp-python breaks one file: only the adapter imports it or reads its internals."""
    adapter = "backends.local.llama_adapter"
    importers = sorted(
        name
        for name, path in MODULES.items()
        for target, _, level in _imports(ast.parse(path.read_text()))
        if not level and (target == "llama_cpp" or target.startswith("llama_cpp."))
    )
    assert set(importers) == {adapter}
    private = sorted(
        (name, node.attr)
        for name, path in MODULES.items()
        if name.startswith("backends.local") and name != adapter
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute) and node.attr in LLAMA_PRIVATE
    )
    assert private == []
