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
