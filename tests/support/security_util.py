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
        [sys.executable, "-m", "tui.cli", *args], env=env, capture_output=True, timeout=60, cwd=ROOT, check=False
    )


def log_lines(env: dict[str, str]) -> list[dict[str, Any]]:
    files = sorted(Path(env["TTFT_DATA_DIR"], "sessions").glob("*.jsonl"))
    return [json.loads(line) for f in files for line in f.read_text(encoding="utf-8").splitlines()]


def log_text(env: dict[str, str]) -> str:
    """Every file ttft wrote under its data folder, as text."""
    return "".join(f.read_text(encoding="utf-8") for f in Path(env["TTFT_DATA_DIR"]).rglob("*.jsonl"))
