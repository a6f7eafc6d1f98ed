"""The header deadline: a client that brings its request line and headers too slowly (slowloris), or
nothing at all, is closed once ``header_timeout_s`` has passed, however many bytes it dribbles; a
normal SDK call, a pooled connection the deadline closed, and a stream far longer than the deadline
all still work. Raw sockets and the official SDK on 127.0.0.1; times are generous sanity bounds."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import aiohttp
import openai
import pytest
from ttft.backends.proxy.server import HEADER_TIMEOUT_S, ProxyConfig

from tests.backends.proxy.conftest import Proxied, Scripted, proxy_for
from tests.fakes.server import FakeServer

DEADLINE_S = 1.0
KEY = "sk-test-SECRET-slowloris-31b7"


@pytest.fixture
def short(fake: FakeServer) -> Iterator[Proxied]:
    p = proxy_for(ProxyConfig(port=0, upstream=fake.url, header_timeout_s=DEADLINE_S))
    yield p
    p.stop()


def _port(p: Proxied) -> int:
    return int(p.server.base_url.rsplit(":", 1)[1])


async def _dribble(port: int, head: bytes, every_s: float, give_up_s: float) -> tuple[bytes | None, float, int]:
    """Send ``head`` a byte at a time, ``every_s`` apart, until the proxy closes the connection (or
    ``give_up_s``): what it answered (None: still open), when it closed, how many bytes went out."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    began = time.monotonic()
    answer = asyncio.ensure_future(reader.read())  # b"" or a whole answer, at the close
    sent = 0
    try:
        for byte in head:
            if answer.done() or time.monotonic() - began > give_up_s:
                break
            try:
                writer.write(bytes([byte]))
                await writer.drain()
            except ConnectionError:
                break
            sent += 1
            await asyncio.wait([answer], timeout=every_s)
        got: bytes | None
        try:
            got = await asyncio.wait_for(answer, max(0.1, give_up_s - (time.monotonic() - began)))
        except ConnectionError:
            got = b""
        except TimeoutError:
            got = None
        return got, time.monotonic() - began, sent
    finally:
        writer.close()


async def test_a_client_dribbling_its_headers_is_closed_at_the_deadline(short: Proxied) -> None:
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"X-Slow: " + b"a" * 400 + b"\r\n\r\n"
    got, after_s, sent = await _dribble(_port(short), head, every_s=0.05, give_up_s=20)
    # bytes kept coming every 50 ms, yet the connection closed near the deadline and long before the head ended
    assert got is not None, f"still open after {after_s:.1f} s"
    assert DEADLINE_S * 0.9 <= after_s < 10, after_s
    assert 5 <= sent < len(head)
    assert got == b"" or got.startswith(b"HTTP/1.1 408"), got[:80]
    assert short.calls == []  # no request was ever read, so none was forwarded or recorded


async def test_a_connection_that_sends_nothing_is_closed_and_others_are_served_meanwhile(short: Proxied) -> None:
    idle = asyncio.ensure_future(_dribble(_port(short), b"", every_s=0.05, give_up_s=20))
    client = openai.AsyncOpenAI(base_url=short.server.env()["OPENAI_BASE_URL"], api_key=KEY, max_retries=0)
    async with client:  # an ordinary call while the idle connection waits out its deadline
        done = await client.chat.completions.create(
            model="fake-model", messages=[{"role": "user", "content": "hi"}], stream=False
        )
    assert done.choices[0].message.content
    got, after_s, _ = await idle
    assert got == b"" and DEADLINE_S * 0.9 <= after_s < 10, after_s
    assert len(short.wait_calls(1)) == 1 and short.calls[0].record.status == "ok"


async def test_an_sdk_whose_pooled_connection_the_deadline_closed_calls_again(short: Proxied) -> None:
    client = openai.AsyncOpenAI(base_url=short.server.env()["OPENAI_BASE_URL"], api_key=KEY, max_retries=0)
    async with client:
        for k in range(2):
            if k:
                await asyncio.sleep(DEADLINE_S * 1.5)  # idle past the deadline: the proxy closed the pooled one
            stream = await client.chat.completions.create(
                model="fake-model", messages=[{"role": "user", "content": "hi"}], stream=True
            )
            assert "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    calls = short.wait_calls(2)
    assert [c.record.status for c in calls] == ["ok", "ok"]


async def test_a_stream_far_longer_than_the_deadline_is_not_cut(scripted: Scripted) -> None:
    scripted.pieces = [f'data: {{"k": {i}}}\n\n'.encode() for i in range(30)]
    scripted.gap_s = 0.1  # 3 s of answer, three times the deadline
    p = proxy_for(ProxyConfig(port=0, upstream=scripted.url, header_timeout_s=DEADLINE_S))
    try:
        url = p.server.base_url + "/v1/chat/completions"
        async with aiohttp.ClientSession(auto_decompress=False) as s:
            began = time.monotonic()
            async with s.post(url, data=b'{"model": "m", "stream": true}') as r:
                body = await r.read()
            assert r.status == 200 and body == scripted.body
            assert time.monotonic() - began >= 2 * DEADLINE_S  # it did outlive the deadline
            async with s.post(url, data=b'{"model": "m", "stream": true}') as r:  # the same session again
                assert r.status == 200 and await r.read() == scripted.body
        assert len(p.wait_calls(2)) == 2
    finally:
        p.stop()


def test_the_default_deadline_is_the_documented_one() -> None:
    assert ProxyConfig().header_timeout_s == HEADER_TIMEOUT_S == 30.0
