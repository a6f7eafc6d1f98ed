"""Hostile clients and upstreams: the proxy answers each with a short error or passes the bytes unchanged,
records what it could not read, keeps serving everyone else, and never sends a traceback."""

from __future__ import annotations

import asyncio
import json
import textwrap
from collections.abc import AsyncIterator

import aiohttp
import pytest
from ttft.backends.proxy import routing

from tests.backends.proxy.conftest import Proxied, Scripted
from tests.fakes.schedule import Schedule
from tests.fakes.server import FakeServer
from tests.support import netns

OK_SSE = (
    b'event: message_start\ndata: {"type":"message_start","message":{"usage":{"input_tokens":3}}}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"text_delta","text":"hi"}}\n\n'
)


async def _post(url: str, body: bytes | AsyncIterator[bytes]) -> tuple[int, bytes]:
    async with aiohttp.ClientSession(auto_decompress=False) as s, s.post(url, data=body) as r:
        return r.status, await r.read()


def _no_traceback(body: bytes) -> None:
    assert b"Traceback" not in body and b'File "' not in body


async def test_a_body_over_the_cap_is_refused_and_others_are_still_served(
    scripted: Scripted, via_scripted: Proxied
) -> None:
    scripted.headers = {"Content-Type": "application/json"}
    scripted.pieces = [b'{"input_tokens": 1}']
    url = via_scripted.server.base_url + "/v1/messages/count_tokens"
    status, body = await _post(url, b"x" * (2 << 20))  # Content-Length over the cap: refused before reading
    assert status == 413 and b"limit" in body
    _no_traceback(body)

    async def endless() -> AsyncIterator[bytes]:  # chunked, no length: refused once past the cap
        for _ in range(64):
            yield b"y" * 65536
            await asyncio.sleep(0)

    try:
        status, body = await _post(url, endless())
    except aiohttp.ClientError:
        status = 413  # the proxy may close before the client has sent it all
    assert status == 413
    assert scripted.seen == []  # nothing of either went upstream
    assert await _post(url, b'{"model": "m"}') == (200, b'{"input_tokens": 1}')


async def test_a_client_that_stalls_mid_body_is_timed_out(via_scripted: Proxied) -> None:
    port = via_scripted.server.base_url.rsplit(":", 1)[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", int(port))
    writer.write(b'POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{"model"')
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 20)  # client_timeout_s is 1 s: the proxy answers and closes
    writer.close()
    assert answer.startswith(b"HTTP/1.1 408") and b"stalled" in answer
    _no_traceback(answer)
    assert via_scripted.calls == []


async def test_an_upstream_that_stalls_mid_stream_is_cut_and_recorded(
    scripted: Scripted, via_scripted: Proxied
) -> None:
    scripted.pieces = [OK_SSE, b": ping\n\n", b"never sent"]
    scripted.stall_after = 2
    status, body = await _post(via_scripted.server.base_url + "/v1/messages", b'{"model":"m","stream":true}')
    assert status == 200 and body == OK_SSE + b": ping\n\n"  # everything before the stall, unchanged
    rec = via_scripted.wait_calls(1)[0].record
    assert rec.status == "error" and rec.error is not None and rec.error.type == "timeout"
    assert "no byte for 1 s in the middle of the answer" in rec.error.message
    assert rec.metrics.ttft_ms is not None  # the token that came is timed
    assert scripted.cut.wait(5)  # the upstream connection was closed


@pytest.mark.parametrize(
    ("garbage", "kind"),
    [
        (b"data: {not json\n\n", "malformed_stream"),
        (b'data: {"choices": "x"}\n\n', "malformed_stream"),
        (b"data: \xff\xfe bad utf-8\n\n", "malformed_stream"),
        (b'data: {"a":' + b"[" * 100_000 + b"\n\n", "malformed_stream"),
    ],
)
async def test_a_malformed_stream_passes_unchanged_and_the_record_says_what_failed(
    scripted: Scripted, via_scripted: Proxied, garbage: bytes, kind: str
) -> None:
    good = b'data: {"choices":[{"index":0,"delta":{"content":"ok"}}]}\n\n'
    scripted.pieces = [good, garbage, good, b"data: [DONE]\n\n"]
    status, body = await _post(via_scripted.server.base_url + "/v1/chat/completions", b'{"model":"m","stream":true}')
    assert status == 200 and body == good + garbage + good + b"data: [DONE]\n\n"
    rec = via_scripted.wait_calls(1)[0].record
    assert rec.status == "error" and rec.error is not None and rec.error.type == kind, rec.error
    _no_traceback(json.dumps(rec.to_dict()).encode())
    # the proxy is still serving
    scripted.pieces = [good, b"data: [DONE]\n\n"]
    assert (await _post(via_scripted.server.base_url + "/v1/chat/completions", b"{}"))[0] == 200


