"""The lean reader on the Protocol + httptools transport (backends.transport.protocol) records what the SDK path
records, on asyncio's loop and on uvloop: the equivalence scenarios, the errors and retries, the resend
rule, the TLS wait split, and the bounded buffer of a reader that falls behind."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest
from ttft.backends.load import event_loop
from ttft.backends.providers.lean.chat import LeanChatBackend
from ttft.backends.providers.openai_chat import OpenAIChatBackend

from tests.backends.providers.test_lean_equivalence import LEAN_EXTRA, SCHEDULES, _error_words, _same, _stalled
from tests.backends.transport.test_resend import two_turns
from tests.backends.transport.test_wait_phases import HEADERS, HELD, _sums_to_ttft
from tests.fakes import FakeServer, Schedule
from tests.fakes.keepalive_server import KEEPALIVE_WORDS, KeepAliveServer
from tests.fakes.tls_server import TLSFakeServer
from tests.support.backend_util import backend_for, one_turn

pytest.importorskip("httptools")
T = TypeVar("T")
LOOPS = ["asyncio", "uvloop"]


def on(loop: str, coro: Callable[[], Coroutine[Any, Any, T]]) -> T:
    if loop == "uvloop":
        pytest.importorskip("uvloop")
        return event_loop.run(coro(), event_loop.loop_factory())
    return event_loop.run(coro(), None)


def proto(base_url: str, **kw: Any) -> LeanChatBackend:
    b = LeanChatBackend("fake-model", provider="compat", base_url=base_url, compat=True, **kw)
    b.use_aiohttp("proto")
    return b


async def _both(schedule: Schedule, kw: dict[str, Any], **settings: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """One turn on the SDK path, then one on the proto transport, each against a fresh server."""
    out = []
    for make in (lambda s: backend_for("compat", s, **kw), lambda s: proto(s.openai_base_url, **kw)):
        with FakeServer(schedule) as srv:
            b = make(srv)
            try:
                out.append(await one_turn(b, **settings))
            finally:
                await b.aclose()
    return out[0], out[1]


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("name", [*SCHEDULES, *LEAN_EXTRA])
def test_proto_transport_records_what_the_sdk_path_records(name: str, loop: str) -> None:
    schedule, settings = (SCHEDULES[name], {}) if name in SCHEDULES else LEAN_EXTRA[name]
    settings = {"stream": True, "max_retries": 0 if name in SCHEDULES else 2, **settings}
    sdk, lean = on(loop, lambda: _both(schedule, {}, **settings))
    assert _same(lean) == _same(sdk)
    assert len(lean["chunks"]) == len(sdk["chunks"])
    assert _error_words(lean) == _error_words(sdk)
    if name.endswith("then_ok"):
        assert lean["status"] == "ok" and lean["attempts"] == sdk["attempts"] == 2


@pytest.mark.parametrize("loop", LOOPS)
def test_proto_transport_on_a_stalled_stream_times_out_as_the_sdk_does(loop: str) -> None:
    schedule = Schedule(visible_tokens=6, stall_after=2, stall_s=3)
    sdk, lean = on(loop, lambda: _both(schedule, {"timeout_s": 0.5}, stream=True, max_retries=0))
    assert lean["error"]["type"] == "timeout" and lean["answer"] == "w00 w01 "
    assert _same(lean) == _same(sdk) and _stalled(lean) and _stalled(sdk)


@pytest.mark.parametrize("loop", LOOPS)
def test_proto_transport_on_a_refused_connection_retries_and_fails_as_the_sdk_does(loop: str) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/v1"

    async def both() -> list[dict[str, Any]]:
        recs = []
        for b in (OpenAIChatBackend("m", provider="compat", base_url=url, compat=True), proto(url)):
            try:
                recs.append(await one_turn(b, stream=True, max_retries=1))
            finally:
                await b.aclose()
        return recs

    sdk, lean = on(loop, both)
    assert lean["error"]["type"] == "connection_refused" and lean["attempts"] == 2
    assert _same(lean) == _same(sdk) and lean["error"]["message"] == sdk["error"]["message"]


async def test_proto_transport_sends_the_key_only_when_there_is_one() -> None:
    with FakeServer(Schedule(visible_tokens=2)) as srv:
        for key, want in ((None, None), ("sk-lean-test-123", "Bearer sk-lean-test-123")):
            b = proto(srv.openai_base_url, api_key=key, headers={"X-Extra": "1"})
            try:
                d = await one_turn(b, stream=True)
            finally:
                await b.aclose()
            assert d["status"] == "ok"
            seen = srv.requests[-1]
            assert seen.headers.get("authorization") == want and seen.headers.get("x-extra") == "1"
            assert "x-ttft-probe" not in seen.headers and seen.path == "/v1/chat/completions"


async def test_a_header_that_would_break_its_line_is_refused_as_the_sdk_refuses_it() -> None:
    sdk, lean = await _both(
        Schedule(visible_tokens=2), {"headers": {"X-Bad": "a\r\nInjected: 1"}}, stream=True, max_retries=0
    )
    assert lean["status"] == "error" and lean["attempts"] == sdk["attempts"] == 1
    assert _error_words(lean) == _error_words(sdk) and "Illegal header value" in lean["error"]["message"]


# --- keep-alive: the resend rule (tests/fakes/keepalive_server.py ends kept-alive connections) ----------
@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize(
    ("then", "status", "requests", "connections"),
    [
        ("close_idle", "ok", 2, 2),
        ("reset_unread", "ok", 2, 2),
        ("read_then_drop", "error", 2, 1),
        ("answer", "ok", 2, 1),
    ],
)
def test_proto_transport_resends_only_what_the_server_cannot_have_read(
    then: str, status: str, requests: int, connections: int, loop: str
) -> None:
    srv, first, second = on(loop, lambda: two_turns(then, proto))
    assert first["status"] == "ok" and first["http"]["connection"] == "new"
    assert second["status"] == status and second["attempts"] == 1, second.get("error")
    assert (srv.requests, srv.connections) == (requests, connections)  # nothing read twice
    if status == "ok":
        assert len(second["chunks"]) == KEEPALIVE_WORDS
        assert second["http"]["connection"] == ("reused" if then == "answer" else "new")


# --- TLS: the handshake is its own phase of the wait, as on httpx2 -------------------------------------
@pytest.mark.parametrize("loop", LOOPS)
def test_proto_transport_splits_the_wait_over_tls(loop: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with TLSFakeServer(HELD) as srv:
        srv.response_headers.update(HEADERS)
        monkeypatch.setenv("SSL_CERT_FILE", srv.ca_file)

        async def two() -> tuple[dict[str, Any], dict[str, Any]]:
            b = LeanChatBackend("fake-model", base_url=f"https://localhost:{srv.port}/v1", api_key="sk-test")
            b.use_aiohttp("proto")
            try:
                return await one_turn(b, max_retries=0), await one_turn(b, max_retries=0)
            finally:
                await b.aclose()

        first, again = on(loop, two)
    for d in (first, again):
        assert d["status"] == "ok", d["error"]
        w = _sums_to_ttft(d)
        # HELD: headers 150 ms after the request, first token 80 ms after them. Wide bounds for loaded CI
        # (a late server thread moves time from first_token to server); a wrong split leaves one side ~0.
        assert 90 <= w["server"] <= 450 and 10 <= w["first_token"] <= 300, w
        assert d["http"]["request_id"] == "req_7f3a" and d["http"]["http_version"] == "HTTP/1.1"
    w1, w2 = first["metrics"]["wait_ms"], again["metrics"]["wait_ms"]
    assert first["http"]["connection"] == "new" and w1["connect"] > 0 and w1["dns"] > 0 and w1["tls"] > 0
    assert again["http"]["connection"] == "reused" and w2["connect"] == w2["dns"] == w2["tls"] == 0


def test_proto_transport_refuses_an_untrusted_certificate_as_the_sdk_does(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    with TLSFakeServer(HELD) as srv:
        url = f"https://localhost:{srv.port}/v1"

        async def both() -> list[dict[str, Any]]:
            recs = []
            for b in (OpenAIChatBackend("fake-model", base_url=url, api_key="sk-test"), proto(url, api_key="sk-test")):
                try:
                    recs.append(await one_turn(b, max_retries=0))
                finally:
                    await b.aclose()
            return recs

        sdk, lean = on("asyncio", both)
    assert lean["status"] == sdk["status"] == "error" and lean["error"]["type"] == sdk["error"]["type"]
    assert "CERTIFICATE_VERIFY_FAILED" in lean["error"]["message"], lean["error"]
    assert lean["metrics"]["wait_ms"]["tls"] > 0 if lean["metrics"].get("wait_ms") else True


# --- flow control: a reader that falls behind pauses the socket -----------------------------------------
async def test_a_reader_that_lags_pauses_the_socket_and_loses_nothing() -> None:
    from ttft.backends.transport import http1 as http1_conn
    from ttft.backends.transport import protocol as lean_proto
    from ttft.backends.transport.http import Probe

    words = 6000  # about 900 kB of events: more than the buffer holds
    with FakeServer(Schedule(visible_tokens=words, token_ms=0)) as srv:
        client = lean_proto.ProtoClient(timeout_s=10, connect_timeout_s=5, tls=False)
        body = b'{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}'
        probe = Probe()
        resp = await client.send(
            srv.openai_base_url + "/chat/completions", body=body, headers={"Content-Type": "application/json"},
            params={}, probe=probe,
        )  # fmt: skip
        assert resp.status_code == 200
        conn = resp._conn
        for _ in range(200):  # the server writes everything while nobody reads (up to 10 s on a loaded machine)
            if conn.paused:
                break
            await asyncio.sleep(0.05)
        # bounded: paused past the high-water mark (one socket read, at most 256 KiB, may land past it)
        assert conn.paused and conn.queued <= http1_conn.HIGH_WATER + 256 * 1024
        got = b""
        while piece := await resp.read_stamped():
            got += piece
        await resp.aclose()
        await client.aclose()
    import orjson

    events = [e[6:] for e in got.split(b"\n\n") if e.startswith(b"data: ")]
    assert events[-1] == b"[DONE]"
    deltas = [c["delta"].get("content") for e in events[:-1] for c in orjson.loads(e).get("choices") or []]
    assert len([d for d in deltas if d]) == words  # every token, in order, none lost while paused
    assert probe.reads >= 1 and probe.body_tail.endswith(b"[DONE]\n\n")


# --- the pool: bounded, connections kept alive and shared ----------------------------------------------
@pytest.mark.parametrize("loop", LOOPS)
def test_the_pool_is_bounded_and_reuses_its_connections(loop: str) -> None:
    async def many() -> tuple[KeepAliveServer, list[dict[str, Any]]]:
        async with KeepAliveServer("answer") as srv:
            b = proto(srv.base_url, max_connections=2)
            try:
                turns = await asyncio.gather(*(one_turn(b, stream=True, max_retries=0) for _ in range(6)))
            finally:
                await b.aclose()
        return srv, list(turns)

    srv, turns = on(loop, many)
    assert all(d["status"] == "ok" and len(d["chunks"]) == KEEPALIVE_WORDS for d in turns)
    assert srv.requests == 6 and srv.connections == 2  # never more than the bound, each kept alive
    assert sum(d["http"]["connection"] == "reused" for d in turns) == 4


# --- the headers' stamp: taken where the bytes are parsed --------------------------------------------------
async def test_the_headers_are_stamped_when_parsed_not_when_the_waiting_task_resumes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Under a burst (hundreds of streams' headers in one poll) the task waiting for the headers resumes
    # passes after they were parsed. Here the pass between is held 300 ms: the stamp must not move.
    import time

    from ttft.backends.transport import http1 as http1_conn
    from ttft.backends.turn import new_recorder, run_turn
    from ttft.telemetry import events as ev

    from tests.support.backend_util import make_request

    loop = asyncio.get_running_loop()
    held: list[int] = []
    parse = http1_conn.Conn.on_headers_complete

    def hold() -> None:
        held.append(ev.now_ns())
        time.sleep(0.3)

    def on_headers_complete(self: http1_conn.Conn) -> None:
        if not held:
            loop.call_soon(hold)  # queued before the waiting task's wake-up: runs first, next pass
        parse(self)

    monkeypatch.setattr(http1_conn.Conn, "on_headers_complete", on_headers_complete)
    with FakeServer(Schedule(visible_tokens=3, token_ms=0)) as srv:
        b = proto(srv.openai_base_url)
        try:
            request = make_request(stream=True)
            record = await run_turn(b, request, new_recorder(b, request, session_id="t", turn_index=0))
        finally:
            await b.aclose()
    assert record.status == "ok" and held
    assert record.timestamps.headers is not None and record.timestamps.headers <= held[0]


async def test_under_a_bench_level_each_response_is_taken_in_through_the_spreader() -> None:
    from ttft.backends.load.spread import PassSpreader
    from ttft.backends.transport import pacing

    admitted: list[int] = []

    class Counting(PassSpreader):
        async def admit(self) -> None:
            admitted.append(1)
            await super().admit()

    with FakeServer(Schedule(visible_tokens=3, token_ms=0)) as srv:
        b = proto(srv.openai_base_url)
        try:
            await one_turn(b, stream=True)  # no level: nothing asked
            assert admitted == []
            token = pacing.ACTIVE.set(Counting())
            try:
                rec = await one_turn(b, stream=True)
            finally:
                pacing.ACTIVE.reset(token)
        finally:
            await b.aclose()
    assert rec["status"] == "ok" and admitted == [1]


async def test_a_turn_cancelled_while_waiting_for_its_pass_gives_its_connection_back() -> None:
    from ttft.backends.load.spread import PassSpreader
    from ttft.backends.transport import pacing
    from ttft.backends.transport.http import Probe
    from ttft.backends.transport.protocol import ProtoClient

    waiting = asyncio.Event()

    class Full(PassSpreader):
        async def admit(self) -> None:  # every pass full from now on: the response waits until cancelled
            waiting.set()
            await asyncio.Event().wait()

    with FakeServer(Schedule(visible_tokens=3, token_ms=0)) as srv:
        client = ProtoClient(timeout_s=10, connect_timeout_s=5, tls=False, max_connections=1)
        body = b'{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}'
        token = pacing.ACTIVE.set(Full())
        try:
            url = srv.openai_base_url + "/chat/completions"
            headers = {"Content-Type": "application/json"}
            task = asyncio.ensure_future(client.send(url, body=body, headers=headers, params={}, probe=Probe()))
            await asyncio.wait_for(waiting.wait(), 10)  # the headers are in; the response waits for a pass
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        finally:
            pacing.ACTIVE.reset(token)
        assert client._slots is not None and not client._slots.locked()  # its one slot is free again
        assert not any(client._idle.values())  # a half-read response is not pooled
        await client.aclose()


async def test_a_server_that_closes_after_each_answer_loses_one_request_at_most() -> None:
    # llama-server offers keep-alive but closes each connection right after a streamed answer, its
    # close often crossing the next request. That request cannot be sent again (the server might
    # have read it), but once seen, the target gets a new connection each time: no more are lost.
    from tests.fakes.keepalive_server import KeepAliveServer

    async with KeepAliveServer("close_unread") as srv:
        b = proto(srv.base_url)
        try:
            turns = [await one_turn(b, stream=True, max_retries=0) for _ in range(4)]
        finally:
            await b.aclose()
    assert [t["status"] for t in turns] == ["ok", "error", "ok", "ok"], [t.get("error") for t in turns]
    assert turns[1]["error"]["type"] == "connection_dropped"
    assert [t["http"]["connection"] for t in turns[2:]] == ["new", "new"]
    assert srv.requests == 3  # nothing ran twice
