"""The project's import graph: every module imports, no module takes part in an import cycle, and the
layering holds, between the three packages and inside each.

Between packages: telemetry imports neither backends nor tui; backends never imports tui. Inside one:
its root modules (the package's core) import none of its sub-packages, a sub-package imports only the
siblings :data:`SUB_ALLOWED` names, and no ``__init__.py`` imports anything (no faces: a name has one
home). The graph is read from the sources with ``ast``, imports inside functions included (a late
import is still a dependency, and a cycle through one only waits for the first call to bite). Imports
under ``if TYPE_CHECKING:`` never run, so the layering leaves them out; the cycle check counts them
too, since a loop at type-checking time is still two modules that cannot be read apart.
"""

from __future__ import annotations

import ast
import importlib
import re
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


def _imports(tree: ast.AST, type_checking: bool = False) -> list[tuple[str, list[str], int]]:
    """(module, names, level) of every import that can run: functions included, TYPE_CHECKING blocks only
    with ``type_checking``."""
    out: list[tuple[str, list[str], int]] = []

    def visit(node: ast.AST) -> None:
        if not type_checking and isinstance(node, ast.If) and _is_type_checking(node.test):
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


def import_graph(modules: dict[str, Path], type_checking: bool = False) -> dict[str, set[str]]:
    """Module -> the project modules it imports (``from pkg import mod`` counts as importing ``pkg.mod``)."""
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        is_pkg = path.name == "__init__.py"
        here = name if is_pkg else name.rpartition(".")[0]
        edges = set()
        for target, names, level in _imports(ast.parse(path.read_text(), str(path)), type_checking):
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
TYPED_GRAPH = import_graph(MODULES, type_checking=True)

# Inside a package: which sibling sub-packages each sub-package may import (any may import its
# package's root modules; the root imports none of them). Read it as the house's floor plan.
SUB_ALLOWED: dict[str, set[str]] = {
    "telemetry.log": set(),
    "telemetry.agent": set(),
    "telemetry.server": set(),
    "telemetry.view": set(),
    "telemetry.probe": {"telemetry.log"},
    "telemetry.export": {"telemetry.log"},
    "telemetry.bench": {"telemetry.log", "telemetry.server"},
    "telemetry.compare": {"telemetry.export", "telemetry.log"},
    "telemetry.values": {"telemetry.log"},
    "telemetry.proxy": {"telemetry.agent", "telemetry.log"},
    "backends.transport": set(),
    "backends.local": set(),
    "backends.otel": set(),
    "backends.probe": {"backends.providers"},
    "backends.agent": {"backends.providers"},
    "backends.mcp": {"backends.agent", "backends.providers"},
    "backends.providers": {"backends.transport", "backends.local"},
    "backends.compare": {"backends.providers", "backends.agent", "backends.ask", "backends.mcp"},
    "backends.ask": {"backends.agent", "backends.load", "backends.mcp", "backends.providers"},
    "backends.proxy": {"backends.providers", "backends.transport", "backends.otel"},
    "backends.load": {
        "backends.transport",
        "backends.providers",
        "backends.otel",
        "backends.agent",
        "backends.mcp",
        "backends.local",
    },
    "tui.widgets": set(),
    "tui.screens": set(),
    "tui.report": set(),
    "tui.compare": {"tui.widgets", "tui.screens"},
    "tui.chat": {"tui.compare", "tui.widgets", "tui.screens"},
    "tui.proxy": {"tui.widgets"},
    "tui.commands": {"tui.chat", "tui.compare", "tui.report", "tui.proxy"},
}
# The root modules above their own package's sub-packages: the entry points, which dispatch to them
# (the CLI, and the Python API: the library's front door).
ENTRY_POINTS = {"tui.cli", "backends.api"}


def part_of(name: str) -> str:
    """The part of its package a module belongs to: ``pkg`` (the root) or ``pkg.sub``, however deep."""
    parts = name.split(".")
    if len(parts) >= 3 or (len(parts) == 2 and MODULES[name].name == "__init__.py"):
        return ".".join(parts[:2])
    return parts[0]


@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_module_imports(name: str) -> None:
    importlib.import_module(f"ttft.{name}")  # installed under the one package, ttft


