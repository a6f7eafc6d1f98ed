"""QA regression: a command whose stdout reader goes away (`ttft sessions | head -1`) stops quietly."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT
from tui.commands.exits import Exit


def _closed_pipe_run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first write: every write fails with EPIPE
    try:
        return subprocess.run(
            [sys.executable, "-m", "tui.cli", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
            timeout=120,
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize("args", [["models", "-m", "local"], ["sessions"], ["export", "-f", "csv", "-o", "-"]])
def test_closed_stdout_is_no_traceback(args: list[str], tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TTFT_DATA_DIR": str(tmp_path), "TTFT_CONFIG_DIR": str(tmp_path)}
    if args[0] in ("sessions", "export"):  # something to list or export
        (tmp_path / "sessions").mkdir()
        (tmp_path / "sessions" / "20260101-090000-a1b2.jsonl").write_text("")
    done = _closed_pipe_run(args, env)
    assert "Traceback" not in done.stderr, done.stderr
    assert "BrokenPipe" not in done.stderr, done.stderr
    assert done.returncode == Exit.PIPE_CLOSED == 141
