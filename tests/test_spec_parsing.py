"""A model spec string (``PROVIDER:MODEL``) is split in exactly one function: backends.spec.split_spec.

Every ``.partition(":")``, ``.split(":")`` and their ``r`` twins in the three packages is listed here
with what it splits; a new one fails this test until it is either a call of ``split_spec`` (a spec) or
added below with the other syntax it reads. The per-command counts are in
tests/backends/providers/test_target.py and tests/tui/test_target_resolved_once.py.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("telemetry", "backends", "tui")
SPLITS = {"partition", "rpartition", "split", "rsplit"}

# (module, function) -> what it splits, which is not a model spec.
OTHER_SYNTAX = {
    ("backends/spec.py", "split_spec"): "THE model spec",
    ("backends/providers/lean/messages.py", "custom_headers"): "a 'Name: value' header line",
    ("backends/local/amx.py", "cpu_has_amx"): "a /proc/cpuinfo line",
    ("tui/commands/bench/flags.py", "_goodput"): "vLLM's --goodput ttft:500",
    ("telemetry/log/urls.py", "url_secrets"): "a URL's user:password",
    ("telemetry/log/urls.py", "_host_and_port"): "a URL's host:port",
    ("telemetry/bench/workload/lengths.py", "parse"): "a MEAN:STD length",
    ("backends/mcp/wire.py", "parse_failure"): "the SDK's 'Failed to parse ...: <pydantic dump>' message",
}


class _Splits(ast.NodeVisitor):
    """Each split on a ':' literal, with the innermost function around it (``<module>`` at the top)."""

    def __init__(self, module: str) -> None:
        self.module = module
        self.where = ["<module>"]
        self.found: list[tuple[str, str, int]] = []

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.where.append(node.name)
        self.generic_visit(node)
        self.where.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Call(self, node: ast.Call) -> None:
        f, args = node.func, node.args
        colon = bool(args) and isinstance(args[0], ast.Constant) and args[0].value == ":"
        if colon and isinstance(f, ast.Attribute) and f.attr in SPLITS:
            self.found.append((self.module, self.where[-1], node.lineno))
        self.generic_visit(node)


def _colon_splits() -> list[tuple[str, str, int]]:
    """(module, enclosing function, line) of every split on a ':' literal in the packages."""
    found = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            visitor = _Splits(path.relative_to(ROOT).as_posix())
            visitor.visit(ast.parse(path.read_text(encoding="utf-8")))
            found += visitor.found
    return found


def test_a_spec_string_is_split_in_one_function_only() -> None:
    splits = _colon_splits()
    unlisted = sorted({(m, f) for m, f, _ in splits} - set(OTHER_SYNTAX))
    assert unlisted == [], "split a PROVIDER:MODEL spec with backends.spec.split_spec, or list the syntax here"
    spec_splits = [(m, f) for m, f, _ in splits if OTHER_SYNTAX[(m, f)] == "THE model spec"]
    assert spec_splits == [("backends/spec.py", "split_spec")]


def test_the_list_names_no_split_that_is_gone() -> None:
    """A stale entry would let a spec split back in under an old name."""
    assert {(m, f) for m, f, _ in _colon_splits()} == set(OTHER_SYNTAX)
