"""The SDKs' HTTP client, instrumented: attempts, headers and byte arrival times.

Both official SDKs accept ``http_client=httpx2.AsyncClient(...)``; its event hooks fire
once per HTTP attempt, so retries the SDK makes on its own show up here as attempts.

Where a token's timestamp comes from
------------------------------------
The response hook swaps the response's byte stream for a wrapper that reads
``now_ns()`` the moment each raw chunk comes back from the transport (one socket read),
*before* the SDK decodes it into SSE events and builds its typed models (which costs
up to ~90 ms on a process's first stream). A backend stamps each SDK event with
:meth:`Probe.stamp`: the arrival time of the most recently received chunk.

That is the arrival of the bytes that *completed* the event: the SDKs' SSE decoders are
lazy (they yield every complete event in the bytes they hold before pulling more), so
when the SDK hands over an event, the latest chunk it pulled is the one holding the
event's last byte. An event that spans two reads gets the second read's time, which is
when it became complete. Several events in one read share that read's time (they did
arrive together). What this cannot see is time the bytes spent in the kernel socket
buffer while the event loop was busy: the stamp is when the HTTP layer got them, which
on an idle loop is within a few microseconds of arrival.

Where the wait goes
-------------------
The request hook also sets httpx2's ``trace`` extension on each attempt: the connection's
steps (TCP connect, TLS handshake, request headers and body written) come back as
:class:`telemetry.events.WireStep` events the moment each begins, so the wait can be split
(``telemetry.wire``) and the live line can name the phase. Name resolution happens inside
httpcore2's TCP connect, where no trace sees it; the pool's network backend is wrapped
(:class:`backends.transport.resolve.ResolvingBackend`) so that it resolves first, timed, then connects to the
addresses (happy eyeballs). The response hook reads the headers' ``http`` facts
(``backends.transport.meta``).

Routing: several turns may share one client (and its connection pool), so each turn
gets a :class:`Probe`; the backend passes ``probe.headers`` as the SDK's
``extra_headers`` and the request hook takes that header off again before anything is
sent, so the server never sees it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import email.utils
import itertools
import os
import ssl
import time
import urllib.parse
import urllib.request
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx2

from ...telemetry import events as ev
from .meta import http_info
from .resolve import RESOLVED, time_dns

# httpx2 imports its async backend on the first connection (50-200 ms): do it now, not inside the first TTFT.
with contextlib.suppress(ImportError):
    import anyio._backends._asyncio  # noqa: F401

PROBE_HEADER = "x-ttft-probe"
# The SDKs insist on a key; a keyless backend gives them this one and the request hook
# removes it again, so a local server gets no auth header at all.
NO_KEY = "ttft-no-key"
_EXT = "ttft_probe"
DEFAULT_TIMEOUT_S = 60.0
CONNECT_TIMEOUT_S = 10.0
# The first bytes of a body that may be one JSON document (an error object in place of a stream)
# are kept, up to this many: an answer that starts otherwise keeps none.
BODY_HEAD_MAX = 16_384


class Probe:
    """One turn's view of the HTTP layer."""

    _ids = itertools.count(1)

    def __init__(self) -> None:
        self.id = f"p{next(self._ids)}"
        self.pending: deque[ev.Event] = deque()  # AttemptSent / HeadersReceived, in order
        self.attempt = 0
        self.status: int | None = None
        self.retry_after_s: float | None = None
        self.last_arrival_ns: int | None = None
        self.first_byte_ns: int | None = None
        self.reads = 0  # raw chunks of the current attempt's body
        self.body_tail = b""  # the last bytes of the current attempt's body
        self.body_head = b""  # its first bytes, while they may be one JSON document (see _keep_head)
        self.cut_head = b""  # a JSON body longer than BODY_HEAD_MAX: its first BODY_HEAD_MAX bytes
        self._head_open = True
        self.connected = False  # the current attempt opened a new connection
        self.traced = False  # the HTTP layer reported any step of the current attempt
        self.wake: asyncio.Event | None = None  # set when an event is pending (the backend yields it live)

    @property
    def headers(self) -> dict[str, str]:
        return {PROBE_HEADER: self.id}

    def stamp(self) -> int:
        """Arrival time of the bytes the SDK just handed over (now, if none arrived yet)."""
        return self.last_arrival_ns if self.last_arrival_ns is not None else ev.now_ns()

    def drain(self) -> list[ev.Event]:
        out = list(self.pending)
        self.pending.clear()
        if self.wake is not None:
            self.wake.clear()
        return out

    def push(self, e: ev.Event) -> None:
        self.pending.append(e)
        if self.wake is not None:
            self.wake.set()

    def begin_attempt(self) -> int:
        """A new attempt is leaving: reset what the last one read, stamp its send and its pool wait."""
        self.attempt += 1
        self.status = None
        self.last_arrival_ns = None
        self.reads = 0
        self.body_tail = b""
        self.body_head = self.cut_head = b""
        self._head_open = True
        self.connected = False
        self.traced = False
        t = ev.now_ns()
        self.push(ev.AttemptSent(t, self.attempt))
        self.push(ev.WireStep(t, self.attempt, "pool"))
        return self.attempt

    def step(self, attempt: int, phase: str) -> None:
        """The attempt entered ``phase`` now (ignored once a later attempt has begun)."""
        if attempt == self.attempt:
            self.push(ev.WireStep(ev.now_ns(), attempt, phase))

    def tracer(self, attempt: int) -> Callable[[str, dict[str, Any]], Awaitable[None]]:
        """httpx2's ``trace`` extension for one attempt: connection steps -> WireStep events."""

        async def trace(name: str, info: dict[str, Any]) -> None:
            if attempt != self.attempt:
                return  # a straggler of an attempt already given up
            self.traced = True
            phase = _TRACE_PHASE.get(name)
            if phase is not None:
                self.step(attempt, phase)
                if phase == "connect":
                    self.connected = True
                    RESOLVED.set(lambda p: self.step(attempt, p))
            elif name.startswith("connection.connect_tcp."):
                RESOLVED.set(None)

        return trace

    def _chunk(self, data: bytes, t: int | None = None) -> None:
        """``data`` arrived at ``t`` (now, unless the transport stamped it as it landed)."""
        if t is None:
            t = ev.now_ns()
        self.last_arrival_ns = t
        if self.first_byte_ns is None:
            self.first_byte_ns = t
        self.reads += 1
        # A read of 64 bytes or more is the whole tail by itself: no concatenation on the hot path.
        self.body_tail = data[-64:] if len(data) >= 64 else (self.body_tail + data)[-64:]
        if self._head_open:
            self._keep_head(data)

    def _keep_head(self, data: bytes) -> None:
        """Keep the body's first bytes while they can be one JSON object: a stream (``data:``,
        ``event:``, ``:``) closes the head at its first byte, so it costs a stream one check per read."""
        head = self.body_head + data
        start = head.lstrip()[:1]
        if (start and start != b"{") or len(head) > BODY_HEAD_MAX:
            self._head_open = False
            self.body_head = b""
            if start == b"{":  # an object too long to keep: its start may still hold a server's message
                self.cut_head = head[:BODY_HEAD_MAX]
            return
        self.body_head = head


