"""Name resolution the wait can see: the pool resolves the host itself, timed, then connects with happy eyeballs.

httpcore2 resolves a host name inside its TCP connect, where no trace event sees it, so
``dns`` would hide inside ``connect``. :func:`time_dns` wraps the direct pool's network
backend in :class:`ResolvingBackend`, which reports the ``dns`` and ``connect`` steps to
the attempt that is connecting (through :data:`RESOLVED`, set by the attempt's tracer in
``backends.transport.http``) and then connects as anyio would for a host name.
"""

from __future__ import annotations

import asyncio
import contextvars
import ipaddress
import socket
from collections.abc import Callable, Iterable
from typing import Any

import httpcore2
import httpx2

# While a traced attempt connects: how the resolving backend reports its dns/connect steps.
RESOLVED: contextvars.ContextVar[Callable[[str], None] | None] = contextvars.ContextVar("ttft_resolved", default=None)
HAPPY_EYEBALLS_DELAY_S = 0.25  # RFC 8305's recommended connection attempt delay


def _interleave(infos: list[Any]) -> list[str]:
    """The resolved addresses, deduplicated, alternating address families from the resolver's first (RFC 8305)."""
    by_family: dict[int, list[str]] = {}
    for info in infos:
        addr = str(info[4][0])
        if addr not in by_family.setdefault(info[0], []):
            by_family[info[0]].append(addr)
    lists = list(by_family.values())
    out: list[str] = []
    for i in range(max((len(x) for x in lists), default=0)):
        out.extend(x[i] for x in lists if i < len(x))
    return out


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


class ResolvingBackend(httpcore2.AsyncNetworkBackend):
    """httpcore2's network backend, resolving the host name itself first so the lookup is timed.

    Then it connects to the resolved addresses as anyio does for a host name (happy eyeballs:
    families interleaved, the next attempt started 250 ms after the previous one unless it
    failed sooner, the first to connect wins), all within the one connect timeout. httpcore2's
    own backend does the same lookup inside its connect, untimed. An IP address goes straight
    through.
    """

    def __init__(self, inner: httpcore2.AsyncNetworkBackend) -> None:
        self._inner = inner

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        report = RESOLVED.get()
        if _is_ip(host):
            return await self._inner.connect_tcp(host, port, timeout, local_address, socket_options)
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        if report is not None:
            report("dns")
        try:
            async with asyncio.timeout_at(deadline):
                infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except TimeoutError as exc:
            raise httpcore2.ConnectTimeout(f"resolving {host} timed out") from exc
        except OSError as exc:
            raise httpcore2.ConnectError(str(exc)) from exc
        if report is not None:
            report("connect")
        addresses = _interleave(infos)
        return await self._connect_any(addresses, port, deadline, local_address, socket_options)

    async def _connect_any(
        self,
        addresses: list[str],
        port: int,
        deadline: float | None,
        local_address: str | None,
        socket_options: Iterable[Any] | None,
    ) -> httpcore2.AsyncNetworkStream:
        """Happy eyeballs (RFC 8305, simplified): the next address starts when the previous one has not
        connected within HAPPY_EYEBALLS_DELAY_S (or failed); the first to connect wins, the rest are cancelled."""
        loop = asyncio.get_running_loop()
        todo = list(addresses)
        pending: set[asyncio.Task[httpcore2.AsyncNetworkStream]] = set()
        error: BaseException = httpcore2.ConnectError("the host name resolved to no address")
        try:
            while todo or pending:
                if todo:
                    left = None if deadline is None else max(0.0, deadline - loop.time())
                    connect = self._inner.connect_tcp(todo.pop(0), port, left, local_address, socket_options)
                    pending.add(asyncio.ensure_future(connect))
                done, pending = await asyncio.wait(
                    pending, timeout=HAPPY_EYEBALLS_DELAY_S if todo else None, return_when=asyncio.FIRST_COMPLETED
                )
                won = []
                for t in done:
                    exc = t.exception()
                    if exc is None:
                        won.append(t)
                    else:
                        error = exc
                if won:
                    for extra in won[1:]:
                        await extra.result().aclose()
                    return won[0].result()
            raise error
        finally:
            for t in pending:
                t.cancel()
            if pending:
                await asyncio.wait(pending)
                for t in pending:
                    if not t.cancelled() and t.exception() is None:
                        await t.result().aclose()

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore2.AsyncNetworkStream:
        return await self._inner.connect_unix_socket(path, timeout, socket_options)

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def time_dns(client: httpx2.AsyncClient) -> None:
    """Wrap the direct (no proxy) pool's network backend in :class:`ResolvingBackend`.

    Private attributes of httpx2/httpcore2, checked by type: if a release moves them, the
    lookup simply stays inside ``connect`` (no dns phase), nothing breaks.
    """
    pool = getattr(getattr(client, "_transport", None), "_pool", None)
    if type(pool) is httpcore2.AsyncConnectionPool:
        inner = getattr(pool, "_network_backend", None)
        if isinstance(inner, httpcore2.AsyncNetworkBackend) and not isinstance(inner, ResolvingBackend):
            pool._network_backend = ResolvingBackend(inner)
