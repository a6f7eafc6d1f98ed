"""Shared by the security tests: the ``ttft`` command line in a clean data and config folder.

Import ``env_fixture`` into a test module (``# noqa: F401``) to get the ``env`` fixture.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import ROOT


@pytest.fixture(name="env")
def env_fixture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """An environment for ``ttft`` (in this process and in a child): its own data and config folders, no keys."""
    data, conf = tmp_path / "data", tmp_path / "conf"
    conf.mkdir()
    for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "TTFT_MODEL"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("TTFT_DATA_DIR", str(data))
    monkeypatch.setenv("TTFT_CONFIG_DIR", str(conf))
    return {**os.environ, "TTFT_DATA_DIR": str(data), "TTFT_CONFIG_DIR": str(conf), "PYTHONPATH": str(ROOT)}


def run_ttft(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[bytes]:
    """``ttft ARGS`` in a child process, stdout and stderr as bytes (what a pipe gets)."""
    return subprocess.run(
        [sys.executable, "-m", "ttft.tui.cli", *args], env=env, capture_output=True, timeout=60, cwd=ROOT, check=False
    )


def log_lines(env: dict[str, str]) -> list[dict[str, Any]]:
    files = sorted(Path(env["TTFT_DATA_DIR"], "sessions").glob("*.jsonl"))
    return [json.loads(line) for f in files for line in f.read_text(encoding="utf-8").splitlines()]


def log_text(env: dict[str, str]) -> str:
    """Every file ttft wrote under its data folder, as text."""
    return "".join(f.read_text(encoding="utf-8") for f in Path(env["TTFT_DATA_DIR"]).rglob("*.jsonl"))


# An unforeseen error with chosen words, in a child ttft: a ``sitecustomize`` (run by the interpreter at
# start, in every process that finds it on PYTHONPATH: the command, and the chat's backend processes)
# makes every hosted backend's turn raise ``RuntimeError(TTFT_TEST_FAIL_WITH)`` once the module loads.
FAILING_TURNS = """
import os
import sys

_SAID = os.environ.get("TTFT_TEST_FAIL_WITH")
if _SAID:
    import importlib.abc
    import importlib.machinery

    class _FailingTurns(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name != "ttft.backends.providers.hosted":
                return None
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is None or spec.loader is None:
                return spec
            real = spec.loader.exec_module

            def exec_module(module, _real=real):
                _real(module)

                async def stream(self, request):
                    raise RuntimeError(_SAID)
                    yield  # an async generator, as the real one is

                module.HostedBackend.stream = stream

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, _FailingTurns())
"""


def failing_turns(env: dict[str, str], site: Path, said: str) -> dict[str, str]:
    """``env`` for a ttft whose every hosted turn fails with an unforeseen ``RuntimeError(said)``."""
    site.mkdir(parents=True, exist_ok=True)
    (site / "sitecustomize.py").write_text(FAILING_TURNS, encoding="utf-8")
    path = os.pathsep.join(p for p in (str(site), env.get("PYTHONPATH", "")) if p)
    return {**env, "TTFT_TEST_FAIL_WITH": said, "PYTHONPATH": path}
