"""The load driver's raw Chat Completions path gives the same record as the SDK's typed path."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import pytest
from ttft.backends.load.runner import BackendSpec, build_backend

from tests.fakes import FakeServer, Schedule
from tests.fakes.batching_server import BatchingServer
from tests.support.backend_util import backend_for, one_turn


@pytest.fixture(autouse=True)
def _data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))


def _same(d: dict[str, Any]) -> dict[str, Any]:
    """What must not depend on the path: everything but times."""
    return {
        "status": d["status"],
        "answer": d["answer"],
        "reasoning": d["reasoning"],
        "stop_reason": d["stop_reason"],
        "error": (d.get("error") or {}).get("type"),
        "tokens": d["tokens"],
        "chunks": [c[1:] if isinstance(c, list) else {k: v for k, v in c.items() if k != "t_ms"} for c in d["chunks"]],
        "server": d.get("server"),
        "notices": d.get("notices"),
        "attempts": d["attempts"],
        "tool_calls": d.get("tool_calls"),
    }


SCHEDULES = {
    "reasoning_content": Schedule(reasoning_tokens=3, visible_tokens=5),
    "reasoning_field": Schedule(reasoning_tokens=2, visible_tokens=4, reasoning="reasoning"),
    "think_split": Schedule(reasoning_tokens=3, visible_tokens=4, reasoning="think", think_tag_split=True),
    "two_per_chunk": Schedule(visible_tokens=7, tokens_per_chunk=2),
    "llama_timings": Schedule(visible_tokens=4, timings="llama"),
    "ollama": Schedule(visible_tokens=4, timings="ollama"),
    "error_mid_stream": Schedule(visible_tokens=6, error_after=2),
    "malformed": Schedule(visible_tokens=6, malformed_after=2),
    "dropped": Schedule(visible_tokens=6, drop_after=2),
    "no_done": Schedule(visible_tokens=3, no_done=True),
    "no_stream_options": Schedule(visible_tokens=3, reject_stream_options=True),
    "http_500": Schedule(fail_status=500),
    "tool_calls": Schedule(visible_tokens=2, tool_calls=(("get_weather", '{"city": "Paris"}'), ("now", "{}"))),
    "tool_call_only": Schedule(visible_tokens=0, tool_calls=(("get_weather", '{"city": "Paris", "days": 3}'),)),
}


@pytest.mark.parametrize("name", list(SCHEDULES))
async def test_raw_path_records_what_the_sdk_path_records(name: str) -> None:
    with FakeServer(SCHEDULES[name]) as srv:
        out = []
        for raw in (False, True):
            b = backend_for("compat", srv)
            b.raw_stream = raw
            try:
                out.append(await one_turn(b, stream=True, max_retries=0))
            finally:
                await b.aclose()
    sdk, raw_rec = out
    assert _same(raw_rec) == _same(sdk)
    assert len(raw_rec["chunks"]) == len(sdk["chunks"])


async def test_raw_path_stamps_bytes_on_arrival_and_reuses_connections() -> None:
    with BatchingServer(slots=4, token_ms=20, alpha=0, prefill_ms=30, timings=True) as srv:
        backend = build_backend(BackendSpec("compat:batching-fake", srv.base_url, raw_stream=True), pool=8)
        assert getattr(backend, "raw_stream", False)
        seen: list[Any] = []
        orig = backend._translate  # type: ignore[attr-defined]

        def spy(item: Any, t: int, state: Any) -> Any:
            seen.append(type(item))
            return orig(item, t, state)

        backend._translate = spy  # type: ignore[attr-defined]
        try:
            first = await one_turn(backend, stream=True, max_output_tokens=10)
            second = await one_turn(backend, stream=True, max_output_tokens=10)
        finally:
            await backend.aclose()
    assert seen and set(seen) == {dict}
    for d in (first, second):
        assert d["status"] == "ok" and d["tokens"]["source"] == "usage" and d["tokens"]["output"] == 10
        assert d["answer"] == "".join(f"w{i:02d} " for i in range(10))
        assert 25 <= d["metrics"]["ttft_ms"] < 500
        assert 5 <= d["metrics"]["tpot_ms"] < 100  # truth 20: per arrival; per batch would be ~0 (wide: loaded CI)
        assert "llama-server" in d["server"]


async def test_chat_keeps_the_sdk_path_by_default() -> None:
    with FakeServer(Schedule(visible_tokens=3)) as srv:
        b = backend_for("chat", srv)
        try:
            assert b.raw_stream is False
            d = await one_turn(b, stream=True)
        finally:
            await b.aclose()
    assert d["status"] == "ok" and d["answer"] == "w00 w01 w02 "


@pytest.mark.parametrize("flag", ["--raw-stream", "--lean", "--sdk", "--aiohttp", None])
def test_bench_cli_raw_stream_matches_the_truth(tmp_path: Path, flag: str | None) -> None:
    from ttft.tui.cli import main

    out = tmp_path / "run"
    with BatchingServer(slots=8, token_ms=20, alpha=0, prefill_ms=20) as srv:
        rc = main(
            [
                "bench", "-m", "compat:batching-fake", "--base-url", srv.base_url, "--concurrency", "4",
                "--requests", "8", "--warmup", "1", "--max-output-tokens", "8", "--out", str(out), "--quiet",
                *([flag] if flag else []),
            ]
        )  # fmt: skip
    assert rc == 0
    turns = [json.loads(line) for line in (out / "turns.jsonl").read_text().splitlines()]
    assert len(turns) == 9 and all(t["status"] == "ok" for t in turns)
    assert all(t["tokens"]["output"] == 8 and t["tokens"]["source"] == "usage" for t in turns)
    assert all(5 <= t["metrics"]["tpot_ms"] < 100 for t in turns)  # truth 20; wide: loaded CI
    summary = json.loads((out / "summary.json").read_text())
    readers = {"--raw-stream": "sdk (raw stream)", "--sdk": "sdk", "--aiohttp": "lean (orjson, aiohttp)"}
    want = readers.get(flag or "", "lean (orjson, httptools)")
    assert summary["reader"] == want  # the lean reader is the default; the SDK one flag away
    assert summary["lean"] is (want.startswith("lean")) and summary["raw_stream"] is (flag == "--raw-stream")


def test_think_splitter_fast_path_matches_the_general_path() -> None:
    import random

    from ttft.backends.think import ThinkSplitter

    pieces = ["a", "b c", "<", "<t", "<think>", "</think>", "</th", "ink>", "x<y", "  "]
    for seed in range(2000):
        r = random.Random(seed)
        text = "".join(r.choice(pieces) for _ in range(r.randint(0, 12)))
        cuts = sorted(r.sample(range(len(text) + 1), min(len(text) + 1, r.randint(0, 5))))
        parts = [text[i:j] for i, j in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        inside = r.random() < 0.3
        fast, general = ThinkSplitter(inside=inside), ThinkSplitter(inside=inside)
        general._lead = None  # never takes the shortcut
        got = [x for p in parts for x in fast.feed(p)] + fast.flush()
        want = [x for p in parts for x in general.feed(p)] + general.flush()
        assert got == want, parts


# --- the lean path (backends.providers.lean.chat): no SDK, the same records ------------------------------
# The lean reader's HTTP clients: ttft ask's (httpx2), and the Protocol + httptools transport that the bench and
# the chat's backend process read with (aiohttp where httptools is not installed).
CLIENTS = ("httpx2", "aiohttp", "proto")


def lean_for(srv: Any, client: str = "httpx2", **kw: Any) -> Any:
    from ttft.backends.providers.lean.chat import LeanChatBackend

    b = LeanChatBackend("fake-model", provider="compat", base_url=srv.openai_base_url, compat=True, **kw)
    if client != "httpx2":
        b.use_aiohttp(client)
    return b


async def _both(
    schedule: Schedule, backend_kw: dict[str, Any] | None = None, client: str = "httpx2", **settings: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One turn on the SDK path, then one on the lean path, each against a fresh server (so a
    schedule's "first K attempts fail" counts from 0 for each)."""
    out = []
    kw = backend_kw or {}
    for make in (lambda s: backend_for("compat", s, **kw), lambda s: lean_for(s, client, **kw)):
        with FakeServer(schedule) as srv:
            b = make(srv)
            try:
                out.append(await one_turn(b, **settings))
            finally:
                await b.aclose()
    return out[0], out[1]


