"""The commands that run the local engine in their own process import llama.cpp before numpy.

On a CUDA build a model load segfaults in a process that imported numpy first (seen on an H200:
``ttft probe`` every time, and pytest with a plugin that imports numpy); with llama.cpp first the same
load runs. Each case runs the real CLI in a fresh interpreter that notes which of the two is imported
first.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'ttft[local]')")

ORDER = """
import builtins, sys
order = []
real = builtins.__import__
def spy(name, *a, **k):
    top = name.split(".")[0]
    if top in ("numpy", "llama_cpp") and top not in order:
        order.append(top)
    return real(name, *a, **k)
builtins.__import__ = spy
import ttft.tui.cli
try:
    ttft.tui.cli.main(sys.argv[1:])
except SystemExit:
    pass
print(repr(order))
"""


def first_imports(tmp_path: Path, *args: str) -> list[str]:
    env = {**os.environ, "TTFT_DATA_DIR": str(tmp_path / "d"), "TTFT_CONFIG_DIR": str(tmp_path / "c")}
    env.pop("TTFT_MODEL", None)
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        env.pop(key, None)
    p = subprocess.run(
        [sys.executable, "-c", ORDER, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    return ast.literal_eval(p.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "args",
    [
        ("bench", "-m", "local", "--help"),  # bench's modules import numpy as they load
        ("probe", "--model=local", "--help"),
        ("compare", "-m", "local", "-m", "local:gemma3-270m", "--help"),
        ("probe", "--help"),  # no -m and no key: the default model is the local one
    ],
)
def test_a_command_that_runs_the_engine_here_imports_llama_cpp_before_numpy(tmp_path: Path, args: tuple) -> None:
    order = first_imports(tmp_path, *args)
    assert order[:1] == ["llama_cpp"], order


@pytest.mark.parametrize(
    "args",
    [
        ("bench", "-m", "compat:m", "--help"),  # a hosted target never pays for llama.cpp's import
        ("bench", "-m", "local-server", "--help"),  # llama-server runs the model in its own process
        ("ask", "-m", "local", "--help"),  # ask runs the engine in a child process of its own
    ],
)
def test_other_targets_and_commands_do_not_import_llama_cpp_up_front(tmp_path: Path, args: tuple) -> None:
    assert "llama_cpp" not in first_imports(tmp_path, *args)
