"""One HTTP/1.1 connection as an asyncio Protocol parsed by httptools, and the response read from it.

Each connection's ``data_received`` hands the bytes to httptools' ``HttpResponseParser`` (llhttp,
in C); each body piece is stamped (``events.now_ns``, the recorder's clock) the moment it lands and
queued for the reader, which hands it over with its own stamp (``Probe._chunk``). A reader that falls
behind pauses the socket past ``HIGH_WATER`` queued bytes and resumes it under ``LOW_WATER``. The
pool, the request and its wait-phase stamps are :mod:`backends.transport.protocol`'s.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

import httptools
import httpx2

from ...telemetry import events as ev
from ...telemetry.errors import TtftError
from .aiohttp_client import _DISCONNECTED, _DROPPED, ended_by_peer
from .http import Probe
from .response import LeanResponse

HIGH_WATER = 256 * 1024  # queued body bytes past which the socket is paused
LOW_WATER = 64 * 1024  # and resumed once the reader is back under this


class Closed(TtftError):
    """The server ended the connection cleanly (EOF) before the response was complete."""


class Conn(asyncio.Protocol):
    """One HTTP/1.1 connection: parses responses as bytes land and queues their stamped body pieces."""

    def __init__(self, key: tuple[str, str, int]) -> None:
        self.key = key
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.loop = asyncio.get_running_loop()  # made by the loop's create_connection, on its thread
        self.lost = False
        self.idle_since: float | None = None  # monotonic time it last went back to the pool
        self._reset_response()

    def _reset_response(self) -> None:
        self.status = 0
        self.headers_ns: int | None = None  # when the header block was parsed, stamped in the socket's callback
        self.raw_headers: list[tuple[bytes, bytes]] = []
        self.headers_done: asyncio.Future[None] | None = None
        self.pieces: deque[tuple[int, bytes]] = deque()
        self.queued = 0
        self.paused = False
        self.complete = False
        self.keep_alive = False
        self.got_bytes = False  # any byte of this response arrived
        self.exc: BaseException | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.chunked = False
        self.has_length = False

    def begin(self) -> asyncio.Future[None]:
        """A new request goes out on this connection: its response's state, fresh."""
        self._reset_response()
        self.headers_done = self.loop.create_future()
        return self.headers_done

    # --- asyncio.Protocol ---------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self.headers_done is None:  # bytes nobody asked for on an idle connection: unusable
            self._fail(Closed())
            return
        self.got_bytes = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(httpx2.RemoteProtocolError("the server switched protocols"))
        except httptools.HttpParserError as exc:
            self._fail(httpx2.RemoteProtocolError(f"malformed response: {exc}"))

    def eof_received(self) -> bool | None:
        if not self.complete and self.status and not (self.chunked or self.has_length):
            self.on_message_complete()  # a body delimited by the connection's end
        self._fail(Closed())
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(exc if exc is not None else Closed())

    # --- httptools callbacks ------------------------------------------------------------
    def on_header(self, name: bytes, value: bytes) -> None:
        self.raw_headers.append((name, value))
        lower = name.lower()
        if lower == b"transfer-encoding" and b"chunked" in value.lower():
            self.chunked = True
        elif lower == b"content-length":
            self.has_length = True

    def on_headers_complete(self) -> None:
        self.headers_ns = ev.now_ns()  # not when the waiting task resumes: under a burst, passes later
        self.status = self.parser.get_status_code()
        if self.headers_done is not None and not self.headers_done.done():
            self.headers_done.set_result(None)

    def on_body(self, body: bytes) -> None:
        self.pieces.append((ev.now_ns(), body))  # stamped as it lands, handed over in order
        self.queued += len(body)
        if self.queued > HIGH_WATER and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        # read here: once the message is complete llhttp's flags are the next message's
        self.keep_alive = not self.lost and self.parser.should_keep_alive()
        self.complete = True
        self._wake()

    # --- state ------------------------------------------------------------------------------
    def _wake(self) -> None:
        w = self.waiter
        if w is not None and not w.done():
            w.set_result(None)

    def _fail(self, exc: BaseException) -> None:
        self.lost = True
        if self.exc is None and not self.complete:
            self.exc = exc
        if self.headers_done is not None and not self.headers_done.done():
            self.headers_done.set_exception(exc)
            self.headers_done.exception()  # retrieved: a request given up on logs nothing
        self._wake()

    def reusable(self) -> bool:
        if self.lost or self.transport is None or self.transport.is_closing():
            return False
        return not ended_by_peer(self.transport.get_extra_info("socket"))

    def close(self) -> None:
        self.lost = True
        if self.transport is not None:
            self.transport.close()


class ProtoResponse(LeanResponse):
    """One attempt's response: what the lean reader and :mod:`backends.providers.errors` read from an
    ``httpx2.Response`` (status, headers, request, body), and the stamped pieces of its body."""

    def __init__(
        self,
        conn: Conn,
        url: str,
        params: dict[str, str],
        probe: Probe,
        timeout_s: float | None,
        release: Callable[[Conn, bool], None],
    ) -> None:
        self._release = release
        self._conn = conn
        self._url = url
        self._params = params
        self._request: httpx2.Request | None = None
        self._body: bytes | None = None
        self._done = False
        self._released = False
        self.probe = probe
        self.status_code = conn.status
        self.headers = httpx2.Headers(conn.raw_headers)
        self.http_version = f"HTTP/{conn.parser.get_http_version()}"
        self.timeout_s = timeout_s

    async def read_stamped(self) -> bytes:
        """The body's next piece, its arrival stamped on the probe; ``b""`` at its end."""
        conn = self._conn
        while not conn.pieces:
            if conn.complete:
                self._done = True
                return b""
            if conn.exc is not None:
                raise as_httpx(conn.exc, self.request, mid_body=True) from conn.exc
            conn.waiter = conn.loop.create_future()
            try:
                await conn.waiter
            finally:
                conn.waiter = None
        t, data = conn.pieces.popleft()
        conn.queued -= len(data)
        if conn.paused and conn.queued < LOW_WATER and conn.transport is not None:
            conn.paused = False
            conn.transport.resume_reading()
        self.probe._chunk(data, t)
        return data

    async def aclose(self) -> None:
        # A body read to its end gives the connection back to the pool; otherwise (cancelled,
        # abandoned) the connection is closed, which stops the server's generation at once.
        if self._released:
            return
        self._released = True
        keep = self._done and self._conn.keep_alive and not self._conn.lost
        self._release(self._conn, keep)


def as_httpx(exc: BaseException, request: httpx2.Request, *, mid_body: bool = False) -> httpx2.TransportError:
    """The httpx2 error ``exc`` would have been (as backends.transport.aiohttp_client words aiohttp's)."""
    if isinstance(exc, httpx2.TransportError):
        exc.request = request
        return exc
    if isinstance(exc, TimeoutError):
        return httpx2.ReadTimeout(str(exc) or "read timeout", request=request)
    if isinstance(exc, Closed):
        return httpx2.RemoteProtocolError(_DROPPED if mid_body else _DISCONNECTED, request=request)
    return httpx2.ReadError(str(exc) or type(exc).__name__, request=request)
