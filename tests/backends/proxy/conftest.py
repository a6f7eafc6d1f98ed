"""A proxy on a free loopback port in front of the loopback fake server, and the calls it hands back.

The proxy runs on its own loop and thread, as it runs in its own process for a real app: a client on the
test's loop (an SDK building its models on first use) cannot hold up the proxy's reads, or its clocks.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

import pytest
from aiohttp import web
from ttft.backends.proxy.server import ProxiedCall, ProxyConfig, ProxyServer

from tests.fakes.loop_thread import LoopThreadServer
from tests.fakes.schedule import Schedule
from tests.fakes.server import FakeServer

T = TypeVar("T")


@pytest.fixture
def fake() -> Iterator[FakeServer]:
    server = FakeServer(Schedule(first_token_ms=40, token_ms=10, visible_tokens=8, input_tokens=30)).start()
    yield server
    server.stop()


class Proxied:
    """A proxy serving from its own thread, and every call it has handed to ``on_call``."""

    def __init__(self, config: ProxyConfig) -> None:
        self.calls: list[ProxiedCall] = []
        self.server = ProxyServer(config, self.calls.append, session_id="test")
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="proxy", daemon=True)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 30) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def start(self) -> Proxied:
        self._thread.start()
        self.run(self.server.start())
        return self

    def stop(self) -> None:
        try:
            self.run(self.server.aclose())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
            self.loop.close()

    def wait_calls(self, n: int, timeout: float = 10) -> list[ProxiedCall]:
        """The calls once ``n`` have been handed over (a call ends on the proxy's loop after the client's)."""
        import time

        deadline = time.monotonic() + timeout
        while len(self.calls) < n and time.monotonic() < deadline:
            time.sleep(0.005)
        return list(self.calls)


def proxy_for(config: ProxyConfig) -> Proxied:
    return Proxied(config).start()


@pytest.fixture
def proxied(fake: FakeServer) -> Iterator[Proxied]:
    p = proxy_for(ProxyConfig(port=0, upstream=fake.url))
    yield p
    p.stop()


class Scripted(LoopThreadServer):
    """An upstream that answers every request with one scripted answer, sent piece by piece: any status,
    headers and bytes (gzip, a redirect, malformed SSE, a stall), so the test knows each byte it sent."""

    thread_name = "scripted-upstream"

    def __init__(self) -> None:
        super().__init__()
        self.status = 200
        self.headers: dict[str, str] = {"Content-Type": "text/event-stream"}
        self.pieces: list[bytes] = []
        self.gap_s = 0.005
        self.stall_after: int | None = None  # pieces sent before it goes silent (until the client leaves)
        self.seen: list[tuple[str, str, dict[str, str], bytes]] = []  # method, path+query, headers, body
        self.cut = threading.Event()  # the client went away before the last piece

    @property
    def body(self) -> bytes:
        return b"".join(self.pieces)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._answer)
        return app

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        self.seen.append((request.method, request.path_qs, dict(request.headers), await request.read()))
        resp = web.StreamResponse(status=self.status, headers=self.headers)
        if self.pieces:
            resp.content_length = len(self.body) if "Content-Length" in self.headers else None
        await resp.prepare(request)
        try:
            for i, piece in enumerate(self.pieces if request.method != "HEAD" else ()):
                if self.stall_after is not None and i == self.stall_after:
                    while True:  # silent, until the proxy gives up and closes the connection
                        await asyncio.sleep(0.01)
                        if request.transport is None or request.transport.is_closing():
                            raise ConnectionResetError
                await resp.write(piece)
                await asyncio.sleep(self.gap_s)
            await resp.write_eof()
        except (ConnectionResetError, asyncio.CancelledError):
            self.cut.set()
            raise
        return resp


@pytest.fixture
def scripted() -> Iterator[Scripted]:
    server = Scripted().start()
    yield server
    server.stop()


@pytest.fixture
def via_scripted(scripted: Scripted) -> Iterator[Proxied]:
    p = proxy_for(
        ProxyConfig(port=0, upstream=scripted.url, read_timeout_s=1.0, client_timeout_s=1.0, max_body_bytes=1 << 20)
    )
    yield p
    p.stop()
