"""Issue 23, item 9: keys and base URLs with a flaw fail clearly before anything is sent, and a key is
masked by its value wherever an error's text is kept or shown.

Each through the real command line against the loopback fake server: a key saved with CRLF, one
with a line break inside, a ``file://`` base URL, and a short key no pattern would recognise that
the server echoes back in its error.
"""

from __future__ import annotations

import json

import pytest

from tests.fakes import FakeServer, Schedule
from tests.support.security_util import env_fixture, log_lines, log_text, run_ttft  # noqa: F401


@pytest.fixture
def srv():
    with FakeServer(Schedule(first_token_ms=5, token_ms=1, visible_tokens=3)) as s:
        yield s


def test_a_key_saved_with_crlf_is_sent_without_it_and_that_is_said_once(srv: FakeServer, env: dict) -> None:
    env = {**env, "OPENAI_API_KEY": "sk-crlf-KEY0123456789\r\n"}
    p = run_ttft(env, "ask", "-m", "openai:fake-model", "--base-url", srv.openai_base_url, "--json", "hi")
    assert p.returncode == 0, p.stderr
    assert srv.requests[-1].headers["authorization"] == "Bearer sk-crlf-KEY0123456789"
    err = p.stderr.decode()
    assert err.count("OPENAI_API_KEY ends with a line break; it was sent without it.") == 1
    assert "KEY0123456789" not in err + p.stdout.decode() + log_text(env)


def test_a_line_break_inside_a_key_is_refused_before_sending(srv: FakeServer, env: dict) -> None:
    env = {**env, "OPENAI_API_KEY": "sk-part-ONE0123\r\nsk-part-TWO4567"}
    p = run_ttft(env, "ask", "-m", "openai:fake-model", "--base-url", srv.openai_base_url, "hi")
    assert p.returncode == 1
    assert srv.generation_requests() == []  # nothing went out
    lines = p.stderr.decode().splitlines()
    assert len(lines) == 1 and "OPENAI_API_KEY" in lines[0] and "line break inside it" in lines[0]
    assert "proxy" not in lines[0] and "connection" not in lines[0]
    (rec,) = log_lines(env)
    assert rec["error"]["type"] == "bad_key"
    for text in (p.stderr.decode(), log_text(env)):
        assert "ONE0123" not in text and "TWO4567" not in text


@pytest.mark.parametrize("url", ["file:///etc/passwd", "localhost:8080/v1", "http://"])
def test_a_base_url_that_is_not_http_is_one_line_and_exit_2(env: dict, url: str) -> None:
    env = {**env, "OPENAI_API_KEY": "sk-x"}
    p = run_ttft(env, "ask", "-m", "openai:m", "--base-url", url, "hi")
    assert p.returncode == 2, p.stderr
    lines = p.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: --base-url {url} ")
    assert "retry" not in lines[0] and "proxy" not in lines[0]
    (rec,) = log_lines(env)
    assert rec["error"]["type"] == "bad_url" and rec["attempts"] == 0


def test_other_commands_refuse_it_the_same_way(env: dict) -> None:
    env = {**env, "OPENAI_BASE_URL": "file:///tmp/x"}
    m = run_ttft(env, "models", "-m", "openai")
    assert m.returncode == 2
    assert "OPENAI_BASE_URL file:///tmp/x is not an http:// or https:// address" in m.stderr.decode()
    c = run_ttft(env, "compare", "-m", "compat:a", "-m", "compat:b", "--base-url", "ftp://h/v1", "--headless", "hi")
    assert c.returncode == 2 and "ftp://" in c.stderr.decode(), c.stderr


@pytest.mark.parametrize("key", ["k3y", "Zq.9", "x_7"])
def test_a_short_unusual_key_echoed_by_the_server_never_reaches_the_log(srv: FakeServer, env: dict, key: str) -> None:
    """No ``sk-`` prefix and a few characters: the pattern masking of before wrote these in full."""
    srv.schedule = Schedule(fail_status=401, fail_message=f"Incorrect API key provided: {key}. Check {key}!")
    env = {**env, "OPENAI_API_KEY": key}
    p = run_ttft(env, "ask", "-m", "openai:fake-model", "--base-url", srv.openai_base_url, "--json", "hi")
    assert p.returncode == 1
    assert srv.requests[-1].headers["authorization"] == f"Bearer {key}"  # it was sent: the server saw it
    record = json.loads(p.stdout)
    assert record["error"]["type"] == "auth" and "Incorrect API key provided: ***" in record["error"]["message"]
    for text in (p.stdout.decode(), p.stderr.decode(), log_text(env)):
        assert key not in text
