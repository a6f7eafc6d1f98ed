"""The load driver's HTTP client for the lean Chat Completions reader: aiohttp, stamped like httpx2.

Why: under load most of a streamed chunk's client CPU went to the pure-Python HTTP stack
(httpcore2, h11, anyio: about 75 % of 200-450 us per chunk at 64 streams). aiohttp parses
HTTP/1.1 in C and hands over each socket read as it lands, as AIPerf's clients do.

What it keeps, so a record does not depend on the client:

- the same per-turn :class:`backends.transport.http.Probe` bookkeeping as the httpx2 hooks: an
  ``AttemptSent`` as the request leaves, the wire steps of the wait (``pool`` at the send,
  ``dns``, ``connect``, ``send`` once a connection is in hand, ``server`` once the body is
  written: from aiohttp's request tracing, per request, never per chunk; TLS is inside
  ``connect`` here, aiohttp reports no handshake of its own), ``HttpResponse`` (the ``http``
  facts, new or reused connection) and ``HeadersReceived`` when the headers are in, and every
  raw read stamped on arrival (``Probe._chunk``);
- its errors raised as the httpx2 errors they correspond to (connect refused or timed out,
  read timeout, a connection dropped mid-body), so :mod:`backends.providers.errors` words them alike;
- the pool sized for every stream (a stream waiting for a connection would count it as TTFT)
  and no CA bundle loaded for a plain-http server;
- no request sent twice: a pooled connection the server has closed is dropped before anything is
  written on it, and a POST that failed after leaving goes again only when the server cannot have
  read it (:func:`resend_is_safe`).

aiohttp is imported on first use: ``ttft ask`` keeps the httpx2 client (one turn, no load).
"""

from __future__ import annotations

import asyncio
import errno
import functools
import ipaddress
import select
import weakref
from collections.abc import Mapping
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import httpx2

from ...telemetry import events as ev
from .http import Probe, parse_retry_after, url_credentials
from .load_client import LoadClient
from .meta import http_info
from .response import LeanResponse

if TYPE_CHECKING:
    import aiohttp

# httpx2's own words for these, so an error reads the same whichever client met it.
_DROPPED = "peer closed connection without sending complete message body (incomplete chunked read)"
_DISCONNECTED = "Server disconnected without sending a response."
STALE_RETRIES = 3  # pooled connections found closed, one after another, before the error stands


def ended_by_peer(sock: Any) -> bool:
    """Whether an idle pooled connection's socket is readable: the server ended it (its FIN, or a reset,
    is waiting) or sent bytes nobody asked for. Either way it cannot carry a request. Polled, never read,
    as httpcore2 checks a pooled connection before reusing it."""
    fd = sock.fileno() if sock is not None else -1
    if fd < 0:
        return True
    p = select.poll()
    p.register(fd, select.POLLIN)
    return bool(p.poll(0))


@functools.cache
def connector_class() -> type[aiohttp.TCPConnector]:
    """aiohttp's connector, checking each pooled connection before it carries a request (see send)."""
    import aiohttp

    class CheckedConnector(aiohttp.TCPConnector):
        def __init__(self, **kw: Any) -> None:
            super().__init__(**kw)
            # The connections handed out before: one handed out again is a reuse from the pool. Only
            # those are checked (a new TLS connection may well be readable: the server's session tickets).
            self._ttft_handed: weakref.WeakSet[Any] = weakref.WeakSet()

        def _first_use(self, conn: aiohttp.connector.Connection) -> bool:
            proto = conn.protocol
            if proto is None or conn.transport is None:
                return True
            if proto in self._ttft_handed:
                return False
            self._ttft_handed.add(proto)
            return True

        async def connect(self, req: Any, traces: Any, timeout: Any) -> aiohttp.connector.Connection:
            conn = await super().connect(req, traces, timeout)
            for _ in range(STALE_RETRIES):
                if self._first_use(conn) or not ended_by_peer(conn.transport.get_extra_info("socket")):  # type: ignore[union-attr]
                    return conn
                conn.close()  # nothing was sent on it: the same request takes another connection
                conn = await super().connect(req, traces, timeout)
            self._first_use(conn)
            return conn

    return CheckedConnector


