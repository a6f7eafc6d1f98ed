"""The lean Responses and Messages readers (backends.providers.lean): no SDK, the same records as the SDK paths.

Each scenario runs once through the official SDK (openai for Responses, anthropic for Messages) and
once through the lean reader, each against a fresh loopback fake server, and every path must give
the same record: status, answer, reasoning, stop reason, tokens, chunks, tool calls, attempts,
the error's type, message and hint. Then what the readers send (URL, headers, key), how they retry,
and that ``ttft ask`` uses them by default and imports no SDK.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest
from ttft.backends.base import Backend

from tests.backends.providers.test_lean_equivalence import _error_words, _same, _stalled
from tests.fakes import FakeServer, Schedule
from tests.support.backend_util import backend_for, one_turn
from tests.support.paths import ROOT

APIS = ("responses", "messages")
CLIENTS = ("httpx2", "aiohttp", "proto")  # ttft ask's client, and the bench's two
TOOLS = (("get_weather", '{"city": "Paris", "unit": "c"}'), ("get_time", '{"tz": "Europe/Paris"}'))


@pytest.fixture(autouse=True)
def _data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))


def lean_for(api: str, srv: Any, client: str = "httpx2", **kw: Any) -> Backend:
    from ttft.backends.providers.lean.messages import LeanMessagesBackend
    from ttft.backends.providers.lean.responses import LeanResponsesBackend

    key = kw.pop("api_key", "k")
    b: Any
    if api == "responses":
        b = LeanResponsesBackend("fake-model", base_url=srv.openai_base_url, api_key=key, **kw)
    else:
        b = LeanMessagesBackend("fake-model", base_url=srv.url, api_key=key, **kw)
    if client != "httpx2":
        b.use_aiohttp(client)
    return b


async def _both(
    api: str, schedule: Schedule, client: str = "httpx2", backend_kw: dict[str, Any] | None = None, **settings: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One turn through the SDK, then one through the lean reader, each against a fresh server."""
    out = []
    kw = backend_kw or {}
    for make in (lambda s: backend_for(api, s, **kw), lambda s: lean_for(api, s, client, **kw)):
        with FakeServer(schedule) as srv:
            b = make(srv)
            try:
                out.append(await one_turn(b, **settings))
            finally:
                await b.aclose()  # type: ignore[attr-defined]
    return out[0], out[1]


