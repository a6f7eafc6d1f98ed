"""TEST FIXTURE plumbing: an aiohttp app served on 127.0.0.1 from its own thread and event loop.

Every loopback fake server (``FakeServer``, ``TLSFakeServer``, ``BatchingServer``,
``PrefillServer``) is one of these; a subclass says only what it serves (``app()``), and
optionally over TLS (``ssl_context()``) or with state bound to its loop (``setup()``)::

    class MyFake(LoopThreadServer):
        thread_name = "my-fake"

        def app(self) -> web.Application: ...

    with MyFake() as srv:
        srv.url  # http://127.0.0.1:PORT

``start()`` binds the socket itself before the thread starts (port 0: the kernel picks a free
one, so no other process can take it between choosing and binding), runs the app on a fresh
loop in a daemon thread, and returns once it accepts connections; an error while booting is
raised there, not swallowed in the thread. ``stop()`` shuts the app down on its own loop,
stops the loop and joins the thread; it is safe to call twice. ``serve_forever()`` serves on
the caller's running loop instead, for ``python -m tests.fakes...`` runs in their own process.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import threading
from collections.abc import Callable
from typing import Self

from aiohttp import web

START_TIMEOUT_S = 30  # a loaded CI machine can take seconds to schedule a new thread's boot


class LoopThreadServer:
    thread_name = "loopback-fake"
    backlog = 128  # pending connections; a fake that takes hundreds of streams at once raises it

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port  # 0: a free one, chosen at start (and kept, so a restart gets the same one)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._sock: socket.socket | None = None

    # --- what a subclass serves ---------------------------------------------------------
    def app(self) -> web.Application:
        raise NotImplementedError

    def ssl_context(self) -> ssl.SSLContext | None:
        return None

    async def setup(self) -> None:
        """Runs on the server's loop before it serves: make loop-bound state (semaphores) here."""

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    # --- lifecycle ----------------------------------------------------------------------
    def _bind(self) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
        except OSError:
            sock.close()
            raise
        self.port = sock.getsockname()[1]
        self._sock = sock
        return sock

    async def _serve(self, sock: socket.socket) -> None:
        await self.setup()
        self._runner = web.AppRunner(self.app(), access_log=None, handle_signals=False, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.SockSite(self._runner, sock, ssl_context=self.ssl_context(), backlog=self.backlog)
        await site.start()

    def start(self) -> Self:
        sock = self._bind()
        loop = self._loop = asyncio.new_event_loop()
        ready = threading.Event()
        failed: list[BaseException] = []

        def main() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._serve(sock))
            except BaseException as e:  # raised again by start(), on the caller's thread
                failed.append(e)
                ready.set()
                return
            ready.set()
            loop.run_forever()

        self._thread = threading.Thread(target=main, name=f"{self.thread_name}-{self.port}", daemon=True)
        self._thread.start()
        if not ready.wait(START_TIMEOUT_S) or failed:
            self.stop()
            raise RuntimeError(f"{self.thread_name} did not start") from (failed[0] if failed else None)
        return self

    def stop(self) -> None:
        loop, self._loop = self._loop, None
        if loop is None:
            return
        if self._runner is not None and loop.is_running():
            fut = asyncio.run_coroutine_threadsafe(self._runner.cleanup(), loop)
            with contextlib.suppress(Exception):
                fut.result(5)
        self._runner = None
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(5)
        if not loop.is_running():
            loop.close()
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    async def serve_forever(self, on_ready: Callable[[], object] | None = None) -> None:
        """Serve on the running loop until cancelled (a fake run as its own process); ``on_ready`` is
        called once it accepts connections (to say so on stdout, where a parent process waits)."""
        try:
            await self._serve(self._bind())
            if on_ready is not None:
                on_ready()
            await asyncio.Event().wait()
        finally:
            if self._runner is not None:
                await self._runner.cleanup()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