def _error_words(d: dict[str, Any]) -> tuple[str | None, str | None]:
    """The error's message (each server's port masked) and hint."""
    err = d.get("error") or {}
    msg = err.get("message")
    return (re.sub(r"127\.0\.0\.1:\d+", "HOST", msg) if msg else None), err.get("hint")


LEAN_EXTRA = {
    "http_401": (Schedule(fail_status=401), {}),
    "http_429_then_ok": (Schedule(fail_status=429, fail_times=1, retry_after=0.05, visible_tokens=3), {}),
    "http_500_then_ok": (Schedule(fail_status=500, fail_times=1, visible_tokens=3), {}),
    "http_404": (Schedule(fail_status=404), {"max_retries": 0}),
    "not_streamed": (Schedule(visible_tokens=4), {"stream": False}),
    "not_streamed_think": (Schedule(reasoning_tokens=2, visible_tokens=3, reasoning="think"), {"stream": False}),
    "not_streamed_tools": (Schedule(visible_tokens=0, tool_calls=(("f", '{"a": 1}'), ("g", "{}"))), {"stream": False}),
}


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("name", [*SCHEDULES, *LEAN_EXTRA])
async def test_lean_path_records_what_the_sdk_path_records(name: str, client: str) -> None:
    schedule, settings = (SCHEDULES[name], {}) if name in SCHEDULES else LEAN_EXTRA[name]
    settings = {"stream": True, "max_retries": 0 if name in SCHEDULES else 2, **settings}
    sdk, lean = await _both(schedule, client=client, **settings)
    assert _same(lean) == _same(sdk)
    assert len(lean["chunks"]) == len(sdk["chunks"])
    assert _error_words(lean) == _error_words(sdk)
    if name.endswith("then_ok"):
        assert lean["status"] == "ok" and lean["attempts"] == sdk["attempts"] == 2
        # the server's retry-after (50 ms) is honoured; without one, the SDK's backoff (0.5 s less <= 25 %)
        waited = [d["metrics"]["retry_ms"] for d in (sdk, lean)]
        assert all(w < 300 for w in waited) if name == "http_429_then_ok" else all(w >= 370 for w in waited)


