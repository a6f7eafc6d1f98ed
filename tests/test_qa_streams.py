"""QA regression: a finish_reason that is not a string is a malformed stream, not a crash."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes import FakeServer, Schedule
from tests.support.paths import ROOT

BODY = (
    'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n'
    'data: {"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":1}]}\n\n'
    "data: [DONE]\n\n"
)


@pytest.mark.parametrize("reader", [[], ["--sdk"]])
def test_numeric_finish_reason_is_malformed_stream(reader: list[str], tmp_path: Path) -> None:
    # The fuzz test found it: on the SDK path the record failed to build ("stop_reason is a number,
    # which does not fit str"), a RecordError out of the turn instead of a logged error.
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TTFT_DATA_DIR": str(tmp_path), "TTFT_CONFIG_DIR": str(tmp_path)}
    with FakeServer(Schedule(raw_sse=BODY)) as srv:
        p = subprocess.run(
            [sys.executable, "-m", "tui.cli", "ask", *reader, "-m", "compat:x", "--base-url", srv.openai_base_url,
             "--max-retries", "0", "--json", "hi"],
            capture_output=True, text=True, env=env, cwd=ROOT, timeout=120,
        )  # fmt: skip
    assert "Traceback" not in p.stderr, p.stderr
    assert p.returncode == 1, p.stderr
    rec = json.loads(p.stdout)
    assert rec["status"] == "error" and rec["error"]["type"] == "malformed_stream", rec["error"]
    assert "stop reason is not a string" in rec["error"]["message"] and rec["answer"] == "Hix"  # what came is kept
    logged = [json.loads(line) for f in (tmp_path / "sessions").glob("*.jsonl") for line in f.read_text().splitlines()]
    assert [r["status"] for r in logged] == ["error"]
