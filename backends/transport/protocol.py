"""The load driver's body transport on an asyncio Protocol and httptools: no HTTP client's Python per read.

Why: on aiohttp about 40 of the lean reader's 79 us per chunk (256 streams) were aiohttp's own
Python per socket read (its stream reader, payload and response objects). Here each connection is
an :class:`asyncio.Protocol` whose bytes go to httptools' parser (llhttp, in C, as uvicorn parses;
:mod:`backends.transport.http1`), and each body piece is stamped as it lands and queued for the reader:
one call into Python per piece, none per layer. It runs on uvloop and on asyncio's loop alike.
This module holds the pool, the connection's opening and the request with its wait-phase stamps.

It keeps what :mod:`backends.transport.aiohttp_client` keeps, so a record does not depend on the client:
the same :class:`backends.transport.http.Probe` bookkeeping (``AttemptSent`` and ``pool`` at the send,
``dns`` only when a name is resolved and not cached, ``connect``, ``tls`` for the handshake (httpx2
stamps it too; aiohttp cannot), ``send`` once a connection is in hand, ``server`` once the request is
written, ``HttpResponse`` and ``HeadersReceived`` at the headers, each body piece stamped on arrival);
its errors raised as the httpx2 errors they correspond to, in the same words; keep-alive connections
pooled per host and bounded (a stream waiting for one counts that wait as TTFT, so the bench sizes
the pool for every stream); no request sent twice (a pooled connection the server ended is dropped
before anything is written on it, and a POST goes again only under
:func:`backends.transport.aiohttp_client.resend_is_safe`'s rule). A reader that falls behind pauses the socket
(bounded buffer) rather than buffering without end.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections import deque
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx2

from ...telemetry import events as ev
from . import pacing
from .aiohttp_client import STALE_RETRIES
from .http import Probe, parse_retry_after, url_credentials
from .http1 import Closed, Conn, ProtoResponse, as_httpx
from .load_client import LoadClient
from .meta import http_info

DNS_TTL_S = 300.0  # as the aiohttp client caches names
_RESET = (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)
CLOSED_SOON_S = 1.0  # a kept-alive connection the server ends sooner than this after its response: see _ended_early


# Set here, whatever the configured headers say: the body is read as sent (no decoder), its length is ours,
# and the connection is kept alive.
_OWN_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection", "accept-encoding"})


def _header_block(headers: dict[str, str], url: str) -> bytes:
    """The request's header lines. A name or value that would break a line (configured headers are
    untrusted) is refused, as httpx2 refuses it, before anything is sent."""
    lines = []
    auth = url_credentials(url)[1]
    if auth is not None:
        lines.append(f"Authorization: {auth}\r\n")
    for k, v in headers.items():
        if k.lower() in _OWN_HEADERS or (auth is not None and k.lower() == "authorization"):
            continue
        bad_name = not k or any(c in k for c in "\r\n\0: \t")
        if bad_name or any(c in v for c in "\r\n\0"):
            what = f"name {k.encode()!r}" if bad_name else f"value {v.encode()!r}"  # h11's words, as on httpx2
            raise httpx2.LocalProtocolError(f"Illegal header {what}", request=httpx2.Request("POST", url))
        lines.append(f"{k}: {v}\r\n")
    lines.append("Accept-Encoding: identity\r\n")
    return "".join(lines).encode()


class ProtoClient(LoadClient):
    """Pooled HTTP/1.1 connections for many concurrent streams, feeding per-turn probes."""

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
        self._ssl: ssl.SSLContext | None = None
        self._idle: dict[tuple[str, str, int], deque[Conn]] = {}
        self._closes_after_response: set[tuple[str, str, int]] = set()  # targets not to pool for (_pooled)
        self._open = 0
        self._slots: asyncio.Semaphore | None = None
        self._dns: dict[tuple[str, int], tuple[float, list[Any]]] = {}
        self._targets: dict[str, tuple[tuple[str, str, int], bytes]] = {}

    def _target(self, url: str, params: dict[str, str]) -> tuple[tuple[str, str, int], bytes]:
        """The pool key and the request line + Host header for ``url`` (parsed once per URL)."""
        cache_key = url + "?" + urlencode(params) if params else url
        hit = self._targets.get(cache_key)
        if hit is None:
            u = urlsplit(url)
            scheme, host = u.scheme.lower(), u.hostname or ""
            port = u.port or (443 if scheme == "https" else 80)
            path = (u.path or "/") + ("?" + u.query if u.query else "")
            if params:
                path += ("&" if u.query else "?") + urlencode(params)
            netloc = f"[{host}]" if ":" in host else host
            default = (scheme == "https" and port == 443) or (scheme == "http" and port == 80)
            host_header = netloc if default else f"{netloc}:{port}"
            head = f"POST {path} HTTP/1.1\r\nHost: {host_header}\r\n".encode("latin-1")
            hit = self._targets[cache_key] = ((scheme, host, port), head)
        return hit

    async def _resolve(self, host: str, port: int, probe: Probe, attempt: int) -> list[Any]:
        try:
            socket.inet_pton(socket.AF_INET6 if ":" in host else socket.AF_INET, host)
        except OSError:
            pass
        else:
            probe.step(attempt, "connect")  # an address: nothing to resolve
            return [(socket.AF_INET6 if ":" in host else socket.AF_INET, (host, port))]
        hit = self._dns.get((host, port))
        if hit is not None and time.monotonic() - hit[0] < DNS_TTL_S:
            probe.step(attempt, "connect")
            return hit[1]
        probe.step(attempt, "dns")
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        addrs = [(family, addr) for family, _t, _p, _c, addr in infos]
        self._dns[(host, port)] = (time.monotonic(), addrs)
        probe.step(attempt, "connect")
        return addrs

    async def _connect(self, key: tuple[str, str, int], probe: Probe, attempt: int) -> Conn:
        scheme, host, port = key
        loop = asyncio.get_running_loop()
        probe.traced = probe.connected = True
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                addrs = await self._resolve(host, port, probe, attempt)
                last: OSError | None = None
                for family, addr in addrs:
                    try:
                        transport, conn = await loop.create_connection(lambda: Conn(key), family=family, host=addr[0],
                                                                       port=addr[1])  # fmt: skip
                        break
                    except OSError as exc:
                        last = exc
                else:
                    raise last or OSError(f"no address for {host}")
                if scheme == "https":
                    probe.step(attempt, "tls")
                    if self._ssl is None:
                        self._ssl = self.ssl_context()
                    try:
                        tls = await loop.start_tls(transport, conn, self._ssl, server_hostname=host)
                    except BaseException:
                        transport.close()  # a failed or timed-out handshake leaves no socket behind
                        raise
                    if tls is None:
                        transport.close()
                        raise OSError("TLS handshake did not complete")
                    conn.transport = tls
        except TimeoutError as exc:
            raise httpx2.ConnectTimeout("connect timeout", request=self._req(key)) from exc
        except ssl.SSLError as exc:
            raise httpx2.ConnectError(str(exc), request=self._req(key)) from exc
        except OSError as exc:
            refused = isinstance(exc, ConnectionRefusedError)
            err = httpx2.ConnectError("connection refused" if refused else str(exc), request=self._req(key))
            err.__cause__ = exc  # errors.py looks for ConnectionRefusedError in the chain
            raise err from exc
        self._open += 1
        return conn

    @staticmethod
    def _req(key: tuple[str, str, int]) -> httpx2.Request:
        return httpx2.Request("POST", f"{key[0]}://{key[1]}:{key[2]}/")

    def _pooled(self, key: tuple[str, str, int]) -> Conn | None:
        """An idle connection to ``key`` still open; those the server ended are dropped unwritten."""
        idle = self._idle.get(key)
        for _ in range(STALE_RETRIES + 1):
            if not idle:
                return None
            conn = idle.pop()
            if conn.reusable():
                return conn
            self._ended_early(conn)
            self._drop(conn)
        return None

    def _ended_early(self, conn: Conn) -> None:
        """Note a target whose server ended a kept-alive connection within ``CLOSED_SOON_S`` of its
        response. Some servers (llama-server after a stream) close every connection right after its
        response though they offer keep-alive, and the close often reaches us after the next request
        was written on it: lost. Such a target gets a new connection each time. A close after a longer
        idle (a server's keep-alive timeout) says nothing of the next response: pooling goes on."""
        if conn.idle_since is not None and time.monotonic() - conn.idle_since < CLOSED_SOON_S:
            self._closes_after_response.add(conn.key)

    def _drop(self, conn: Conn) -> None:
        conn.close()
        self._open -= 1

    def _make_room(self) -> None:
        """At the bound, close an idle connection (of any host) before opening another."""
        for idle in self._idle.values():
            if self._open < self.limit:
                return
            while idle and self._open >= self.limit:
                self._drop(idle.popleft())

    async def send(
        self, url: str, *, body: bytes, headers: dict[str, str], params: dict[str, str], probe: Probe
    ) -> ProtoResponse:
        """One POST; returns once the headers are in. Raises httpx2's errors (see the module doc)."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.limit)
        key, head = self._target(url, params)
        attempt = probe.begin_attempt()
        request_bytes = head + _header_block(headers, url) + b"Content-Length: %d\r\n\r\n" % len(body) + body
        await self._slots.acquire()
        try:
            async with asyncio.timeout(self.timeout_s):
                conn = await self._exchange(key, request_bytes, probe, attempt)
        except TimeoutError as exc:
            self._slots.release()
            raise httpx2.ReadTimeout("read timeout", request=httpx2.Request("POST", url)) from exc
        except BaseException as exc:
            self._slots.release()
            if isinstance(exc, httpx2.TransportError):
                exc.request = httpx2.Request("POST", url, params=params or None)
            raise
        try:
            await pacing.admit()  # under a bench level, many responses land in one poll: a few a pass
        except BaseException:
            self._release(conn, False)
            raise
        t = conn.headers_ns if conn.headers_ns is not None else ev.now_ns()
        response = ProtoResponse(conn, url, params, probe, self.timeout_s, self._release)
        probe.status = response.status_code
        probe.retry_after_s = parse_retry_after(response.headers)
        info = http_info(
            response.headers, connection="new" if probe.connected else "reused", http_version=response.http_version
        )
        probe.push(ev.HttpResponse(t, probe.attempt, info))
        probe.push(ev.HeadersReceived(t, probe.attempt, response.status_code, probe.retry_after_s))
        return response

    async def _exchange(self, key: tuple[str, str, int], data: bytes, probe: Probe, attempt: int) -> Conn:
        """Writes the request on a pooled or new connection and waits for its headers. A reused
        connection that fails before any response byte goes again only under resend_is_safe's rule."""
        for stale in range(STALE_RETRIES + 1):
            conn = self._pooled(key)
            if conn is None:
                self._make_room()
                conn = await self._connect(key, probe, attempt)
            else:
                probe.traced, probe.connected = True, False
            probe.step(attempt, "send")
            headers_done = conn.begin()
            try:
                if conn.transport is None or conn.transport.is_closing():
                    raise ConnectionResetError("Cannot write to closing transport")
                conn.transport.write(data)
                probe.step(attempt, "server")
                await headers_done
                return conn
            except BaseException as exc:
                reused = not probe.connected
                if reused and not conn.got_bytes and isinstance(exc, (*_RESET, Closed)):
                    self._ended_early(conn)
                self._drop(conn)
                if stale < STALE_RETRIES and reused and not conn.got_bytes and isinstance(exc, _RESET):
                    continue  # the keep-alive race: the server cannot have read any of it
                if isinstance(exc, asyncio.CancelledError | TimeoutError | httpx2.TransportError):
                    raise
                raise as_httpx(exc, self._req(key)) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _release(self, conn: Conn, keep: bool) -> None:
        if self._slots is not None:
            self._slots.release()
        if conn.complete and conn.keep_alive and conn.lost:  # kept alive, it said, and closed at once
            self._closes_after_response.add(conn.key)
        if keep and conn.key not in self._closes_after_response and conn.reusable():
            conn.idle_since = time.monotonic()
            conn.headers_done = None  # idle: any byte now is unasked for
            self._idle.setdefault(conn.key, deque()).append(conn)
        else:
            self._drop(conn)

    async def aclose(self) -> None:
        for idle in self._idle.values():
            while idle:
                self._drop(idle.popleft())
        self._idle.clear()