async def test_chat_tool_calls_are_one_record_entry_per_call_with_their_finish_reason() -> None:
    calls = (("get_weather", '{"city": "Paris", "unit": "c"}'), ("now", "{}"))
    sdk, lean = await _both(Schedule(visible_tokens=0, tool_calls=calls), stream=True, max_retries=0)
    for d in (sdk, lean):
        assert d["status"] == "ok" and d["answer"] == ""
        assert d["tool_calls"] == [{"name": n, "arguments": a} for n, a in calls]
        assert d["stop_reason"] == "tool_calls"
        assert d["metrics"]["ttft_ms"] is not None  # a tool-call delta is a token (metrics.md)


@pytest.mark.parametrize("client", CLIENTS)
async def test_lean_path_on_a_stalled_stream_times_out_as_the_sdk_does(client: str) -> None:
    sdk, lean = await _both(
        Schedule(visible_tokens=6, stall_after=2, stall_s=3), {"timeout_s": 0.5}, client, stream=True, max_retries=0
    )
    assert lean["error"]["type"] == "timeout" and lean["answer"] == "w00 w01 "
    assert _same(lean) == _same(sdk) and _stalled(lean) and _stalled(sdk)


def _stalled(d: dict[str, Any]) -> bool:
    """Whether the turn says it stalled mid-answer, by either of the two clocks that watch for it.

    The token-idle clock and an HTTP client's read timeout both run ``timeout_s`` from the last
    chunk; which fires first is a race (uvloop's timers count whole milliseconds), so either message
    is the right one: no new token, or nothing at all from the server."""
    msg, hint = _error_words(d)
    return bool(msg and hint) and msg.startswith(
        (
            "No new token for 0.5 s in the middle of the answer",  # the token-idle clock
            "The server sent nothing for 0.5 s in the middle of the answer",  # the HTTP read timeout
        )
    )