def test_no_module_names_the_root_or_imports_its_own_by_string() -> None:
    """Inside the packages, imports are relative: no module names ``ttft`` or one of the three folders, so
    the folders install under ``ttft`` (or anywhere) unchanged, and no installed ``telemetry`` or
    ``backends`` package of another project is ever read as ours. Nor is a project module imported by a
    string (``importlib.import_module``, ``__import__``), which the graph, mypy and the packager cannot see
    (optional third-party modules, such as the export's engines, are imported so by design)."""
    roots = {"ttft", *PACKAGES}
    absolute = sorted(
        (name, target)
        for name, path in MODULES.items()
        for target, _, level in _imports(ast.parse(path.read_text()), type_checking=True)
        if not level and target.split(".")[0] in roots
    )
    assert absolute == []
    by_string = sorted(
        (name, node.lineno)
        for name, path in MODULES.items()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and (
            (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
            or (isinstance(node.func, ast.Name) and node.func.id in {"__import__", "import_module"})
        )
        and node.args
        and isinstance(arg := node.args[0], ast.Constant)
        and isinstance(arg.value, str)
        and (arg.value.startswith(".") or arg.value.split(".")[0] in roots)
    )
    assert by_string == []


def test_no_import_cycle() -> None:
    assert cycles(GRAPH) == []


def test_no_import_cycle_at_type_checking_time_either() -> None:
    assert cycles(TYPED_GRAPH) == []


def test_layering() -> None:
    wrong = sorted(
        (name, dep)
        for name, deps in GRAPH.items()
        for dep in deps
        if (a := name.split(".")[0]) != (b := dep.split(".")[0]) and b not in ALLOWED[a]
    )
    assert wrong == []


def test_inside_each_package_imports_run_down_its_floor_plan() -> None:
    """A root module imports none of its package's sub-packages; a sub-package only its allowed siblings."""
    parts = {part_of(name) for name in MODULES}
    assert parts - set(PACKAGES) == set(SUB_ALLOWED), "every sub-package is on the floor plan"
    wrong = sorted(
        (name, dep)
        for name, deps in GRAPH.items()
        for dep in deps
        if name.split(".")[0] == dep.split(".")[0]
        and (a := part_of(name)) != (b := part_of(dep))
        and b not in PACKAGES  # any part may use its package's root
        and not (a in PACKAGES and name in ENTRY_POINTS)
        and (a in PACKAGES or b not in SUB_ALLOWED[a])
    )
    assert wrong == []


def test_no_package_init_imports_anything() -> None:
    """An ``__init__.py`` says what its folder holds; it hands no names on (each name has one home)."""
    faces = sorted(
        name
        for name, path in MODULES.items()
        if path.name == "__init__.py" and _imports(ast.parse(path.read_text()), type_checking=True)
    )
    assert faces == []


def test_no_folder_holds_more_than_fifteen_modules() -> None:
    crowded = {
        str(folder.relative_to(ROOT)): n
        for pkg in PACKAGES
        for folder in [ROOT / pkg, *(p for p in (ROOT / pkg).rglob("*") if p.is_dir() and p.name != "__pycache__")]
        if (n := len([f for f in folder.glob("*.py") if f.name != "__init__.py"])) > 15
    }
    assert crowded == {}


def test_the_checks_see_what_they_look_for() -> None:
    """The graph finds a late import inside a function, and the cycle finder finds a cycle."""
    assert "tui.compare.screen" in GRAPH["tui.chat.compare"]  # imported inside compare_screen() only
    assert "backends.local.llama_adapter" in GRAPH["backends.local.template"]  # from backends.local import ...
    assert part_of("backends.providers.lean.chat") == "backends.providers" and part_of("backends.turn") == "backends"
    assert part_of("tui.commands.bench.command") == "tui.commands" and part_of("tui.chat") == "tui.chat"
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


def test_the_architecture_page_shows_the_floor_plan_and_names_every_module() -> None:
    """docs/architecture.md is the map people read: its floor-plan table is SUB_ALLOWED as it is, and its
    tree names every module (a module missing there is a room nobody was told of)."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    for sub, allowed in SUB_ALLOWED.items():
        shown = ", ".join(f"`{s}`" for s in sorted(allowed)) or "-"
        assert f"| `{sub}` | {shown} |" in page, f"docs/architecture.md's floor plan: `{sub}` may import {shown}"
    words = set(re.findall(r"[a-z_0-9]+", page))
    unnamed = sorted(n for n, path in MODULES.items() if path.stem != "__init__" and path.stem not in words)
    assert not unnamed, f"docs/architecture.md's tree does not name: {unnamed}"


def test_no_module_over_600_lines_and_no_function_over_100() -> None:
    """Issue 41's measure of a room one person can hold in mind: a module past 600 lines holds more than
    one idea, and a function past 100 lines more than one step."""
    long_modules = {name: n for name, path in MODULES.items() if (n := path.read_text().count("\n")) > 600}
    long_functions = sorted(
        (name, node.name, node.end_lineno - node.lineno + 1)
        for name, path in MODULES.items()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > 100
    )
    assert long_modules == {} and long_functions == []
