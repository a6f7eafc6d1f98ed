"""The wheel installs one package, ``ttft``, and nothing else at the top level: built from this tree,
installed into a fresh environment beside another project's ``telemetry``, ``backends`` and ``tui``
packages, and run from a folder that holds a notebook's own ``telemetry.py`` and ``backends.py``. There
the API page's examples run as a reader pastes them, and both projects' packages import.

The fresh environment installs ttft's wheel and nothing from the network: the dependencies are read from
this test's own environment, placed after the fresh one's site-packages (so its ``ttft`` is the one
imported, never this tree's)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.fakes.prefill_server import PrefillServer
from tests.support.paths import ROOT

# Run in the fresh environment, from the notebook's folder: the page's blocks in order, in one namespace.
RUNNER = """
import contextlib, io, re, sys
page = open(sys.argv[1], encoding="utf-8").read()
for i, code in enumerate(re.findall(r"^```python\\n(.*?)^```$", page, re.S | re.M)):
    exec(compile(code.replace("http://127.0.0.1:8080/v1", sys.argv[2]), f"api.md block {i + 1}", "exec"), globals())
import backends, telemetry, ttft
print("ttft from", ttft.__file__)
print("notebook's", telemetry.MINE, backends.MINE)
"""
OTHERS = {"telemetry": "other-telemetry", "backends": "other-backends", "tui": "other-tui"}


def _run(*args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    done = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{args[:3]} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _tops(site: Path) -> set[str]:
    return {p.name for p in site.iterdir() if p.name != "__pycache__"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    _run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", out, ROOT)
    (found,) = out.glob("ttft-*.whl")
    return found


def test_the_wheel_holds_one_package_and_the_api_runs_beside_namesakes(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", venv)
    python = venv / "bin" / "python"
    site = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip())
    # another project's packages, already installed under the names ttft's folders carry in this tree
    for name, mark in OTHERS.items():
        (site / name).mkdir()
        (site / name / "__init__.py").write_text(f"MINE = {mark!r}\n")
    before = _tops(site)
    _run(python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheel)
    added = _tops(site) - before
    assert {a for a in added if not a.endswith(".dist-info")} == {"ttft"}, added
    assert len(added) == 2  # ttft and its .dist-info
    for name, mark in OTHERS.items():  # none of them was replaced
        assert (site / name / "__init__.py").read_text() == f"MINE = {mark!r}\n"
    # the dependencies, from this environment, after the fresh one's own site-packages
    (site / "zz_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    notebook = tmp_path / "notebook"
    notebook.mkdir()
    (notebook / "telemetry.py").write_text("MINE = 'notebook-telemetry'\n")
    (notebook / "backends.py").write_text("MINE = 'notebook-backends'\n")
    (notebook / "run_page.py").write_text(RUNNER)
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "OPENAI_API_KEY", "TTFT_MODEL"}}
    env |= {"TTFT_DATA_DIR": str(tmp_path / "data"), "TTFT_CONFIG_DIR": str(tmp_path / "conf")}
    (tmp_path / "conf").mkdir()
    with PrefillServer(base_ms=5, prefill_ms_per_token=0.01, token_ms=0.5) as srv:
        printed = _run(python, "run_page.py", ROOT / "docs" / "api.md", srv.base_url, cwd=notebook, env=env)
    assert printed.startswith("ok\nTTFT ")  # the page's first example, its record as the page shows it
    assert re.search(r"\nok (new|reused) 2\nok reused 4\n", printed)  # the conversation, one connection
    assert f"ttft from {site / 'ttft' / '__init__.py'}\n" in printed  # the wheel's, not this tree's
    assert "notebook's notebook-telemetry notebook-backends\n" in printed  # the notebook's own modules
    # another project's package still imports, beside ttft
    shown = _run(python, "-c", "import telemetry, tui; print(telemetry.MINE, tui.MINE)", cwd=tmp_path, env=env)
    assert shown.split() == [
        "other-telemetry",
        "other-tui",
    ]
    assert _run(venv / "bin" / "ttft", "--version", cwd=tmp_path, env=env).startswith("ttft ")
    assert _run(python, "-m", "ttft", "--version", cwd=notebook, env=env).startswith("ttft ")
