"""QA regression: `python -m tests.fakes --port N`, as the fakes' docstring says, runs one by hand."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.request

from tests.support.paths import ROOT


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_fake_server_by_hand_on_a_chosen_port() -> None:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes", "--port", str(port), "--first-token-ms", "5"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert f"http://127.0.0.1:{port}/v1" in line, (line, proc.stderr.read() if proc.poll() is not None else "")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=10) as resp:
            assert json.loads(resp.read())["data"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