# httpx2 trace names (HTTP/1.1 and HTTP/2) -> the phase that begins there (telemetry.wire.PHASES)
_TRACE_PHASE = {
    "connection.connect_tcp.started": "connect",
    "connection.start_tls.started": "tls",
    "http11.send_request_headers.started": "send",
    "http2.send_request_headers.started": "send",
    "http11.send_request_body.complete": "server",
    "http2.send_request_body.complete": "server",
}


class _StampedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, probe: Probe) -> None:
        self._inner = inner
        self._probe = probe

    async def __aiter__(self) -> AsyncIterator[bytes]:
        stamp = self._probe._chunk
        async for chunk in self._inner:
            stamp(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


def parse_retry_after(headers: httpx2.Headers) -> float | None:
    """``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date) in seconds."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return float(ms) / 1000
        except ValueError:
            pass
    ra = headers.get("retry-after")
    if not ra:
        return None
    try:
        return float(ra)
    except ValueError:
        parsed = email.utils.parsedate_tz(ra)
        if parsed is None:
            return None
        return max(0.0, email.utils.mktime_tz(parsed) - time.time())


def url_credentials(url: str) -> tuple[str, str | None]:
    """``url`` without credentials, and the ``Authorization`` value that httpx2 sends for them
    (``http://user:pass@host/v1``: Basic, percent-decoded, in place of any other header's); None when it
    has none. The load clients send what httpx2 sends."""
    u = urllib.parse.urlsplit(url)
    if u.username is None and u.password is None:
        return url, None
    pair = f"{urllib.parse.unquote(u.username or '')}:{urllib.parse.unquote(u.password or '')}"
    bare = u._replace(netloc=u.netloc.rpartition("@")[2]).geturl()
    return bare, "Basic " + base64.b64encode(pair.encode()).decode("ascii")


PROXY_ENV = ("http_proxy", "https_proxy", "all_proxy")


def proxied(url: str) -> bool:
    """Whether httpx2 would reach ``url`` through a proxy named in the environment (``HTTPS_PROXY``,
    ``ALL_PROXY``, ... less ``NO_PROXY``). The bench's own load clients speak no proxy, so such a
    URL is read over httpx2 instead: a load that bypassed the proxy would measure another path."""
    parts = urllib.parse.urlsplit(url)
    proxies = urllib.request.getproxies_environment()
    if not (proxies.get(parts.scheme.lower()) or proxies.get("all")):
        return False
    # CPython's NO_PROXY rule (the one urllib itself applies); typeshed does not list it
    bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]
    return not bypass(parts.hostname or "", proxies)


def no_tls_context() -> ssl.SSLContext:
    """The TLS context for a plain-http server (a local llama-server, vLLM, Ollama): one that trusts no CA.

    Loading the CA bundle costs 20-80 ms of every process start, inside `ttft ask`'s own delay,
    for a server that never speaks TLS. Verification stays on, so any TLS this client were ever
    asked for (it follows no redirects) fails closed rather than trusting anything.
    """
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


def needs_ca_bundle(base_url: str | None) -> bool:
    """False only for a plain ``http://`` address reached without a proxy (a proxy may itself be TLS)."""
    if not (base_url or "").lower().startswith("http://"):
        return True  # the providers' default APIs are https
    return any(os.environ.get(k) or os.environ.get(k.upper()) for k in PROXY_ENV)


class InstrumentedHTTP:
    """An ``httpx2.AsyncClient`` whose hooks feed per-turn probes."""

    def __init__(
        self,
        timeout_s: float | None = DEFAULT_TIMEOUT_S,
        *,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        max_connections: int | None = None,
        tls: bool = True,
    ):
        """``tls=False``: the server is plain http (see :func:`needs_ca_bundle`), no CA bundle is loaded."""
        self.timeout = httpx2.Timeout(timeout_s, connect=min(connect_timeout_s, timeout_s or connect_timeout_s))
        self.timeout_s = timeout_s
        self._probes: dict[str, Probe] = {}
        # A stream waiting for a free pooled connection would count that wait as TTFT, so a
        # load test sizes the pool for every stream it runs (httpx2 defaults to 100).
        self.limits = (
            httpx2.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
            if max_connections
            else httpx2.Limits()
        )
        self.client = httpx2.AsyncClient(
            timeout=self.timeout,
            limits=self.limits,
            verify=True if tls else no_tls_context(),
            event_hooks={"request": [self._on_request], "response": [self._on_response]},
        )
        time_dns(self.client)

    def new_probe(self) -> Probe:
        p = Probe()
        self._probes[p.id] = p
        return p

    def release(self, probe: Probe) -> None:
        self._probes.pop(probe.id, None)

    async def _on_request(self, request: httpx2.Request) -> None:
        if request.headers.get("authorization") == f"Bearer {NO_KEY}":
            del request.headers["authorization"]
        if request.headers.get("x-api-key") == NO_KEY:
            del request.headers["x-api-key"]
        pid = request.headers.get(PROBE_HEADER)
        if pid is None:
            return
        del request.headers[PROBE_HEADER]
        probe = self._probes.get(pid)
        if probe is None:
            return
        attempt = probe.begin_attempt()
        request.extensions = {**request.extensions, _EXT: probe, "trace": probe.tracer(attempt)}

    async def _on_response(self, response: httpx2.Response) -> None:
        t = ev.now_ns()
        probe = response.request.extensions.get(_EXT)
        if not isinstance(probe, Probe):
            return
        probe.status = response.status_code
        probe.retry_after_s = parse_retry_after(response.headers)
        info = http_info(
            response.headers,
            connection=("new" if probe.connected else "reused") if probe.traced else None,
            http_version=response.http_version,
        )
        probe.push(ev.HttpResponse(t, probe.attempt, info))
        probe.push(ev.HeadersReceived(t, probe.attempt, response.status_code, probe.retry_after_s))
        response.stream = _StampedStream(response.stream, probe)  # type: ignore[arg-type]

    async def aclose(self) -> None:
        await self.client.aclose()