def resend_is_safe(exc: BaseException, reused: bool) -> bool:
    """Whether a POST that failed before its response may go again, on another connection, as the same attempt.

    The rule: no byte of the request can have been consumed by the server. That holds only when

    - the connection was reused from the pool (a new one failing is the server's answer, not a race), and
    - no byte of a response came (the caller: the failure came before the headers), and
    - the failure is a reset or a broken pipe: the write met a closed transport, or the server's kernel
      refused our bytes (its socket was closed, or closed with our bytes unread). A server that read the
      whole request and then closed sends an EOF instead, so an EOF (``ServerDisconnectedError``) is never
      resent: the server may be generating the answer already, and a resend would run it twice.

    Pooled connections the server had already ended are dropped before any byte is written
    (:func:`ended_by_peer`), so the usual keep-alive race never gets here; this covers the FIN that
    crossed the request on the wire. Left out by design: a server that read a request and then aborted the
    connection (a reset with nothing unread) looks like the race and is resent.
    """
    import aiohttp

    if not reused or isinstance(exc, aiohttp.ServerDisconnectedError):
        return False
    if isinstance(exc, ConnectionResetError | BrokenPipeError | ConnectionAbortedError):
        return True  # aiohttp's ClientConnectionResetError: the write found the transport closing
    return isinstance(exc, aiohttp.ClientOSError) and exc.errno in (errno.ECONNRESET, errno.EPIPE, errno.ECONNABORTED)


def as_httpx_error(exc: BaseException, request: httpx2.Request) -> httpx2.TransportError:
    """The httpx2 error that ``exc`` (raised by aiohttp) would have been."""
    import aiohttp

    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return httpx2.ConnectTimeout(str(exc) or "connect timeout", request=request)
    if isinstance(exc, aiohttp.ServerTimeoutError | TimeoutError):
        return httpx2.ReadTimeout(str(exc) or "read timeout", request=request)
    if isinstance(exc, aiohttp.ClientConnectorError):
        refused = isinstance(exc.os_error, ConnectionRefusedError)
        err = httpx2.ConnectError("connection refused" if refused else str(exc.os_error), request=request)
        err.__cause__ = exc.os_error  # errors.py looks for ConnectionRefusedError in the chain
        return err
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return httpx2.RemoteProtocolError(_DISCONNECTED, request=request)
    if isinstance(exc, aiohttp.ClientPayloadError):
        return httpx2.RemoteProtocolError(_DROPPED, request=request)
    return httpx2.ReadError(str(exc) or type(exc).__name__, request=request)


@functools.cache
def _read_errors() -> tuple[type[BaseException], ...]:
    """What a body read raises (looked up once, not imported on each read)."""
    import aiohttp

    return (TimeoutError, aiohttp.ClientError)


class AiohttpResponse(LeanResponse):
    """One attempt's response: the attributes the lean reader and :mod:`backends.providers.errors` read
    from an ``httpx2.Response`` (status, headers, request, body), and a stamped byte stream."""

    __slots__ = (
        "_body",
        "_done",
        "_params",
        "_raw",
        "_readany",
        "_request",
        "_stamp",
        "_url",
        "headers",
        "probe",
        "status_code",
        "timeout_s",
    )

    def __init__(
        self, raw: aiohttp.ClientResponse, url: str, params: dict[str, str], probe: Probe, timeout_s: float | None
    ) -> None:
        self._raw = raw
        self.timeout_s = timeout_s
        self._url = url
        self._params = params
        self._request: httpx2.Request | None = None
        self.probe = probe
        self.status_code = raw.status
        self.headers: Mapping[str, str] = raw.headers
        self._body: bytes | None = None
        self._done = False
        self._readany = raw.content.readany
        self._stamp = probe._chunk

    async def read_stamped(self) -> bytes:
        """The body's next socket read, stamped on arrival (``Probe._chunk``); ``b""`` at its end.
        The lean reader awaits this directly, once per read (backends.providers.lean.sse)."""
        try:
            data = await self._readany()
        except _read_errors() as exc:
            raise as_httpx_error(exc, self.request) from exc
        if data:
            self._stamp(data)
        else:
            self._done = True
        return data

    async def aclose(self) -> None:
        # A body read to its end gives the connection back to the pool; otherwise (cancelled,
        # abandoned) the connection is closed, which stops the server's generation at once.
        if self._done:
            self._raw.release()
        else:
            self._raw.close()


def _step(phase: str, *, connected: bool = False, ip_only: bool = False) -> Any:
    """An aiohttp trace callback: the probe's attempt (the request's trace context) entered ``phase``.

    ``ip_only``: only when the host is an IP address (aiohttp then resolves nothing, so the
    connection's start is the connect; a host name's connect starts once it is resolved)."""

    async def on(session: Any, ctx: SimpleNamespace, params: Any) -> None:
        probe, attempt, is_ip = ctx.trace_request_ctx
        if attempt != probe.attempt or (ip_only and not is_ip):
            return
        probe.traced = True
        if connected:
            probe.connected = True
        probe.step(attempt, phase)

    return on


