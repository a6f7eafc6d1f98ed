"""mypy over the package as it installs: ``ttft``, with ``ttft.telemetry``, ``ttft.backends`` and ``ttft.tui``.

The three folders sit at the top of the repository and import one another relatively, so mypy must read
them under the names they install as. mypy follows no import hook (the editable install's finder), so
this lays out those names as links in ``.mypy_view/ttft`` (ignored by git), which ``[tool.mypy]``'s
``mypy_path`` and ``packages`` point at. By hand: ``python -m tests.support.typecheck``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mypy import api as mypy_api

from tests.support.paths import ROOT

VIEW = ROOT / ".mypy_view" / "ttft"
LINKED = ("__init__.py", "__main__.py", "py.typed")  # the root package's own files
FOLDERS = ("telemetry", "backends", "tui")


def lay_out_view() -> Path:
    """``.mypy_view/ttft``, each entry a relative link into the tree (so the tree can move); idempotent."""
    VIEW.mkdir(parents=True, exist_ok=True)
    wanted = {name: Path("..", "..", "ttft", name) for name in LINKED} | {f: Path("..", "..", f) for f in FOLDERS}
    for name, target in wanted.items():
        link = VIEW / name
        if link.is_symlink() and Path(os.readlink(link)) == target:
            continue
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target, target_is_directory=name in FOLDERS)
    return VIEW


def run_mypy() -> tuple[str, int]:
    """mypy's report and status, run from the repository's root (where pyproject.toml configures it)."""
    lay_out_view()
    here = Path.cwd()
    os.chdir(ROOT)
    try:
        stdout, stderr, status = mypy_api.run([])
    finally:
        os.chdir(here)
    return stdout + stderr, status


if __name__ == "__main__":
    report, code = run_mypy()
    print(report, end="")
    sys.exit(code)
