"""``ttft proxy --headless``: run until stopped, the lines to set on start, one line per call, the summary
on SIGINT. A real process, called through by the official SDKs from this test."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import anthropic
import openai
import pytest

from tests.fakes import FakeServer, Schedule
from tests.support.child_env import child_env
from tests.support.paths import ROOT

SCHEDULE = Schedule(first_token_ms=40, token_ms=2, visible_tokens=5)
KEY = "sk-test-SECRET-headless-5d1e"
ESC_MODEL = "evil\x1b]0;pwned\x07model"


@pytest.fixture(scope="module")
def srv():
    with FakeServer(SCHEDULE) as s:
        yield s


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return child_env(tmp_path)


class Lines:
    """A process's stdout, line by line, with a deadline (a test never hangs on a silent process). Read
    from the file descriptor itself: a buffered reader could hold the next line where select cannot see it."""

    def __init__(self, p: subprocess.Popen[bytes]) -> None:
        assert p.stdout is not None
        self.fd = p.stdout.fileno()
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.fd, selectors.EVENT_READ)
        self.buffer = b""

    def next(self, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not self.sel.select(timeout=left):
                raise AssertionError(f"no line in time; have {self.buffer!r}")
            chunk = os.read(self.fd, 65536)
            assert chunk, "stdout closed"
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode()


def test_headless_prints_the_lines_to_set_a_line_per_call_and_the_summary_on_ctrl_c(
    srv: FakeServer, env: dict[str, str], tmp_path: Path
) -> None:
    out = tmp_path / "run.json"
    cmd = [sys.executable, "-m", "ttft.tui.cli", "proxy", "--headless", "--port", "0", "--upstream", srv.url]
    p = subprocess.Popen(
        [*cmd, "--json", str(out)],
        env=env,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        lines = Lines(p)
        first, second = lines.next(), lines.next()
        assert first.startswith("export ANTHROPIC_BASE_URL=http://127.0.0.1:")
        assert second.startswith("export OPENAI_BASE_URL=http://127.0.0.1:") and second.endswith("/v1")
        anthropic_url, openai_url = first.split("=", 1)[1], second.split("=", 1)[1]
        assert openai_url == anthropic_url + "/v1"

        client = openai.OpenAI(base_url=openai_url, api_key=KEY, max_retries=0, timeout=30)
        stream = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == SCHEDULE.visible_text()
        line = lines.next()
        assert "OpenAI/Python" in line and "gpt-4o-mini" in line and " 200 " in line and "TTFT" in line, line

        a = anthropic.Anthropic(base_url=anthropic_url, api_key=KEY, max_retries=0, timeout=30)
        msg = a.messages.create(model="claude-sonnet-4-5", max_tokens=16, messages=[{"role": "user", "content": "x"}])
        assert msg.content
        line = lines.next()
        assert "Anthropic/Python" in line and "claude-sonnet-4-5" in line and " 200 " in line, line

        # A model name with terminal escapes: shown, never sent to the terminal.
        client.chat.completions.create(model=ESC_MODEL, messages=[{"role": "user", "content": "hi"}])
        line = lines.next()
        assert "\x1b" not in line and "\x07" not in line and "␛" in line, line

        p.send_signal(signal.SIGINT)
        rest_bytes, err_bytes = p.communicate(timeout=60)
    finally:
        if p.poll() is None:  # a failed check above: never leave the proxy running
            p.kill()
            p.communicate(timeout=30)
    rest, err = (lines.buffer + rest_bytes).decode(), err_bytes.decode()
    assert p.returncode == 130, err  # stopped by Ctrl-C, as every command says it
    assert rest == ""
    assert "ttft proxy: 3 calls" in err and "TTFT p50" in err, err
    assert "Traceback" not in err and KEY not in err
    doc = json.loads(out.read_text())
    assert [c["api"] for c in doc["calls"]] == ["chat.completions", "messages", "chat.completions"]
    assert KEY not in out.read_text()
    for path in Path(env["TTFT_DATA_DIR"]).rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes()


def test_without_a_terminal_the_proxy_stays_line_per_call_without_headless(
    srv: FakeServer, env: dict[str, str]
) -> None:
    # stdout a pipe (a script, `| tee`): no live view, the lines as with --headless
    cmd = [sys.executable, "-m", "ttft.tui.cli", "proxy", "--port", "0", "--upstream", srv.url]
    p = subprocess.Popen(
        cmd, env=env, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        lines = Lines(p)
        first, second = lines.next(), lines.next()
        assert first.startswith("export ANTHROPIC_BASE_URL=") and second.startswith("export OPENAI_BASE_URL=")
        client = openai.OpenAI(base_url=second.split("=", 1)[1], api_key=KEY, max_retries=0, timeout=30)
        client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
        line = lines.next()
        assert "OpenAI/Python" in line and "gpt-4o-mini" in line and " 200 " in line, line
        p.send_signal(signal.SIGINT)
        _, err_bytes = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate(timeout=30)
    assert p.returncode == 130 and "ttft proxy: 1 call: OpenAI/Python gpt-4o-mini ×1" in err_bytes.decode()
