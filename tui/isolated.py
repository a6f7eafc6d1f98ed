"""A backend in its own process, so painting can never delay a timestamp.

The chat's UI thread and a stream thread in the same interpreter share one GIL: while
the UI paints, bytes that arrived wait to be read and stamped. Here the real backend
(SDK client, HTTP stream, or the local llama.cpp engine) lives in a child process that
stamps every event as its bytes arrive and sends it down a pipe; the parent only
unpickles events and feeds the recorder. Stamps come from ``time.monotonic_ns`` (the
system-wide CLOCK_MONOTONIC), so the two processes share one clock.

``ProcessBackend`` implements the Backend protocol, so ``run_turn`` and the recorder
do not know the difference. Cancelling a turn tells the child to close its stream, and
waits (briefly) until it has, so the server sees the disconnect at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing as mp
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from multiprocessing.connection import Connection
from typing import Any

from backends.base import ChatRequest
from telemetry import events as ev

START_TIMEOUT_S = 60.0  # importing the SDKs or llama.cpp can be slow on a cold disk
CANCEL_WAIT_S = 2.0


class BackendStartError(Exception):
    """The child could not create the backend (bad spec, missing key, ...): printable, with a hint."""

    def __init__(self, message: str, *, kind: str = "provider_error", hint: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.hint = hint


# --- the child ---------------------------------------------------------------------------
def _child(conn: Connection, spec: str, base_url: str | None) -> None:  # pragma: no cover - runs in the child
    asyncio.run(_child_main(conn, spec, base_url))


async def _child_main(conn: Connection, spec: str, base_url: str | None) -> None:  # pragma: no cover
    from backends.providers import create_backend

    try:
        backend = create_backend(spec, base_url=base_url)
    except Exception as exc:
        conn.send(
            ("error", str(exc) or repr(exc), getattr(exc, "kind", type(exc).__name__), getattr(exc, "hint", None))
        )
        return
    conn.send(("ready", backend.provider, backend.api, backend.model, backend.base_url))
    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue[Any] = asyncio.Queue()

    def readable() -> None:
        try:
            while conn.poll():
                inbox.put_nowait(conn.recv())
        except (EOFError, OSError):
            inbox.put_nowait(("close",))

    loop.add_reader(conn.fileno(), readable)

    async def run(request: ChatRequest) -> None:
        stream = backend.stream(request)
        try:
            async for e in stream:
                conn.send(("event", e))
        except asyncio.CancelledError:
            conn.send(("event", ev.Cancelled(ev.now_ns())))
        except Exception as exc:  # a backend bug still ends the turn with a record
            conn.send(("event", ev.Failed(ev.now_ns(), type(exc).__name__, str(exc) or repr(exc))))
        finally:
            with contextlib.suppress(Exception):
                await stream.aclose()  # type: ignore[attr-defined]
            conn.send(("end",))

    current: asyncio.Task[None] | None = None
    while True:
        cmd = await inbox.get()
        if cmd[0] == "turn":
            current = asyncio.create_task(run(cmd[1]))
        elif cmd[0] == "cancel":
            if current is not None and not current.done():
                current.cancel()
            else:
                conn.send(("end",))
        elif cmd[0] == "close":
            if current is not None and not current.done():
                current.cancel()
                with contextlib.suppress(BaseException):
                    await current
            with contextlib.suppress(Exception):
                await backend.aclose()
            with contextlib.suppress(Exception):
                conn.send(("closed",))
            return


# --- the parent --------------------------------------------------------------------------
_stdio_lock = threading.Lock()


@contextlib.contextmanager
def _real_stdio() -> Iterator[None]:
    """Textual swaps sys.stdout/stderr for capture objects without a file descriptor, which
    multiprocessing hands to the child; start it with the real ones."""
    with _stdio_lock:
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
        try:
            yield
        finally:
            sys.stdout, sys.stderr = saved


class ProcessBackend:
    """The Backend protocol, served by a child process running ``create_backend(spec)``."""

    def __init__(self, spec: str, base_url: str | None = None) -> None:
        ctx = mp.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_child, args=(child, spec, base_url), daemon=True, name="ttft-backend")
        with _real_stdio():
            self._proc.start()
        child.close()
        if not self._conn.poll(START_TIMEOUT_S):
            self._kill()
            raise BackendStartError(f"The backend for {spec} did not start within {START_TIMEOUT_S:.0f} s.")
        try:
            msg = self._conn.recv()
        except EOFError:
            self._kill()
            raise BackendStartError(f"The backend process for {spec} exited while starting.") from None
        if msg[0] == "error":
            self._kill()
            raise BackendStartError(msg[1], kind=msg[2], hint=msg[3])
        _, self.provider, self.api, self.model, self.base_url = msg
        self._lock = asyncio.Lock()

    async def stream(self, request: ChatRequest) -> AsyncIterator[ev.Event]:
        loop = asyncio.get_running_loop()
        inbox: asyncio.Queue[Any] = asyncio.Queue()
        conn = self._conn

        def readable() -> None:
            try:
                while conn.poll():
                    inbox.put_nowait(conn.recv())
            except (EOFError, OSError):
                inbox.put_nowait(("gone",))

        async with self._lock:
            loop.add_reader(conn.fileno(), readable)
            ended = False
            try:
                conn.send(("turn", request))
                while True:
                    msg = await inbox.get()
                    if msg[0] == "event":
                        yield msg[1]
                    elif msg[0] == "end":
                        ended = True
                        return
                    elif msg[0] == "gone":
                        ended = True
                        yield ev.Failed(ev.now_ns(), "BackendCrashed", "The backend process exited mid-turn.")
                        return
            finally:
                if not ended:  # cancelled or abandoned: the child closes its stream; wait until it has
                    with contextlib.suppress(Exception):
                        conn.send(("cancel",))
                        deadline = loop.time() + CANCEL_WAIT_S
                        while loop.time() < deadline:
                            msg = await asyncio.wait_for(inbox.get(), deadline - loop.time())
                            if msg[0] in ("end", "gone"):
                                break
                loop.remove_reader(conn.fileno())

    async def aclose(self) -> None:
        if not self._proc.is_alive():
            return
        with contextlib.suppress(Exception):
            self._conn.send(("close",))
        await asyncio.get_running_loop().run_in_executor(None, self._proc.join, 3.0)
        self._kill()

    def _kill(self) -> None:
        if self._proc.is_alive():
            self._proc.terminate()
            self._proc.join(1.0)
        with contextlib.suppress(Exception):
            self._conn.close()
