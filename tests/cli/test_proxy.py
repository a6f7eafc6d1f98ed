"""``ttft proxy -- CMD``: a real program, using the official OpenAI or Anthropic SDK, run through the proxy.

The program reads only its base URL from the environment (``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL``,
which the proxy sets) and its key from a file ttft never sees, and calls the loopback fake server.
The program's stdout stays its own, its exit status is ttft's, the summary is on stderr, ``--json`` and
the session log hold the call, and the key is in no file, no JSON and no line on stderr.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes import FakeServer, Schedule
from tests.support.child_env import child_env
from tests.support.paths import ROOT

SCHEDULE = Schedule(first_token_ms=60, token_ms=2, visible_tokens=6)
ANSWER = SCHEDULE.visible_text()
KEY = "sk-test-SECRET-proxy-0f3a9c2e7b"

OPENAI_PROGRAM = """
import sys, openai
key = open(sys.argv[1]).read().strip()
client = openai.OpenAI(api_key=key, max_retries=0)  # the base URL: OPENAI_BASE_URL, set by the proxy
stream = client.chat.completions.create(
    model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], stream=True,
    stream_options={"include_usage": True},
)
print("".join(c.choices[0].delta.content or "" for c in stream if c.choices), flush=True)
sys.exit(int(sys.argv[2]))
"""

ANTHROPIC_PROGRAM = """
import sys, anthropic
key = open(sys.argv[1]).read().strip()
client = anthropic.Anthropic(api_key=key, max_retries=0)  # the base URL: ANTHROPIC_BASE_URL, set by the proxy
with client.messages.stream(
    model="claude-sonnet-4-5", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
) as stream:
    print("".join(stream.text_stream), flush=True)
