"""What the load driver's two HTTP clients share: their settings, their TLS trust and their interface.

:class:`backends.transport.aiohttp_client.AiohttpClient` and :class:`backends.transport.protocol.ProtoClient`
are one idea on two stacks: a pool of keep-alive connections for many concurrent streams, whose POST
returns once the headers are in and feeds the turn's :class:`backends.transport.http.Probe`. The lean
readers (``backends.providers.lean.base``) hold either as a :class:`LoadClient`.
"""

from __future__ import annotations

import ssl
from abc import ABC, abstractmethod
from typing import Any

import httpcore2

from .http import Probe, no_tls_context

DEFAULT_POOL = 100  # connections per client when no size is given (aiohttp's own default)


class LoadClient(ABC):
    """Pooled connections for many concurrent streams, feeding per-turn probes.

    ``timeout_s``: the wait for the headers and a whole-body read (None: none); ``connect_timeout_s``:
    opening a connection; ``max_connections``: the pool's bound (a stream waiting for a connection would
    count that wait as TTFT, so the bench sizes it for every stream); ``tls``: whether to load the CA
    bundle (False for a plain-http server, which then pays nothing for it).
    """

    def __init__(
        self,
        *,
        timeout_s: float | None,
        connect_timeout_s: float,
        max_connections: int | None = None,
        tls: bool = True,
    ) -> None:
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.limit = max_connections or DEFAULT_POOL
        self.tls = tls

    def ssl_context(self) -> ssl.SSLContext:
        """httpx2's trust (SSL_CERT_FILE / SSL_CERT_DIR read now, as the SDK clients do), or none at all
        for a plain-http server, so both clients trust what every other ttft command trusts."""
        return httpcore2.default_ssl_context() if self.tls else no_tls_context()

    @abstractmethod
    async def send(
        self, url: str, *, body: bytes, headers: dict[str, str], params: dict[str, str], probe: Probe
    ) -> Any:
        """One POST; returns the response once its headers are in. Raises httpx2's errors."""

    @abstractmethod
    async def aclose(self) -> None:
        """Close every connection."""