def test_only_an_opt_in_gets_the_lean_path() -> None:
    from ttft.backends.providers.lean.chat import LeanChatBackend
    from ttft.backends.providers.openai_chat import OpenAIChatBackend
    from ttft.backends.providers.registry import create_backend

    url = "http://127.0.0.1:9/v1"
    assert type(create_backend("compat:m", base_url=url)) is OpenAIChatBackend  # chat, bench, compare
    assert type(create_backend("compat:m", base_url=url, lean=True)) is LeanChatBackend  # ask
    assert type(create_backend("openai:m", api_key="sk-x", lean=True)) is LeanChatBackend


@pytest.mark.parametrize("client", CLIENTS)
async def test_lean_path_on_a_refused_connection_retries_and_fails_as_the_sdk_does(client: str) -> None:
    import socket

    from ttft.backends.providers.lean.chat import LeanChatBackend
    from ttft.backends.providers.openai_chat import OpenAIChatBackend

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    recs = []
    for cls in (OpenAIChatBackend, LeanChatBackend):
        b = cls("m", provider="compat", base_url=url, compat=True)
        if cls is LeanChatBackend and client != "httpx2":
            b.use_aiohttp(client)
        try:
            recs.append(await one_turn(b, stream=True, max_retries=1))
        finally:
            await b.aclose()
    sdk, lean = recs
    assert lean["error"]["type"] == "connection_refused"
    assert _same(lean) == _same(sdk) and lean["attempts"] == 2
    assert lean["error"]["message"] == sdk["error"]["message"]


@pytest.mark.parametrize("client", CLIENTS)
async def test_lean_path_sends_the_key_only_when_there_is_one(client: str) -> None:
    with FakeServer(Schedule(visible_tokens=2)) as srv:
        for key, want in ((None, None), ("sk-lean-test-123", "Bearer sk-lean-test-123")):
            b = lean_for(srv, client, api_key=key, headers={"X-Extra": "1"})
            try:
                d = await one_turn(b, stream=True)
            finally:
                await b.aclose()
            assert d["status"] == "ok"
            seen = srv.requests[-1]
            assert seen.headers.get("authorization") == want
            assert seen.headers.get("x-extra") == "1"
            assert "x-ttft-probe" not in seen.headers
            assert seen.path == "/v1/chat/completions"


def test_chat_url_joins_as_the_sdk_does() -> None:
    from ttft.backends.providers.lean.chat import chat_url

    assert chat_url("http://h:1/v1") == "http://h:1/v1/chat/completions"
    assert chat_url("http://h:1/v1/") == "http://h:1/v1/chat/completions"
    assert chat_url(None).endswith("/chat/completions")


def test_sse_splitter_on_any_byte_boundary() -> None:
    import random

    from ttft.backends.providers.lean.sse import SSESplitter

    wire = (
        b": ping\n\n"
        b'data: {"a":1}\n\n'
        b'data: {"b":\r\ndata: 2}\r\n\r\n'
        b"event: x\ndata: [1,\ndata: 2]\n\n"
        b"id: 7\n\n"
        b'data:{"c":3}\r\r'
        b"data: [DONE]\n\n"
        b"data: tail-without-blank-line"
    )
    want = [b'{"a":1}', b'{"b":\n2}', b"[1,\n2]", b"", b'{"c":3}', b"[DONE]"]
    for seed in range(300):
        r = random.Random(seed)
        cuts = sorted(r.sample(range(1, len(wire)), r.randint(0, 12)))
        split = SSESplitter()
        got = [d for a, b in zip([0, *cuts], [*cuts, len(wire)], strict=True) for d in split.feed(wire[a:b])]
        assert got == want, cuts