async def test_an_error_status_is_passed_on_and_recorded_with_its_status(
    scripted: Scripted, via_scripted: Proxied
) -> None:
    scripted.status = 429
    scripted.headers = {"Content-Type": "application/json", "retry-after": "3"}
    scripted.pieces = [b'{"error": {"type": "rate_limit_error", "message": "slow down"}}']
    status, body = await _post(via_scripted.server.base_url + "/v1/chat/completions", b'{"model":"m"}')
    assert status == 429 and body == scripted.body
    rec = via_scripted.wait_calls(1)[0].record
    assert rec.error is not None and rec.error.type == "rate_limited" and rec.error.status_code == 429
    assert rec.attempts[0].retry_after_s == 3


async def test_an_unreadable_request_body_is_still_forwarded(scripted: Scripted, via_scripted: Proxied) -> None:
    scripted.headers = {"Content-Type": "application/json"}
    scripted.pieces = [b'{"id":"x","choices":[{"message":{"content":"k"},"finish_reason":"stop"}]}']
    deep = b"[" * 200_000
    status, _ = await _post(via_scripted.server.base_url + "/v1/chat/completions", deep)
    assert status == 200 and scripted.seen[-1][3] == deep
    rec = via_scripted.wait_calls(1)[0].record
    assert "request body" in rec.notices["proxy"] and rec.model == ""


async def test_a_client_that_disconnects_cancels_the_upstream_request(fake: FakeServer, proxied: Proxied) -> None:
    fake.schedule = Schedule(first_token_ms=5, token_ms=20, visible_tokens=500)
    body = json.dumps({"model": "fake-model", "stream": True, "messages": [{"role": "user", "content": "hi"}]})
    async with (
        aiohttp.ClientSession() as s,
        s.post(proxied.server.base_url + "/v1/chat/completions", data=body) as r,
    ):
        await r.content.readany()
        await r.content.readany()
        r.close()  # gone, mid-answer
    cut = await asyncio.to_thread(fake.wait_for, lambda rec: rec.disconnected, 10.0)
    assert cut is not None and cut.chunks_sent < 400  # the fake saw its request cut, long before its end
    rec = proxied.wait_calls(1)[0].record
    assert rec.status == "cancelled" and "client disconnected" in rec.notices["proxy"]


def test_only_loopback_peers_pass_the_check() -> None:
    for peer in ("127.0.0.1", "127.8.9.10", "::1", "::ffff:127.0.0.1", None):
        assert routing.loopback(peer)
    for peer in ("10.0.0.1", "192.168.1.2", "::ffff:10.0.0.1", "2001:db8::1", "0.0.0.0", "garbage"):
        assert not routing.loopback(peer)
    assert routing.bind_is_loopback("127.0.0.1") and routing.bind_is_loopback("::1")
    assert not routing.bind_is_loopback("0.0.0.0")


_IN_NAMESPACE = textwrap.dedent(
    """
    import asyncio, json, socket
    from ttft.backends.proxy.server import ProxyConfig, ProxyServer

    def ask(source):
        s = socket.create_connection(("10.77.0.1", port), timeout=10, source_address=(source, 0))
        s.sendall(b"GET /v1/models HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
        return int(data.split()[1])

    async def main():
        global port
        server = ProxyServer(ProxyConfig(host="0.0.0.0", port=0, upstream="http://127.0.0.1:9"), lambda c: None)
        await server.start()
        port = int(server.base_url.rsplit(":", 1)[1])
        far = await asyncio.to_thread(ask, "10.77.0.1")
        near = await asyncio.to_thread(ask, "127.0.0.1")
        await server.aclose()
        print(json.dumps({"far": far, "near": near}))

    asyncio.run(main())
    """
)


def test_a_peer_not_on_loopback_is_refused_in_a_namespace() -> None:
    seen = netns.run_beside_a_far_peer(_IN_NAMESPACE)
    assert seen["far"] == 403  # a peer on another address is refused, even with the proxy bound to every address
    assert seen["near"] == 502  # a loopback peer is served (its upstream here is closed: 502, not 403)


CHAT_SSE = [
    b'data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m",'
    b'"choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},"finish_reason":null}]}\n\n',
    b'data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m",'
    b'"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n',
    b"data: [DONE]\n\n",
]


async def test_a_client_that_leaves_once_the_last_event_came_cut_nothing(
    scripted: Scripted, via_scripted: Proxied
) -> None:
    # The OpenAI SDK closes its response at [DONE]; the upstream's end of body comes after (here: never).
    scripted.pieces, scripted.stall_after = list(CHAT_SSE), len(CHAT_SSE)
    body = json.dumps({"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]})
    async with (
        aiohttp.ClientSession() as s,
        s.post(via_scripted.server.base_url + "/v1/chat/completions", data=body) as r,
    ):
        seen = b""
        while b"[DONE]" not in seen:
            seen += await r.content.readany()
        r.close()
    rec = via_scripted.wait_calls(1)[0].record
    assert rec.status == "ok" and rec.stop_reason == "stop" and rec.answer == ""  # content not kept
    assert "proxy" not in rec.notices and rec.metrics.ttft_ms is not None
