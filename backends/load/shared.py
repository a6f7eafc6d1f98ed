"""What the Python API's turns on one event loop share: one backend (so one connection pool) per target,
read as the bench reads (the lean reader on its load client), and one event-loop lag watcher.

Why: fifty ``arun_turn`` calls under ``asyncio.gather`` used to build fifty clients (an SSL context, a
pool, a connection each) in the loop they were then read on; that set-up ran while the earlier turns'
first tokens waited, and it was counted as the server's. Sharing the bench's path per loop makes the set-up
once; the watcher (the bench's own, :class:`backends.load.watch.ClientWatch`) records what lag is left on
each turn (``metrics.loop_lag_ms``), so a busy loop is never handed to the server. A ``Client``'s MCP
servers are kept here too (:meth:`LoopShare.kept_host`): started by its first turn on the loop, they serve
its later turns there, so only the first pays their start.

A loop's share lives until :func:`aclose` is awaited on that loop, or the loop shuts down through
``asyncio.run`` / ``asyncio.Runner`` (which close async generators before the loop: the share's closer
is one). The synchronous API runs its turns on one loop of its own, in a daemon thread
(:func:`run_sync`), so turns from many threads share one pool too.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import threading
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine, Hashable
from concurrent.futures import Future
from typing import Any, TypeVar

from ..agent.host import ToolHost
from ..base import Backend
from ..providers.registry import Target, create_backend
from .watch import ClientWatch

T = TypeVar("T")
POOL = 1024  # as the bench sizes its pool: a turn waiting for a free connection would count that as TTFT


def _key(target: Target, timeout_s: float | None, sdk: bool, key: str | None) -> Hashable:
    """What makes two turns' backends interchangeable. The API key's value (given, or the environment's)
    is hashed in, so that a key set after the first turn is used (never stored: only its hash, in memory)."""
    key_value = key if key is not None else os.environ.get(target.key_env) if target.key_env else None
    return (
        target.provider,
        target.kind,
        target.model,
        target.base_url,
        target.key_env,
        hash(key_value),
        tuple(sorted(target.headers.items())),
        target.timeout,
        timeout_s,
        sdk,
    )


def _bench_backend(target: Target, timeout_s: float | None, sdk: bool, key: str | None) -> Backend:
    """The backend the bench would build for ``target``: its pool sized for many streams and, without the
    SDK, the lean reader on the load client (unless a proxy is set for it: only httpx2 speaks one)."""
    from ..providers.lean.transport import default_transport, through_proxy

    backend = create_backend(target, api_key=key, timeout_s=timeout_s, lean=not sdk, max_connections=POOL)
    if not sdk and hasattr(backend, "use_aiohttp") and not through_proxy(target.spec, target.base_url):
        backend.use_aiohttp(default_transport())
    return backend


class LoopShare:
    """One event loop's backends and lag watcher (see the module doc)."""

    def __init__(self) -> None:
        self.backends: dict[Hashable, Backend] = {}
        self.watch = ClientWatch(spans=True)
        self.waiting: dict[int, int] = {}  # id(turn) -> when it began (ns): the lag spans still to read
        self.closer: AsyncGenerator[None, None] | None = None
        self.hosts: dict[object, ToolHost] = {}  # kept_host: each owner's tools on this loop
        self._starting: dict[object, asyncio.Lock] = {}

    def backend(self, target: Target, timeout_s: float | None, sdk: bool, key: str | None = None) -> Backend:
        """The loop's backend for these; ``key``: an API key given in place of the environment's."""
        slot = _key(target, timeout_s, sdk, key)
        backend = self.backends.get(slot)
        if backend is None:
            backend = self.backends[slot] = _bench_backend(target, timeout_s, sdk, key)
        return backend

    def begin(self, turn: object, t_ns: int) -> None:
        """A turn starts: the watcher ticks while any turn is in flight (and only then)."""
        if not self.waiting:
            self.watch.start_ticking()
        self.waiting[id(turn)] = t_ns

    def end(self, turn: object) -> None:
        self.waiting.pop(id(turn), None)
        if not self.waiting:
            self.watch.stop_ticking()
            self.watch.late.clear()
        else:
            self.watch.forget_before(min(self.waiting.values()))

    def lag_ms(self, start_ns: int | None, end_ns: int | None) -> float | None:
        """The loop's lag within one turn's wait; None when the turn has no wait (nothing sent, no token)."""
        if start_ns is None or end_ns is None:
            return None
        return round(self.watch.lag_between(start_ns, end_ns), 3)

    async def kept_host(self, owner: object, start: Callable[[], Awaitable[ToolHost]]) -> tuple[ToolHost, bool]:
        """``owner``'s tools on this loop (a Client's MCP servers): started by ``start`` on its first turn here
        (True), then kept for its later turns, until the loop's share is closed. Turns of one owner that
        begin together wait for one start."""
        async with self._starting.setdefault(owner, asyncio.Lock()):
            host = self.hosts.get(owner)
            if host is not None:
                return host, False
            host = self.hosts[owner] = await start()
            return host, True

    async def aclose(self) -> None:
        self.watch.stop_ticking()
        backends, self.backends = list(self.backends.values()), {}
        hosts, self.hosts = list(self.hosts.values()), {}
        self._starting.clear()
        closers = [b.aclose for b in backends] + [h.aclose for h in hosts]
        for close in closers:
            with contextlib.suppress(Exception):  # one that fails to close must not keep the others open
                await close()


_shares: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopShare] = weakref.WeakKeyDictionary()


async def _closer(share: LoopShare) -> AsyncGenerator[None, None]:
    """Suspended for the loop's life; the loop's ``shutdown_asyncgens`` closes it, and so the share."""
    try:
        yield
    finally:
        await share.aclose()


async def loop_share() -> LoopShare:
    """The running loop's share, made on its first turn."""
    loop = asyncio.get_running_loop()
    share = _shares.get(loop)
    if share is None:
        share = _shares[loop] = LoopShare()
        share.closer = _closer(share)  # held here: the loop tracks async generators weakly
        await anext(share.closer)  # run to its yield: an unstarted generator's close runs no finally
    return share


async def aclose() -> None:
    """Close the running loop's shared clients (later turns on it make new ones)."""
    share = _shares.pop(asyncio.get_running_loop(), None)
    if share is None:
        return
    closer, share.closer = share.closer, None
    await share.aclose()
    if closer is not None:
        with contextlib.suppress(RuntimeError):  # not started yet
            await closer.aclose()


# --- the synchronous API's loop -----------------------------------------------------------------
_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def _sync_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="ttft-api-loop", daemon=True).start()
            atexit.register(_close_sync_loop, loop)
            _loop = loop
        return _loop


def _close_sync_loop(loop: asyncio.AbstractEventLoop) -> None:
    """At exit: close the shared clients the synchronous turns opened (no unclosed-session warnings)."""
    if loop.is_closed() or not loop.is_running():
        return
    with contextlib.suppress(Exception):
        asyncio.run_coroutine_threadsafe(aclose(), loop).result(timeout=2)
    loop.call_soon_threadsafe(loop.stop)


def run_sync(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run ``make()`` on the synchronous API's own loop and wait for it (from any thread, also one that
    runs a loop itself: a notebook's). An interrupt while waiting cancels it."""
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is not None and running is _loop:  # waiting here would block the loop it waits for
        raise RuntimeError("a synchronous ttft call from inside its own turn (an on_event callback): use arun_turn")
    future: Future[T] = asyncio.run_coroutine_threadsafe(make(), _sync_loop())
    try:
        return future.result()
    except BaseException:
        future.cancel()
        raise