def test_lean_status_errors_carry_the_sdk_class_names() -> None:
    import httpx2
    from ttft.backends.providers.lean import sdk_errors as lean

    def err(status: int, body: bytes = b'{"error":{"message":"no","type":"t"}}') -> lean.APIStatusError:
        resp = httpx2.Response(status, content=body, request=httpx2.Request("POST", "http://x/v1/chat/completions"))
        return lean.status_error(resp)

    names = {s: type(err(s)).__name__ for s in (400, 401, 403, 404, 409, 418, 422, 429, 500, 503)}
    assert names == {
        400: "BadRequestError", 401: "AuthenticationError", 403: "PermissionDeniedError", 404: "NotFoundError",
        409: "ConflictError", 418: "APIStatusError", 422: "UnprocessableEntityError", 429: "RateLimitError",
        500: "InternalServerError", 503: "InternalServerError",
    }  # fmt: skip
    e = err(401)
    assert str(e) == "Error code: 401 - no" and e.body == {"message": "no", "type": "t"} and e.status_code == 401
    assert err(500, b"plain text").body == "plain text"


def test_lean_backoff_follows_the_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    import httpx2
    from ttft.backends.providers.lean.retry import retry_delay_s, should_retry

    monkeypatch.setattr("random.random", lambda: 1.0)  # the most jitter: 25 % off
    assert [retry_delay_s(n, None) for n in (0, 1, 2, 5)] == [0.375, 0.75, 1.5, 6.0]
    assert retry_delay_s(0, httpx2.Headers({"retry-after-ms": "40"})) == pytest.approx(0.04)
    assert retry_delay_s(0, httpx2.Headers({"retry-after": "3"})) == 3.0
    assert retry_delay_s(0, httpx2.Headers({"retry-after": "900"})) == 0.375  # unreasonable: own backoff

    def resp(status: int, **h: str) -> httpx2.Response:
        return httpx2.Response(status, headers=h)

    assert [should_retry(resp(s)) for s in (400, 401, 408, 409, 429, 500, 529)] == [0, 0, 1, 1, 1, 1, 1]
    assert not should_retry(resp(429, **{"retry-after": "900"}))
    assert should_retry(resp(400, **{"x-should-retry": "true"})) and not should_retry(
        resp(500, **{"x-should-retry": "false"})
    )


@pytest.mark.parametrize("client", CLIENTS)
async def test_lean_clients_split_the_wait_as_the_sdk_path_does(client: str) -> None:
    """A new connection, then a reused one: the same ``http`` facts and the same phases of the wait."""

    def facts(d: dict[str, Any]) -> tuple[Any, ...]:
        wait = d["metrics"]["wait_ms"]
        return d["http"]["connection"], d["http"]["http_version"], sorted(k for k, v in wait.items() if v > 0)

    out = []
    with FakeServer(Schedule(visible_tokens=3)) as srv:
        for b in (backend_for("compat", srv), lean_for(srv, client)):
            try:
                out.append([await one_turn(b, stream=True) for _ in range(2)])
            finally:
                await b.aclose()
    sdk, lean = out
    assert [facts(d) for d in lean] == [facts(d) for d in sdk]
    assert facts(lean[0])[0] == "new" and "connect" in facts(lean[0])[2]
    assert facts(lean[1])[0] == "reused" and "connect" not in facts(lean[1])[2]
    for d in lean:  # the phases tile the wait
        assert sum(d["metrics"]["wait_ms"].values()) == pytest.approx(d["metrics"]["ttft_ms"], abs=0.01)