def tracing() -> aiohttp.TraceConfig:
    import aiohttp

    tc = aiohttp.TraceConfig()
    tc.on_connection_create_start.append(_step("connect", connected=True, ip_only=True))
    tc.on_dns_resolvehost_start.append(_step("dns", connected=True))
    tc.on_dns_resolvehost_end.append(_step("connect", connected=True))
    tc.on_dns_cache_hit.append(_step("connect", connected=True))
    tc.on_connection_create_end.append(_step("send", connected=True))
    tc.on_connection_reuseconn.append(_step("send"))
    tc.on_request_chunk_sent.append(_step("server"))
    return tc


class AiohttpClient(LoadClient):
    """An aiohttp session for many concurrent streams, feeding per-turn probes."""

    def __init__(
        self,
        *,
        timeout_s: float | None,
        connect_timeout_s: float,
        max_connections: int | None = None,
        tls: bool = True,
    ) -> None:
        super().__init__(
            timeout_s=timeout_s, connect_timeout_s=connect_timeout_s, max_connections=max_connections, tls=tls
        )
        self._session: aiohttp.ClientSession | None = None
        self._ip_hosts: dict[str, bool] = {}

    def _open_session(self, **options: Any) -> aiohttp.ClientSession:
        """The pooled session; ``options``: a subclass's own ``ClientSession`` settings over these."""
        import aiohttp

        connector = connector_class()(
            limit=self.limit,
            limit_per_host=0,
            # httpx2's trust (LoadClient.ssl_context), not aiohttp's context built when aiohttp was imported.
            ssl=self.ssl_context(),
            ttl_dns_cache=300,
        )
        # No per-read timeout: aiohttp re-arms it on every socket read (a timer per chunk). The wait
        # for the headers and a whole-body read each get one timer (send, aread); a stream's
        # silence is the turn's token-idle clock (backends.providers.hosted), as on the httpx2 path.
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.connect_timeout_s, sock_read=None)
        # No cookies kept between requests, as an SDK client without a jar: each turn stands alone.
        return aiohttp.ClientSession(
            connector=connector,
            timeout=timeout,
            cookie_jar=aiohttp.DummyCookieJar(),
            raise_for_status=False,
            trace_configs=[tracing()],
            **options,
        )

    def _is_ip(self, url: str) -> bool:
        if url not in self._ip_hosts:
            host = httpx2.URL(url).host
            try:
                ipaddress.ip_address(host)
            except ValueError:
                self._ip_hosts[url] = False
            else:
                self._ip_hosts[url] = True
        return self._ip_hosts[url]

    async def send(
        self, url: str, *, body: bytes, headers: dict[str, str], params: dict[str, str], probe: Probe
    ) -> AiohttpResponse:
        """One POST; returns once the headers are in. Raises httpx2's errors (see the module doc)."""
        import aiohttp

        if self._session is None:
            self._session = self._open_session()
        url, auth = url_credentials(url)  # aiohttp refuses credentials in the URL beside an Authorization header
        if auth is not None:
            headers = {**{k: v for k, v in headers.items() if k.lower() != "authorization"}, "Authorization": auth}
        probe.begin_attempt()
        stale = 0
        while True:
            try:
                async with asyncio.timeout(self.timeout_s):
                    raw = await self._session.post(
                        url,
                        data=body,
                        headers=headers,
                        params=params or None,
                        trace_request_ctx=(probe, probe.attempt, self._is_ip(url)),
                    )
                break
            except aiohttp.ClientConnectionError as exc:
                # A pooled connection the server closed as the request left (its keep-alive ran out):
                # resent only when the server cannot have read any of it (see resend_is_safe).
                if stale < STALE_RETRIES and resend_is_safe(exc, probe.traced and not probe.connected):
                    stale += 1
                    probe.traced = False
                    continue
                raise as_httpx_error(exc, httpx2.Request("POST", url, params=params or None)) from exc
            except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                raise as_httpx_error(exc, httpx2.Request("POST", url, params=params or None)) from exc
        return self._answered(raw, url, params, probe)

    def _answered(self, raw: aiohttp.ClientResponse, url: str, params: dict[str, str], probe: Probe) -> AiohttpResponse:
        """The headers are in: the probe is told (the status, Retry-After, the http facts, the stamp) and the
        response handed over, its body still to read."""
        t = ev.now_ns()
        probe.status = raw.status
        probe.retry_after_s = parse_retry_after(raw.headers)  # type: ignore[arg-type]
        info = http_info(
            raw.headers,
            connection=("new" if probe.connected else "reused") if probe.traced else None,
            http_version=f"HTTP/{raw.version.major}.{raw.version.minor}" if raw.version else None,
        )
        probe.push(ev.HttpResponse(t, probe.attempt, info))
        probe.push(ev.HeadersReceived(t, probe.attempt, raw.status, probe.retry_after_s))
        return AiohttpResponse(raw, url, params, probe, self.timeout_s)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