sys.exit(int(sys.argv[2]))
"""


@pytest.fixture(scope="module")
def srv():
    with FakeServer(SCHEDULE) as s:
        yield s


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return child_env(tmp_path)


@pytest.fixture
def keyfile(tmp_path: Path) -> Path:
    path = tmp_path / "key.txt"
    path.write_text(KEY)
    return path


def proxy(env: dict[str, str], *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ttft.tui.cli", "proxy", *args],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


def files_under(*folders: Path) -> list[Path]:
    return [p for folder in folders if folder.exists() for p in folder.rglob("*") if p.is_file()]


def assert_no_key_anywhere(env: dict[str, str], *texts: str) -> None:
    for path in files_under(Path(env["TTFT_DATA_DIR"]), Path(env["TTFT_CONFIG_DIR"])):
        assert KEY.encode() not in path.read_bytes(), path
        assert b"SECRET" not in path.read_bytes(), path
    for text in texts:
        assert KEY not in text and "SECRET" not in text


def logged(env: dict[str, str]) -> list[dict]:
    logs = list((Path(env["TTFT_DATA_DIR"]) / "sessions").glob("*.jsonl"))
    assert len(logs) == 1, logs  # one session per proxy run
    return [json.loads(line) for line in logs[0].read_text().splitlines()]


@pytest.mark.parametrize(
    ("program", "api", "exit_code"),
    [
        (OPENAI_PROGRAM, "chat.completions", 0),
        (OPENAI_PROGRAM, "chat.completions", 3),
        (ANTHROPIC_PROGRAM, "messages", 0),
        (ANTHROPIC_PROGRAM, "messages", 5),
    ],
    ids=["openai", "openai-exit-3", "anthropic", "anthropic-exit-5"],
)
def test_a_program_runs_through_the_proxy_with_its_own_output_and_status(
    srv: FakeServer, env: dict[str, str], keyfile: Path, tmp_path: Path, program: str, api: str, exit_code: int
) -> None:
    out = tmp_path / "run.json"
    served = len(srv.generation_requests())
    p = proxy(
        env,
        *("--port", "0", "--upstream", srv.url, "--json", str(out)),
        *("--", sys.executable, "-c", program, str(keyfile), str(exit_code)),
    )
    assert p.returncode == exit_code, p.stderr
    assert p.stdout == ANSWER + "\n"  # the program's own output, nothing of ttft's
    assert "Traceback" not in p.stderr
    assert "ttft proxy: 1 call" in p.stderr and "TTFT p50" in p.stderr, p.stderr
    # The call went through the proxy to the fake, with the program's key as it sent it.
    requests = srv.generation_requests()[served:]
    assert len(requests) == 1
    sent = requests[0].headers
    assert KEY in (sent.get("authorization", "") + sent.get("x-api-key", ""))

    doc = json.loads(out.read_text())
    assert doc["schema"] == "ttft.proxy/1" and set(doc) == {"schema", "calls", "sessions"}
    assert oct(out.stat().st_mode & 0o777) == "0o600"
    [call] = doc["calls"]
    assert call["source"] == "proxy" and call["api"] == api and call["status"] == "ok"
    # TTFT as the proxy sees it: the fake's 60 ms, and a generous roof for a loaded machine.
    assert 55 <= call["metrics"]["ttft_ms"] <= 5000, call["metrics"]
    assert call["prompt"] == "" and call["answer"] == ""  # no content without --keep-content
    assert isinstance(doc["sessions"], list)

    [record] = logged(env)
    assert record["source"] == "proxy" and record["metrics"]["ttft_ms"] == call["metrics"]["ttft_ms"]
    assert record["prompt"] == "" and record["answer"] == ""
    assert_no_key_anywhere(env, out.read_text(), p.stderr, p.stdout)


def test_keep_content_keeps_the_conversation(
    srv: FakeServer, env: dict[str, str], keyfile: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run.json"
    p = proxy(
        env,
        *("--port", "0", "--upstream", srv.url, "--keep-content", "--json", str(out), "-q"),
        *("--", sys.executable, "-c", OPENAI_PROGRAM, str(keyfile), "0"),
    )
    assert p.returncode == 0 and p.stderr == "", p.stderr  # -q: no summary
    [call] = json.loads(out.read_text())["calls"]
    assert call["answer"] == ANSWER
    [record] = logged(env)
    assert record["answer"] == ANSWER
    assert_no_key_anywhere(env, out.read_text())


def test_a_program_not_found_is_127_with_a_clear_message(env: dict[str, str], srv: FakeServer) -> None:
    p = proxy(env, "--port", "0", "--upstream", srv.url, "--", "ttft-no-such-program-here", "x")
    assert p.returncode == 127
    assert "ttft proxy: ttft-no-such-program-here: command not found" in p.stderr
    assert "Traceback" not in p.stderr and p.stdout == ""


def test_a_program_killed_by_a_signal_is_128_plus_its_number(env: dict[str, str], srv: FakeServer) -> None:
    kill_self = "import os, signal; os.kill(os.getpid(), signal.SIGUSR1)"
    p = proxy(env, "--port", "0", "--upstream", srv.url, "--", sys.executable, "-c", kill_self)
    assert p.returncode == 128 + signal.SIGUSR1, p.stderr
    assert "no LLM calls came through" in p.stderr


def test_ctrl_c_goes_to_the_program_and_the_proxy_waits_for_it(env: dict[str, str], srv: FakeServer) -> None:
    # A terminal's Ctrl-C reaches the whole foreground process group: here, the group of a new session.
    program = (
        "import sys, time\n"
        "try:\n    print('ready', flush=True); time.sleep(60)\n"
        "except KeyboardInterrupt:\n    time.sleep(0.3); print('cleaned up', flush=True); sys.exit(7)\n"
    )
    cmd = [sys.executable, "-m", "ttft.tui.cli", "proxy", "--port", "0", "--upstream", srv.url]
    with subprocess.Popen(
        [*cmd, "--", sys.executable, "-c", program],
        env=env,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as p:
        assert p.stdout is not None
        assert p.stdout.readline() == "ready\n"
        os.killpg(p.pid, signal.SIGINT)
        out, err = p.communicate(timeout=60)
    assert p.returncode == 7, err  # the program's status: it handled the Ctrl-C, and ttft waited
    assert out == "cleaned up\n"
    assert "no LLM calls came through" in err and "Traceback" not in err


def test_usage_errors_say_what_to_do(env: dict[str, str], srv: FakeServer) -> None:
    p = proxy(env, "--upstream", "ftp://example.com", "--", "true")
    assert p.returncode == 2 and "--upstream ftp://example.com is not an http:// or https:// address" in p.stderr
    p = proxy(env, "-m", "local", "--", "true")
    assert p.returncode == 2 and "in-process engine" in p.stderr
    p = proxy(env, "--upstream", srv.url, "-m", "openai")
    assert p.returncode == 2 and "not allowed with argument" in p.stderr
    p = proxy(env, "--print-env", "--port", "0")
    assert p.returncode == 2 and "give --port P" in p.stderr


def test_a_taken_port_says_use_port(env: dict[str, str], srv: FakeServer) -> None:
    port = srv.url.rsplit(":", 1)[1]  # the fake server holds it
    p = proxy(env, "--port", port, "--", "true")
    assert p.returncode == 2, p.stderr
    assert "--port" in p.stderr and "Traceback" not in p.stderr


def test_print_env_prints_lines_for_eval(env: dict[str, str]) -> None:
    p = proxy(env, "--print-env", "--port", "9123")
    assert p.returncode == 0 and p.stderr == ""
    assert p.stdout.splitlines() == [
        "export ANTHROPIC_BASE_URL=http://127.0.0.1:9123",
        "export OPENAI_BASE_URL=http://127.0.0.1:9123/v1",
    ]
    shell = subprocess.run(
        ["sh", "-c", p.stdout + 'printf "%s %s" "$ANTHROPIC_BASE_URL" "$OPENAI_BASE_URL"'],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert shell.stdout == "http://127.0.0.1:9123 http://127.0.0.1:9123/v1"


def test_m_resolves_a_configured_provider_to_its_server(env: dict[str, str], srv: FakeServer, keyfile: Path) -> None:
    conf = Path(env["TTFT_CONFIG_DIR"]) / "config.toml"
    conf.write_text(f'[providers.fake]\nkind = "compat"\nbase_url = "{srv.openai_base_url}"\n')
    served = len(srv.generation_requests())
    p = proxy(env, "--port", "0", "-m", "fake:m", "--", sys.executable, "-c", OPENAI_PROGRAM, str(keyfile), "0")
    assert p.returncode == 0, p.stderr
    assert p.stdout == ANSWER + "\n"
    [request] = srv.generation_requests()[served:]
    assert request.path == "/v1/chat/completions"  # the configured /v1 base, not /v1/v1


def test_an_unreachable_upstream_is_the_calls_error_not_the_proxys(env: dict[str, str], tmp_path: Path) -> None:
    program = (
        "import openai, sys\n"
        "c = openai.OpenAI(api_key='sk-x', max_retries=0)\n"
        "try:\n    c.chat.completions.create(model='m', messages=[{'role': 'user', 'content': 'x'}])\n"
        "except openai.APIStatusError as e:\n    print(e.status_code); sys.exit(1)\n"
    )
    out = tmp_path / "run.json"
    p = proxy(
        env, "--port", "0", "--upstream", "http://127.0.0.1:9", "--json", str(out), "--", sys.executable, "-c", program
    )
    assert p.returncode == 1 and p.stdout == "502\n", p.stderr  # the proxy answered the app 502
    assert "ttft proxy: 1 call" in p.stderr and "errors: " in p.stderr and "Traceback" not in p.stderr
    [call] = json.loads(out.read_text())["calls"]
    assert call["status"] == "error" and call["error"]["type"]