COMMON: dict[str, tuple[Schedule, dict[str, Any]]] = {
    "plain": (Schedule(visible_tokens=5), {}),
    "two_per_chunk": (Schedule(visible_tokens=7, tokens_per_chunk=2), {}),
    "cached": (Schedule(visible_tokens=3, input_tokens=40, cached_tokens=32), {}),
    "no_usage": (Schedule(visible_tokens=3, usage=False), {}),
    "error_mid_stream": (Schedule(visible_tokens=6, error_after=2), {}),
    "malformed": (Schedule(visible_tokens=6, malformed_after=2), {}),
    "dropped": (Schedule(visible_tokens=6, drop_after=2), {}),
    "no_end": (Schedule(visible_tokens=3, no_done=True), {}),
    "tool_calls": (Schedule(visible_tokens=2, tool_calls=TOOLS), {}),
    "tool_call_only": (Schedule(visible_tokens=0, tool_calls=TOOLS[:1]), {}),
    "http_400": (Schedule(fail_status=400, fail_message="max_tokens: too large"), {}),
    "http_401": (Schedule(fail_status=401), {}),
    "http_404": (Schedule(fail_status=404), {"max_retries": 0}),
    "http_500": (Schedule(fail_status=500), {"max_retries": 0}),
    "http_500_then_ok": (Schedule(fail_status=500, fail_times=1, visible_tokens=3), {"max_retries": 2}),
    "http_429_then_ok": (
        Schedule(fail_status=429, fail_times=1, retry_after=0.05, visible_tokens=3),
        {"max_retries": 2},
    ),
    "not_streamed": (Schedule(visible_tokens=4), {"stream": False}),
    "not_streamed_tools": (Schedule(visible_tokens=2, tool_calls=TOOLS), {"stream": False}),
}
PER_API: dict[str, dict[str, tuple[Schedule, dict[str, Any]]]] = {
    "responses": {
        "reasoning": (Schedule(reasoning_tokens=3, visible_tokens=4), {}),
        "reasoning_hidden": (Schedule(reasoning_tokens=3, visible_tokens=4, reasoning="hidden"), {}),
        "incomplete": (Schedule(visible_tokens=3, stop_reason="incomplete"), {}),
        "not_streamed_reasoning": (Schedule(reasoning_tokens=2, visible_tokens=3), {"stream": False}),
    },
    "messages": {
        "thinking": (Schedule(reasoning_tokens=3, visible_tokens=4, reasoning="thinking"), {}),
        "thinking_omitted": (Schedule(reasoning_tokens=3, visible_tokens=4, reasoning="omitted"), {}),
        "thinking_redacted": (Schedule(reasoning_tokens=3, visible_tokens=4, reasoning="redacted"), {}),
        "max_tokens": (Schedule(visible_tokens=3, stop_reason="max_tokens"), {}),
        "http_529_then_ok": (Schedule(fail_status=529, fail_times=1, visible_tokens=3), {"max_retries": 2}),
        "not_streamed_reasoning": (
            Schedule(reasoning_tokens=2, visible_tokens=3, reasoning="thinking"),
            {"stream": False},
        ),
    },
}
CASES = [(api, name) for api in APIS for name in [*COMMON, *PER_API[api]]]


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize(("api", "name"), CASES)
async def test_lean_reader_records_what_the_sdk_path_records(api: str, name: str, client: str) -> None:
    schedule, settings = COMMON[name] if name in COMMON else PER_API[api][name]
    settings = {"stream": True, "max_retries": 0, **settings}
    sdk, lean = await _both(api, schedule, client, **settings)
    assert _same(lean) == _same(sdk)
    assert len(lean["chunks"]) == len(sdk["chunks"])
    assert _error_words(lean) == _error_words(sdk)
    assert lean["api"] == sdk["api"] and lean["provider"] == sdk["provider"]
    if name.endswith("then_ok"):
        assert lean["status"] == "ok" and lean["attempts"] == sdk["attempts"] == 2
        # the server's retry-after (50 ms) is honoured; without one, the SDK's backoff (0.5 s less <= 25 %)
        waited = [d["metrics"]["retry_ms"] for d in (sdk, lean)]
        assert all(w < 300 for w in waited) if name == "http_429_then_ok" else all(w >= 370 for w in waited)


@pytest.mark.parametrize("api", APIS)
async def test_tool_calls_are_recorded_one_per_call_on_both_paths(api: str) -> None:
    sdk, lean = await _both(api, Schedule(visible_tokens=2, tool_calls=TOOLS), stream=True, max_retries=0)
    want = [{"name": n, "arguments": a} for n, a in TOOLS]
    assert sdk["tool_calls"] == lean["tool_calls"] == want
    assert sdk["answer"] == lean["answer"] == "w00 w01 "
    stop = {"responses": "completed", "messages": "tool_use"}[api]
    assert sdk["stop_reason"] == lean["stop_reason"] == stop
    # each piece of a call is a token-bearing chunk: the visible text's 2, then the calls'
    pieces = len(Schedule(tool_calls=TOOLS).tool_chunks())
    assert [c["kind"] for c in lean["chunks"]] == ["text"] * 2 + ["tool"] * pieces


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("api", APIS)
async def test_lean_reader_on_a_stalled_stream_times_out_as_the_sdk_does(api: str, client: str) -> None:
    sdk, lean = await _both(
        api,
        Schedule(visible_tokens=6, stall_after=2, stall_s=3),
        client,
        {"timeout_s": 0.5},
        stream=True,
        max_retries=0,
    )
    assert lean["error"]["type"] == "timeout" and lean["answer"] == "w00 w01 "
    assert _same(lean) == _same(sdk) and _stalled(lean) and _stalled(sdk)


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("api", APIS)
async def test_lean_reader_on_a_refused_connection_retries_and_fails_as_the_sdk_does(api: str, client: str) -> None:
    from ttft.backends.providers.anthropic_messages import AnthropicMessagesBackend
    from ttft.backends.providers.lean.messages import LeanMessagesBackend
    from ttft.backends.providers.lean.responses import LeanResponsesBackend
    from ttft.backends.providers.openai_responses import OpenAIResponsesBackend

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}" + ("/v1" if api == "responses" else "")
    classes: tuple[Any, ...] = (
        (OpenAIResponsesBackend, LeanResponsesBackend)
        if api == "responses"
        else (AnthropicMessagesBackend, LeanMessagesBackend)
    )
    recs = []
    for cls in classes:
        b = cls("m", base_url=url, api_key="k")
        if cls in (LeanResponsesBackend, LeanMessagesBackend) and client != "httpx2":
            b.use_aiohttp(client)
        try:
            recs.append(await one_turn(b, stream=True, max_retries=1))
        finally:
            await b.aclose()
    sdk, lean = recs
    assert lean["error"]["type"] == "connection_refused"
    assert _same(lean) == _same(sdk) and lean["attempts"] == 2
    assert lean["error"]["message"] == sdk["error"]["message"]