def test_lean_fast_translation_of_plain_chunks_matches_the_general_one() -> None:
    """The lean reader's shortcut for a plain text chunk gives the general walk's events and state."""
    import random

    from ttft.backends.providers.answers.stream_shape import MalformedStream
    from ttft.backends.providers.hosted import TurnState
    from ttft.backends.providers.lean.chat import LeanChatBackend
    from ttft.backends.think import ThinkSplitter

    contents = ["w01 ", "", None, 3, ["x"], "<think>a", "b</think>c", "é"]
    deltas = [
        lambda r: {"content": r.choice(contents)},
        lambda r: {"role": "assistant", "content": r.choice(contents)},
        lambda r: {"content": r.choice(contents), "reasoning_content": "why"},
        lambda r: {"tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]},
        lambda r: {},
        lambda r: None,
        lambda r: "text",
    ]

    def chunk(r: random.Random) -> Any:
        choice: Any = {"index": 0, "delta": r.choice(deltas)(r), "finish_reason": r.choice([None, None, "stop"])}
        item: Any = {
            "id": "c",
            "object": "chat.completion.chunk",
            "choices": r.choice([[choice], [choice, choice], [], choice]),
        }
        extra = r.choice([{}, {}, {"usage": {"completion_tokens": 3}}, {"timings": {"prompt_n": 1}}, {"eval_count": 2}])
        return r.choice([{**item, **extra}, item, [1, 2], None])

    backends = {c: LeanChatBackend("m", provider="compat", base_url="http://127.0.0.1:1/v1", compat=c) for c in (0, 1)}

    def run(fast: bool, compat: bool, item: Any) -> Any:
        b = backends[compat]
        state = TurnState()
        state.extra["splitter"] = ThinkSplitter() if compat else None
        translate = b._translate if fast else b._translate_raw
        try:
            events = list(translate(item, 7, state))
        except MalformedStream as exc:
            return "malformed", str(exc)
        return events, state.stop_reason, state.usage, state.extra["splitter"] and state.extra["splitter"].flush()

    for seed in range(1500):
        r = random.Random(seed)
        item = chunk(r)
        for compat in (False, True):
            assert run(True, compat, item) == run(False, compat, item), item


@pytest.mark.parametrize("bypass", [False, True])
def test_bench_goes_through_a_configured_proxy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bypass: bool) -> None:
    # The load clients speak no proxy: a run that ignored HTTP_PROXY would measure another path.
    from ttft.tui.cli import main

    from tests.fakes.forward_proxy import ForwardProxy

    for k in ("NO_PROXY", "no_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "http_proxy"):
        monkeypatch.delenv(k, raising=False)
    out = tmp_path / "run"
    with BatchingServer(slots=4, token_ms=5, alpha=0, prefill_ms=5) as srv, ForwardProxy() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        if bypass:
            monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        rc = main(
            [
                "bench", "-m", "compat:batching-fake", "--base-url", srv.base_url, "--concurrency", "2",
                "--requests", "4", "--warmup", "1", "--max-output-tokens", "4", "--out", str(out), "--quiet",
            ]
        )  # fmt: skip
    assert rc == 0
    turns = [json.loads(line) for line in (out / "turns.jsonl").read_text().splitlines()]
    assert len(turns) == 5 and all(t["status"] == "ok" and t["tokens"]["output"] == 4 for t in turns)
    summary = json.loads((out / "summary.json").read_text())
    if bypass:
        assert proxy.requests == [] and summary["reader"] == "lean (orjson, httptools)"
    else:
        assert summary["reader"] == "lean (orjson, httpx2 through the proxy)"
        assert len(proxy.requests) == 5 and all(r.endswith("/chat/completions") for r in proxy.requests)


async def test_credentials_in_the_url_go_as_httpx2_sends_them() -> None:
    """``http://user:pass@host/v1``: every client sends Basic auth, percent-decoded, in place of the key's."""
    from ttft.backends.providers.lean.chat import LeanChatBackend

    sent = {}
    with FakeServer(Schedule(visible_tokens=2)) as srv:
        url = srv.openai_base_url.replace("http://", "http://al%40ice:p%3Ass@")
        for client in CLIENTS:
            b = LeanChatBackend("fake-model", provider="compat", base_url=url, compat=True, api_key="sk-not-this")
            if client != "httpx2":
                b.use_aiohttp(client)
            try:
                d = await one_turn(b, stream=True)
            finally:
                await b.aclose()
            assert d["status"] == "ok", (client, d.get("error"))
            sent[client] = srv.requests[-1].headers.get("authorization")
    assert sent["httpx2"] == "Basic " + base64.b64encode(b"al@ice:p:ss").decode()
    assert sent["proto"] == sent["aiohttp"] == sent["httpx2"]
