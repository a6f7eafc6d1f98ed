"""The proxy's upstream hop: the bench's stamped aiohttp client, forwarding any method, bytes untouched.

:class:`ProxyUpstream` is :class:`backends.transport.aiohttp_client.AiohttpClient` (its pool, its
request tracing into the call's :class:`backends.transport.http.Probe`, its stamped reads and its
errors raised as httpx2's), so the upstream hop of a proxied call gets the same wait split (``pool``,
``dns``, ``connect``, ``send``, ``server``) and the same ``http`` facts as ttft's own turns. What
differs for a proxy:

- the body is never decompressed (``auto_decompress=False``): the client gets the upstream's bytes;
- aiohttp adds none of its own headers (``Accept``, ``Accept-Encoding``, ``User-Agent``,
  ``Content-Type``): the upstream sees the client's, as the client sent them;
- any method goes, and a redirect is never followed: the client gets it as it came;
- no cookie is kept, and a pooled connection the upstream closed is dropped before any byte is written
  on it (the parent's connector), so no request is ever sent twice.

:class:`ReadClock` is the answer's read timeout, with no timer per read.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2

from ..transport.aiohttp_client import (
    AiohttpClient,
    AiohttpResponse,
    as_httpx_error,
)
from ..transport.http import Probe

_AUTO = ("Accept", "Accept-Encoding", "User-Agent", "Content-Type")


class ProxyUpstream(AiohttpClient):
    """One pool of upstream connections for every call through the proxy (see the module doc)."""

    def _open_session(self, **options: Any) -> Any:
        return super()._open_session(auto_decompress=False, **options)  # the client gets the upstream's bytes

    async def forward(
        self, method: str, url: str, *, body: bytes, headers: list[tuple[str, str]], probe: Probe
    ) -> AiohttpResponse:
        """One request as the client sent it; returns once the upstream's headers are in (the probe has its
        attempt's events). Raises httpx2's errors, as the load client does."""
        import aiohttp

        if self._session is None:
            self._session = self._open_session()
        probe.begin_attempt()
        try:
            async with asyncio.timeout(self.timeout_s):
                raw = await self._session.request(
                    method,
                    url,
                    data=body if body or method not in ("GET", "HEAD") else None,
                    headers=headers,
                    skip_auto_headers=_AUTO,
                    allow_redirects=False,
                    trace_request_ctx=(probe, probe.attempt, self._is_ip(url)),
                )
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise as_httpx_error(exc, httpx2.Request(method, url)) from exc
        return self._answered(raw, url, {}, probe)


class ReadClock:
    """An upstream's read timeout over one answer's body, costing a read no timer.

    ``asyncio.timeout``'s ``reschedule`` around each read cancels a timer and pushes another on the
    loop's heap, twice a chunk (armed for the read, disarmed for the client's write, which may wait on a
    slow client without it counting as the upstream's silence). Here a read only notes when it began
    (``reading_since``; ``None`` while the client is written to). One timer per answer looks when due and
    re-arms for the read in progress; a read that has waited ``timeout_s`` expires ``deadline`` (the
    ``asyncio.timeout`` around the reads) at once, so the read is cancelled and ``TimeoutError`` raised
    as before. :meth:`close` before leaving that ``asyncio.timeout``.
    """

    __slots__ = ("_deadline", "_handle", "_loop", "_timeout_s", "reading_since")

    def __init__(self, deadline: asyncio.Timeout, timeout_s: float) -> None:
        self._loop = asyncio.get_running_loop()
        self._deadline = deadline
        self._timeout_s = timeout_s
        self.reading_since: float | None = None
        self._handle = self._loop.call_at(self._loop.time() + timeout_s, self._check)

    def _check(self) -> None:
        now = self._loop.time()
        since = self.reading_since
        # a millisecond's slack: the loop runs a timer up to its clock's resolution early
        if since is not None and now >= since + self._timeout_s - 0.001:
            self._deadline.reschedule(now)
            return
        self._handle = self._loop.call_at((now if since is None else since) + self._timeout_s, self._check)

    def close(self) -> None:
        self._handle.cancel()
