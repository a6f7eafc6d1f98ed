"""``ttft proxy --watch``: a real ``ttft proxy -- python sdk_program.py`` runs in one process while
``ttft proxy --watch --headless`` in another prints its calls as they end, says when the proxy has
ended, and exits 0; with no proxy running it says so (exit 1), with flags that would start one it
refuses them (exit 2), never with a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.test_proxy import env as env  # the fixture
from tests.cli.test_proxy_headless import Lines
from tests.fakes import FakeServer, Schedule
from tests.support.paths import ROOT

KEY = "sk-test-SECRET-watchcli-9e12"

# Two calls through the proxy, the second only once the test says so: by then the watch has printed the first.
PROGRAM = """
import os, sys, time, anthropic, openai
key, go = open(sys.argv[1]).read().strip(), sys.argv[2]
client = openai.OpenAI(api_key=key, max_retries=0)  # the base URL: OPENAI_BASE_URL, set by the proxy
first = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
print("first:", bool(first.choices[0].message.content), flush=True)
deadline = time.monotonic() + 60
while not os.path.exists(go) and time.monotonic() < deadline:
    time.sleep(0.05)
a = anthropic.Anthropic(api_key=key, max_retries=0)
with a.messages.stream(model="claude-sonnet-4-5", max_tokens=16, messages=[{"role": "user", "content": "x"}]) as s:
    print("second:", "".join(s.text_stream) != "", flush=True)
"""


@pytest.fixture(scope="module")
def srv():
    with FakeServer(Schedule(first_token_ms=30, token_ms=2, visible_tokens=4)) as s:
        yield s


def ttft(env: dict[str, str], *args: str, **kw: object) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "ttft.tui.cli", "proxy", *args],
        env=env,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **kw,  # type: ignore[call-overload]
    )


def test_watch_prints_the_calls_of_a_program_run_through_the_proxy(
    srv: FakeServer, env: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "key.txt").write_text(KEY)
    (tmp_path / "agent.py").write_text(PROGRAM)
    go = tmp_path / "go"
    states = Path(env["TTFT_DATA_DIR"]) / "proxies"
    prog = [sys.executable, str(tmp_path / "agent.py"), str(tmp_path / "key.txt"), str(go)]
    proxy = ttft(env, "--port", "0", "--upstream", srv.url, "--", *prog)
    watch: subprocess.Popen[bytes] | None = None
    try:
        deadline = time.monotonic() + 30
        while not list(states.glob("*.json")) and time.monotonic() < deadline:
            time.sleep(0.05)
        (state,) = states.glob("*.json")
        doc = json.loads(state.read_text())
        assert doc["program"] == "python" or doc["program"].startswith("python")
        assert KEY not in state.read_text() and str(go) not in state.read_text()  # never the arguments

        watch = ttft(env, "--watch", "--headless")
        lines = Lines(watch)
        first = lines.next()
        assert "OpenAI/Python" in first and "gpt-4o-mini" in first and " 200 " in first and "TTFT" in first, first
        go.touch()
        second = lines.next()
        assert "Anthropic/Python" in second and "claude-sonnet-4-5" in second and " 200 " in second, second
        out, err = proxy.communicate(timeout=60)
        assert proxy.returncode == 0, err
        assert out.decode().splitlines() == ["first: True", "second: True"]  # the program's stdout, its own
        rest, werr = watch.communicate(timeout=30)
    finally:
        for p in (proxy, watch):
            if p is not None and p.poll() is None:
                p.kill()
                p.communicate(timeout=30)
    text = werr.decode()
    assert watch.returncode == 0, text  # the proxy ended: so did the watch
    assert (lines.buffer + rest) == b""
    assert "watching the proxy on http://127.0.0.1:" in text and "has ended" in text
    assert "ttft proxy: 2 calls:" in text and "session OpenAI/Python" in text, text
    assert "Traceback" not in text and KEY not in text
    assert list(states.iterdir()) == []  # the proxy removed its state file


def test_watch_with_no_proxy_running_says_so(env: dict[str, str]) -> None:
    states = Path(env["TTFT_DATA_DIR"]) / "proxies"
    states.mkdir(parents=True)
    # a proxy that died without removing its file (its lock went with it): stale, not running
    stale = {
        "schema": "ttft.proxy-state/1",
        "pid": os.getpid(),
        "port": 8787,
        "base_url": "http://127.0.0.1:8787",
        "upstream": "",
        "session_id": "20260101-000000-abcdef",
        "log": "/tmp/none.jsonl",
        "program": "",
        "started_at": "",
    }
    (states / "20260101-000000-abcdef.json").write_text(json.dumps(stale))
    p = ttft(env, "--watch", "--headless")
    out, err = p.communicate(timeout=60)
    assert p.returncode == 1 and out == b""
    assert err.decode().startswith("ttft proxy: --watch: no ttft proxy is running"), err
    assert b"Traceback" not in err and list(states.iterdir()) == []
    p = ttft(env, "--watch", "--port", "9999")
    _, err = p.communicate(timeout=60)
    assert p.returncode == 1 and b"no ttft proxy is running on port 9999" in err


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--upstream", "http://127.0.0.1:1"], "takes no --upstream"),
        (["--json", "x.json"], "takes no --json"),
        (["--", "true"], "takes no -- CMD"),
        (["--port", "0"], "not 0"),
        (["--otlp"], "takes no --otlp"),
        (["--otlp", "4319"], "takes no --otlp"),
    ],
)
def test_watch_refuses_the_flags_that_start_a_proxy(env: dict[str, str], flags: list[str], words: str) -> None:
    p = ttft(env, "--watch", *flags)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 2 and words in err.decode() and b"Traceback" not in err
