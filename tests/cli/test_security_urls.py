"""Secrets in the base URL and in configured headers are sent, never stored.

``--base-url http://user:PASSWORD@host/v1`` and ``?api-key=...`` through the real SDKs against
the loopback fake server: the credentials and query reach the server (the path stays clean),
and neither appears in the log, ``--json``, exports (even ``--redact``), errors or anything printed.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from ttft.backends.providers.anthropic_messages import AnthropicMessagesBackend
from ttft.backends.providers.openai_chat import OpenAIChatBackend
from ttft.backends.providers.openai_responses import OpenAIResponsesBackend
from ttft.telemetry.export.formats import export
from ttft.telemetry.log.urls import redact_url, split_query, url_secrets, without_masked

from tests.fakes import FakeServer, Schedule
from tests.support.backend_util import one_turn
from tests.support.security_util import env_fixture, log_lines, log_text, run_ttft  # noqa: F401


@pytest.fixture
def srv():
    with FakeServer(Schedule(first_token_ms=5, token_ms=1, visible_tokens=3)) as s:
        yield s


def test_redact_and_split_urls() -> None:
    url = "https://user:SECRETPW@host.example:8443/v1?api-key=QSECRET123&api-version=2024-06-01#frag"
    assert redact_url(url) == "https://***@host.example:8443/v1?api-key=***&api-version=***"
    assert redact_url(redact_url(url)) == redact_url(url)  # idempotent: safe to apply at every layer
    assert redact_url("http://127.0.0.1:8080/v1") == "http://127.0.0.1:8080/v1"
    assert redact_url("http://[::1") == "(an unreadable URL)"
    assert split_query(url) == (
        "https://user:SECRETPW@host.example:8443/v1",
        {"api-key": "QSECRET123", "api-version": "2024-06-01"},
    )
    assert {"SECRETPW", "user:SECRETPW", "QSECRET123"} <= set(url_secrets(url))
    # a short user name beside a password is masked in URLs, not as a word of every message ("one user")
    assert "user" not in url_secrets(url)
    assert "tok_1234567" in url_secrets("https://tok_1234567:x@h/v1")  # a long one may be the credential
    assert "abc" in url_secrets("https://abc@h/v1")  # alone, it is the credential
    assert without_masked(redact_url(url)) == "https://host.example:8443/v1"
    assert without_masked("http://h/v1?x=1") == "http://h/v1?x=1"


def test_url_password_is_used_but_never_stored_or_printed(srv: FakeServer, env: dict, tmp_path: Path) -> None:
    srv.schedule = Schedule(first_token_ms=5, token_ms=1, visible_tokens=3)
    port = srv.openai_base_url.split(":")[2].split("/")[0]
    url = f"http://user:SECRETPW@127.0.0.1:{port}/v1"
    p = run_ttft(env, "ask", "-m", "compat:fake-model", "--base-url", url, "--json", "hi")
    assert p.returncode == 0, p.stderr
    assert srv.requests[-1].headers.get("authorization", "").startswith("Basic ")  # the credentials went out
    assert json.loads(p.stdout)["base_url"] == f"http://***@127.0.0.1:{port}/v1"
    outputs = [p.stdout.decode(), p.stderr.decode(), log_text(env)]
    for fmt, redact in (("jsonl", False), ("csv", False), ("csv", True), ("jsonl", True), ("otel", False)):
        out = tmp_path / f"e-{fmt}-{redact}"
        e = run_ttft(env, "export", "-f", fmt, "-o", str(out), *(["--redact"] if redact else []))
        assert e.returncode == 0, e.stderr
        outputs.append(out.read_text(encoding="utf-8"))
    # nothing listening: the connect error names the address, without the password
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    p = run_ttft(env, "ask", "-m", "compat:m", "--base-url", f"http://user:SECRETPW@127.0.0.1:{closed}/v1", "hi")
    assert p.returncode == 1 and f"http://***@127.0.0.1:{closed}/v1" in p.stderr.decode()
    outputs += [p.stdout.decode(), p.stderr.decode(), log_text(env)]
    for text in outputs:
        assert "SECRETPW" not in text


def test_export_masks_urls_logged_before_masking(tmp_path: Path) -> None:
    rec = {"schema": "ttft.turn/1", "base_url": "http://u:SECRETPW@h/v1?api-key=QSECRET123", "answer": "x"}
    for fmt in ("jsonl", "csv"):
        export([rec], fmt, tmp_path / f"old.{fmt}", redact_text=True)
        text = (tmp_path / f"old.{fmt}").read_text()
        assert "SECRETPW" not in text and "QSECRET123" not in text and "http://***@h/v1?api-key=***" in text


def _backend(api: str, srv: FakeServer, query: str) -> Any:
    if api == "chat":
        return OpenAIChatBackend("fake-model", base_url=srv.openai_base_url + query, api_key="sk-test")
    if api == "responses":
        return OpenAIResponsesBackend("fake-model", base_url=srv.openai_base_url + query, api_key="k")
    return AnthropicMessagesBackend("fake-model", base_url=srv.url + query, api_key="k")


@pytest.mark.parametrize("api", ["chat", "responses", "anthropic"])
async def test_query_parameters_reach_the_server_and_their_values_are_never_logged(api: str, srv: FakeServer) -> None:
    srv.schedule = Schedule(first_token_ms=5, token_ms=1, visible_tokens=3)
    query = "?api-key=QSECRET123&api-version=2024-06-01"
    b = _backend(api, srv, query)
    d = await one_turn(b, max_retries=0)
    assert d["status"] == "ok", d["error"]
    req = srv.requests[-1]
    assert req.path.endswith(("/chat/completions", "/responses", "/messages"))  # the path stays clean
    assert req.query == {"api-key": "QSECRET123", "api-version": "2024-06-01"}
    assert d["base_url"].endswith("?api-key=***&api-version=***")
    # a server that echoes the value in an error gets it masked
    srv.schedule = Schedule(fail_status=401, fail_message="api-key QSECRET123 is not valid")
    d = await one_turn(b, max_retries=0)
    await b.aclose()
    assert d["status"] == "error" and "QSECRET123" not in json.dumps(d)


def test_ask_and_models_with_a_query(srv: FakeServer, env: dict) -> None:
    srv.schedule = Schedule(first_token_ms=5, token_ms=1, visible_tokens=3)
    url = srv.openai_base_url + "?api-key=QSECRET123&api-version=2024-06-01"
    p = run_ttft(env, "ask", "-m", "compat:fake-model", "--base-url", url, "--json", "hi")
    assert p.returncode == 0, p.stderr
    assert srv.requests[-1].path == "/v1/chat/completions" and srv.requests[-1].query["api-key"] == "QSECRET123"
    m = run_ttft(env, "models", "-m", "compat", "--base-url", url)
    assert m.returncode == 0 and m.stdout.split() == [b"fake-model", b"fake-reasoner"], m.stderr
    assert srv.requests[-1].query["api-version"] == "2024-06-01"
    for text in (p.stdout.decode(), p.stderr.decode(), m.stdout.decode(), m.stderr.decode(), log_text(env)):
        assert "QSECRET123" not in text and "2024-06-01" not in text


def test_configured_header_values_echoed_by_a_server_are_masked(srv: FakeServer, env: dict) -> None:
    Path(env["TTFT_CONFIG_DIR"], "config.toml").write_text(
        f'[providers.hdr]\nkind = "compat"\nbase_url = "{srv.openai_base_url}"\n'
        'headers = { "Authorization" = "Bearer HDR-SECRET-42", "api-key" = "AZ-SECRET-77" }\n'
    )
    srv.schedule = Schedule(
        fail_status=403, fail_message="token HDR-SECRET-42 (Bearer HDR-SECRET-42) and key AZ-SECRET-77 refused"
    )
    p = run_ttft(env, "ask", "-m", "hdr:fake-model", "--max-retries", "0", "--json", "hi")
    assert p.returncode == 1
    assert srv.requests[-1].headers["api-key"] == "AZ-SECRET-77"  # sent, as configured
    for text in (p.stdout.decode(), p.stderr.decode(), log_text(env)):
        assert "HDR-SECRET-42" not in text and "AZ-SECRET-77" not in text
    assert "refused" in json.loads(p.stdout)["error"]["message"]


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_the_sdk_s_base_url_variable_is_recorded_masked(api: str, srv: FakeServer, env: dict) -> None:
    """``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL`` (read by the SDKs) is the record's ``base_url``, masked
    as every base URL is: before issue 39 the turn went there and the log said ``base_url: null``."""
    srv.schedule = Schedule(first_token_ms=5, token_ms=1, visible_tokens=3)
    port = srv.url.rsplit(":", 1)[1].split("/")[0]
    base = f"http://user:SECRETPW@127.0.0.1:{port}" + ("/v1" if api == "openai" else "")
    var, spec = ("OPENAI", "openai:gpt-4o-mini") if api == "openai" else ("ANTHROPIC", "anthropic:claude-haiku-4-5")
    env = {**env, f"{var}_BASE_URL": base, f"{var}_API_KEY": "sk-test-not-real"}
    for sdk in ([], ["--sdk"]):
        p = run_ttft(env, "ask", "-m", spec, "--json", *sdk, "hi")
        assert p.returncode == 0, p.stderr
        shown = base.replace("user:SECRETPW@", "***@")
        assert json.loads(p.stdout)["base_url"] == shown
        assert log_lines(env)[-1]["base_url"] == shown
        assert srv.requests and "SECRETPW" not in p.stdout.decode() + p.stderr.decode() + log_text(env)