@pytest.mark.parametrize("api", APIS)
async def test_lean_readers_send_what_the_sdks_send(api: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same path, query, body and headers that matter as the SDK's request; the probe header never."""
    from ttft.backends.providers.anthropic_messages import AnthropicMessagesBackend
    from ttft.backends.providers.lean.messages import LeanMessagesBackend
    from ttft.backends.providers.lean.responses import LeanResponsesBackend
    from ttft.backends.providers.openai_responses import OpenAIResponsesBackend

    monkeypatch.setenv("ANTHROPIC_CUSTOM_HEADERS", "X-Team: latency\nX-Empty:")
    settings = {"stream": True, "max_output_tokens": 64, "temperature": 0.5, "reasoning_effort": "low"}
    classes: tuple[Any, ...] = (
        (OpenAIResponsesBackend, LeanResponsesBackend)
        if api == "responses"
        else (AnthropicMessagesBackend, LeanMessagesBackend)
    )
    seen = []
    for cls in classes:
        with FakeServer(Schedule(visible_tokens=2)) as srv:
            base = srv.openai_base_url if api == "responses" else srv.url
            b = cls("fake-model", base_url=base + "?tenant=t1", api_key="sk-lean-test-123", headers={"X-Extra": "1"})
            try:
                d = await one_turn(b, **settings)
            finally:
                await b.aclose()
            assert d["status"] == "ok", d["error"]
            seen.append(srv.generation_requests()[-1])
    sdk, lean = seen
    assert lean.path == sdk.path == ("/v1/responses" if api == "responses" else "/v1/messages")
    assert lean.query == sdk.query == {"tenant": "t1"}
    assert lean.body == sdk.body
    for h in ("authorization", "x-extra", "anthropic-version", "content-type", "x-team", "x-api-key"):
        assert lean.headers.get(h) == sdk.headers.get(h), h
    assert lean.headers["authorization"] == "Bearer sk-lean-test-123"
    assert "x-ttft-probe" not in lean.headers and "x-ttft-probe" not in sdk.headers
    if api == "messages":
        assert lean.headers["x-team"] == "latency"


@pytest.mark.parametrize("api", APIS)
async def test_lean_readers_send_no_key_when_there_is_none(api: str) -> None:
    with FakeServer(Schedule(visible_tokens=2)) as srv:
        b = lean_for(api, srv, api_key=None)
        try:
            d = await one_turn(b, stream=True)
        finally:
            await b.aclose()  # type: ignore[attr-defined]
    assert d["status"] == "ok"
    headers = srv.generation_requests()[-1].headers
    assert "authorization" not in headers and "x-api-key" not in headers


def test_lean_urls_join_as_the_sdks_do(monkeypatch: pytest.MonkeyPatch) -> None:
    import anthropic._constants
    from ttft.backends.providers.lean.messages import ANTHROPIC_VERSION, messages_url
    from ttft.backends.providers.lean.responses import responses_url

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    assert responses_url("http://h:1/v1") == responses_url("http://h:1/v1/") == "http://h:1/v1/responses"
    assert responses_url(None) == "https://api.openai.com/v1/responses"
    assert messages_url("http://h:1") == messages_url("http://h:1/") == "http://h:1/v1/messages"
    assert messages_url(None) == "https://api.anthropic.com/v1/messages"
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://proxy:2/anthropic")
    assert messages_url(None) == "http://proxy:2/anthropic/v1/messages"
    assert ANTHROPIC_VERSION == anthropic._constants.ANTHROPIC_API_VERSION  # what the SDK here sends


def test_anthropic_backoff_follows_its_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Anthropic's SDK honours any retry-after and never refuses a retry for it; OpenAI's stops at 120 s."""
    from ttft.backends.providers.lean.retry import ANTHROPIC, OPENAI

    monkeypatch.setattr("random.random", lambda: 1.0)  # the most jitter: 25 % off
    assert [ANTHROPIC.delay_s(n, None) for n in (0, 1, 2, 5)] == [0.375, 0.75, 1.5, 6.0]
    long_wait = httpx2.Headers({"retry-after": "900"})
    assert ANTHROPIC.delay_s(0, long_wait) == 900.0 and OPENAI.delay_s(0, long_wait) == 0.375
    assert ANTHROPIC.delay_s(0, httpx2.Headers({"retry-after-ms": "40"})) == pytest.approx(0.04)
    assert ANTHROPIC.delay_s(0, httpx2.Headers({"retry-after": "1e12"})) == 4_294_967.0

    def resp(status: int, **h: str) -> httpx2.Response:
        return httpx2.Response(status, headers=h)

    statuses = (400, 401, 408, 409, 429, 500, 529)
    assert [ANTHROPIC.should_retry(resp(s)) for s in statuses] == [0, 0, 1, 1, 1, 1, 1]
    assert ANTHROPIC.should_retry(resp(429, **{"retry-after": "900"}))
    assert not OPENAI.should_retry(resp(429, **{"retry-after": "900"}))
    assert not ANTHROPIC.should_retry(resp(529, **{"x-should-retry": "false"}))


def test_anthropic_status_errors_carry_the_sdk_body_and_class_names() -> None:
    from ttft.backends.providers.lean import sdk_errors as lean

    body = b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_1"}'
    resp = httpx2.Response(
        529, content=body, headers={"request-id": "req_1"}, request=httpx2.Request("POST", "http://x/v1/messages")
    )
    e = lean.anthropic_status_error(resp)
    assert type(e).__name__ == "OverloadedError" and isinstance(e, lean.InternalServerError)
    assert e.body == json.loads(body) and e.status_code == 529 and e.request_id == "req_1"
    assert str(e) == f"Error code: 529 - {json.loads(body)}"
    plain = lean.anthropic_status_error(httpx2.Response(502, content=b"bad gateway", request=resp.request))
    assert str(plain) == "bad gateway" and plain.body == "bad gateway"


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("api", APIS)
async def test_lean_readers_split_the_wait_as_the_sdk_paths_do(api: str, client: str) -> None:
    """A new connection, then a reused one: the same ``http`` facts and the same phases of the wait."""

    def facts(d: dict[str, Any]) -> tuple[Any, ...]:
        wait = d["metrics"]["wait_ms"]
        return d["http"]["connection"], d["http"]["http_version"], sorted(k for k, v in wait.items() if v > 0)

    out = []
    with FakeServer(Schedule(visible_tokens=3)) as srv:
        for b in (backend_for(api, srv), lean_for(api, srv, client)):
            try:
                out.append([await one_turn(b, stream=True) for _ in range(2)])
            finally:
                await b.aclose()  # type: ignore[attr-defined]
    sdk, lean = out
    assert [facts(d) for d in lean] == [facts(d) for d in sdk]
    assert facts(lean[0])[0] == "new" and facts(lean[1])[0] == "reused"
    for d in lean:  # the phases tile the wait
        assert sum(d["metrics"]["wait_ms"].values()) == pytest.approx(d["metrics"]["ttft_ms"], abs=0.01)


def test_ask_gets_the_lean_readers_and_sdk_is_one_flag_away() -> None:
    from ttft.backends.providers.anthropic_messages import AnthropicMessagesBackend
    from ttft.backends.providers.lean.messages import LeanMessagesBackend
    from ttft.backends.providers.lean.responses import LeanResponsesBackend
    from ttft.backends.providers.openai_responses import OpenAIResponsesBackend
    from ttft.backends.providers.registry import create_backend

    assert type(create_backend("openai-responses:m", api_key="sk-x", lean=True)) is LeanResponsesBackend
    assert type(create_backend("anthropic:m", api_key="sk-x", lean=True)) is LeanMessagesBackend
    assert type(create_backend("openai-responses:m", api_key="sk-x")) is OpenAIResponsesBackend  # chat, compare
    assert type(create_backend("anthropic:m", api_key="sk-x")) is AnthropicMessagesBackend


ASK = """
import json, sys
from tests.fakes import FakeServer, Schedule
api = sys.argv[1]
with FakeServer(Schedule(first_token_ms=5, token_ms=1, visible_tokens=2)) as srv:
    from ttft.tui.cli import main
    spec, url = ("openai-responses:x", srv.openai_base_url) if api == "responses" else ("anthropic:x", srv.url)
    rc = main(["ask", "-m", spec, "--base-url", url, "--json", "hi", *sys.argv[2:]])
print(json.dumps({"rc": rc, "loaded": sorted(m for m in ("anthropic", "openai", "textual") if m in sys.modules)}))
"""


@pytest.mark.parametrize(
    ("api", "flags", "loaded"),
    [
        ("responses", (), []),
        ("messages", (), []),
        ("responses", ("--sdk",), ["openai"]),
        ("messages", ("--sdk",), ["anthropic"]),
    ],
)
def test_ask_on_responses_and_messages_imports_no_sdk(
    api: str, flags: tuple[str, ...], loaded: list[str], tmp_path: Path
) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": "sk-x", "ANTHROPIC_API_KEY": "sk-x"}
    env["TTFT_DATA_DIR"] = str(tmp_path / "data")
    proc = subprocess.run(
        [sys.executable, "-c", ASK, api, *flags], env=env, capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"rc": 0, "loaded": loaded}
    record = json.loads(proc.stdout[proc.stdout.index("{") : proc.stdout.rindex("}\n{") + 1])
    assert record["status"] == "ok" and record["answer"] == "w00 w01 "


def test_named_sse_events_on_any_byte_boundary() -> None:
    import random

    from ttft.backends.providers.lean.sse import SSESplitter

    wire = (
        b'event: message_start\ndata: {"a":1}\n\n'
        b": keepalive\n\n"
        b"event: ping\r\ndata: {}\r\n\r\n"
        b'data: {"no":"name"}\n\n'
        b"event: content_block_delta\ndata: [1,\ndata: 2]\n\n"
        b"event:message_stop\n\n"
        b"id: 7\n\n"
        b'event: error\ndata: {"e":1}\r\r'
        b"event: tail-without-blank-line"
    )
    want = [
        (b"message_start", b'{"a":1}'),
        (b"ping", b"{}"),
        (None, b'{"no":"name"}'),
        (b"content_block_delta", b"[1,\n2]"),
        (b"message_stop", b""),
        (None, b""),
        (b"error", b'{"e":1}'),
    ]
    for seed in range(300):
        r = random.Random(seed)
        cuts = sorted(r.sample(range(1, len(wire)), r.randint(0, 12)))
        split = SSESplitter()
        got = [e for a, b in zip([0, *cuts], [*cuts, len(wire)], strict=True) for e in split.feed_named(wire[a:b])]
        assert got == want, cuts
