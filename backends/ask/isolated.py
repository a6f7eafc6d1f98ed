"""A backend in its own process, so painting can never delay a timestamp.

The chat's UI thread and a stream thread in the same interpreter share one GIL: while
the UI paints, bytes that arrived wait to be read and stamped. Here the real backend
(SDK client, HTTP stream, or the local llama.cpp engine) lives in a child process that
stamps every event as its bytes arrive and sends it down a pipe; the parent only
unpickles events and feeds the recorder. Stamps come from ``time.monotonic_ns`` (the
system-wide CLOCK_MONOTONIC), so the two processes share one clock.

``ProcessBackend`` implements the Backend protocol, so ``run_turn`` and the recorder
do not know the difference. The child sends the events that are ready together: one pipe
message for all those that arrived within ``SEND_EVERY_S`` (each keeps its own stamp; a turn's end
goes at once), not a pickle, a write and a wakeup of the parent per token. Chat Completions are
read by the lean reader by default (``lean``; ``ttft chat --sdk`` for the OpenAI SDK): the SDK's
parsing of each chunk into its types was the larger part of this process's CPU per token. A lean
reader's bytes come over the asyncio Protocol + httptools transport, as the bench's do, where no
proxy is in the way (:mod:`backends.providers.lean.transport`): h11's parsing under httpx2 was most
of what was left.

Cancelling a turn tells the child to close its stream, and waits (briefly) until it has, so
the server sees the disconnect at once.

The child ignores the terminal's signals (SIGHUP when it closes, SIGINT): they reach the whole
process group, and the parent alone decides, by cancelling the turn and closing the pipe (a pipe
closed by a parent that died closes the child too). So a closed terminal ends the turn as cancelled,
never as a crash of the backend's process.

A child that dies mid-turn (a native crash in llama.cpp, the OOM killer's SIGKILL) ends
the turn with ``Failed("engine_crashed")``, naming the signal and what to try; what had
arrived stays in the recorder. The next turn starts a fresh child.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing as mp
import signal
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from multiprocessing.connection import Connection
from typing import Any

from ...telemetry import events as ev
from ...telemetry.cost import PriceRef
from ...telemetry.errors import ErrorKind, TtftError, describe
from ...telemetry.log.crashes import report_once, with_report
from ...telemetry.log.secrets import KNOWN, mask, masked, remember
from ..base import ChatRequest

START_TIMEOUT_S = 60.0  # importing the SDKs or llama.cpp can be slow on a cold disk
CANCEL_WAIT_S = 2.0
EXIT_WAIT_S = 2.0  # the pipe closes a moment before the dead child can be reaped
# The child sends what arrived within this long in one message: at thousands of tokens/s a message per
# socket read (a pickle, a write and a wake-up of the parent each) was a third of both processes' CPU per
# token; the UI paints at 30 fps, and each event keeps the stamp of its own read.
SEND_EVERY_S = 0.004
# What a terminal sends its whole foreground process group: for the parent to act on, not the child.
TERMINAL_SIGNALS = tuple(getattr(signal, name) for name in ("SIGHUP", "SIGINT") if hasattr(signal, name))

# What each way of dying means, in words, and what to try. Native faults point at the engine.
_NATIVE_HINT = (
    "What arrived is kept. Send it again (F5); if it crashes again, try another model "
    "(-m local:gemma3-270m), TTFT_LLAMA_EXTRA_BUFTS=off, or a newer llama-cpp-python."
)
CRASH_WORDS: dict[int, tuple[str, str]] = {
    signal.SIGSEGV: ("a segmentation fault", _NATIVE_HINT),
    signal.SIGBUS: ("a bus error", _NATIVE_HINT),
    signal.SIGILL: ("an illegal instruction (a build for another CPU?)", _NATIVE_HINT),
    signal.SIGFPE: ("an arithmetic fault", _NATIVE_HINT),
    signal.SIGABRT: ("an abort (a failed assertion in native code)", _NATIVE_HINT),
    signal.SIGKILL: (
        "SIGKILL, usually the out-of-memory killer",
        "What arrived is kept. Free some memory or use a smaller model or context (n_ctx), then send it again.",
    ),
}


def crash_event(exitcode: int | None, what: str) -> ev.Failed:
    """The turn's end when the child died: which signal (or exit status), in words, with a hint."""
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        words, hint = CRASH_WORDS.get(-exitcode, ("a signal", "What arrived is kept. Send it again (F5)."))
        message = f"The {what} process was killed by {name} ({words}) mid-turn."
    else:
        status = "an unknown status" if exitcode is None else f"status {exitcode}"
        message = f"The {what} process exited with {status} mid-turn."
        hint = "What arrived is kept. Send it again (F5)."
    return ev.Failed(ev.now_ns(), ErrorKind.ENGINE_CRASHED, message, None, hint)


class BackendStartError(TtftError):
    """The child could not create the backend (bad spec, missing key, ...): printable, with a hint."""

    kind: ErrorKind = ErrorKind.PROVIDER_ERROR

    def __init__(self, message: str, *, kind: ErrorKind = ErrorKind.PROVIDER_ERROR, hint: str | None = None) -> None:
        super().__init__(message, kind=kind, hint=hint)


def start_error(exc: BaseException) -> tuple[str, ErrorKind, str | None]:
    """What the child sends when it cannot create its backend: (message, kind, hint). One of ttft's own
    errors keeps its kind; any other is a provider_error whose message names the exception's class."""
    kind, message, hint = describe(exc)
    message = mask(message)  # the parent does not know this process's secrets
    if isinstance(kind, ErrorKind):
        return message, kind, hint
    return f"The backend could not be created ({kind}: {message}).", ErrorKind.PROVIDER_ERROR, hint


# --- the child ---------------------------------------------------------------------------
def _child(
    conn: Connection, spec: str, base_url: str | None, timeout_s: float | None = None, lean: bool = True
) -> None:  # pragma: no cover - runs in the child
    from ..mcp.config_secrets import remember_config_secrets

    for s in TERMINAL_SIGNALS:
        signal.signal(s, signal.SIG_IGN)
    remember_config_secrets()  # as tui.cli does: what this process writes (a crash report) masks them too
    try:
        asyncio.run(_child_main(conn, spec, base_url, timeout_s, lean))
    except Exception as exc:  # never a traceback on the terminal the chat draws on: a crash report
        path = report_once(exc, "the backend process")  # the parent says the line: shown there, never run
        where = f"the crash report is {path}" if path else "its crash report could not be written"
        line = mask(f"ttft hit an unexpected error ({type(exc).__name__}); {where}")
        with contextlib.suppress(Exception):
            conn.send(("crashed", line))
        sys.exit(70)


async def _child_main(
    conn: Connection, spec: str, base_url: str | None, timeout_s: float | None = None, lean: bool = True
) -> None:  # pragma: no cover
    from ..providers.lean.transport import chat_transport
    from ..providers.registry import create_backend

    try:
        # server_gauges: a compat server's queue and KV use, recorded with each turn for the pane
        backend = create_backend(spec, base_url=base_url, timeout_s=timeout_s, server_gauges=True, lean=lean)
        use_proto = getattr(backend, "use_aiohttp", None)  # a lean reader's, through the gauges' wrapper
        if use_proto is not None and chat_transport(spec, base_url, lean) == "proto":
            use_proto("proto")
    except Exception as exc:
        conn.send(("error", *start_error(exc)))
        return
    price = getattr(backend, "price", None)
    # The secrets this process sends go to the parent too: it masks them where it keeps what was typed.
    conn.send(("ready", backend.provider, backend.api, backend.model, backend.base_url, price, KNOWN.given()))
    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue[Any] = asyncio.Queue()

    def readable() -> None:
        try:
            while conn.poll():
                inbox.put_nowait(conn.recv())
        except (EOFError, OSError):
            inbox.put_nowait(("close",))

    loop.add_reader(conn.fileno(), readable)

    ready: list[ev.Event] = []
    timer: asyncio.TimerHandle | None = None

    def flush() -> None:
        nonlocal timer
        if timer is not None:
            timer.cancel()
            timer = None
        if ready:
            conn.send(("events", ready[:]))
            ready.clear()

    def send(e: ev.Event) -> None:
        nonlocal timer
        ready.append(e)
        if isinstance(e, ev.TERMINAL):
            flush()  # the turn's end goes at once: the full render waits for it
        elif timer is None:
            timer = loop.call_later(SEND_EVERY_S, flush)

    async def run(request: ChatRequest) -> None:
        stream = backend.stream(request)
        try:
            async for e in stream:
                if type(e) is ev.Failed:  # masked at the source, whatever the parent knows
                    e = masked(e)
                send(e)
        except asyncio.CancelledError:
            send(ev.Cancelled(ev.now_ns()))
        except Exception as exc:  # a backend bug still ends the turn with a record
            send(masked(with_report(ev.Failed.of(exc), exc, "a turn in the backend process")))
        finally:
            with contextlib.suppress(Exception):
                await stream.aclose()  # type: ignore[attr-defined]
            flush()
            conn.send(("end",))

    async def warm(extra: dict[str, Any] | None) -> None:
        from ..turn import warm_up

        try:
            await warm_up(backend, extra)
        finally:
            with contextlib.suppress(Exception):
                conn.send(("warmed",))

    current: asyncio.Task[None] | None = None
    while True:
        cmd = await inbox.get()
        if cmd[0] == "turn":
            current = asyncio.create_task(run(cmd[1]))
        elif cmd[0] == "warm":  # first-use costs now, outside any turn; the parent holds its turn lock meanwhile
            current = asyncio.create_task(warm(cmd[1] if len(cmd) > 1 else None))
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

    price: PriceRef | None = None  # the child's backend's (telemetry.cost): its turns are priced here

    def __init__(
        self, spec: str, base_url: str | None = None, *, timeout_s: float | None = None, lean: bool = True
    ) -> None:
        """``lean``: Chat Completions without the OpenAI SDK (``create_backend``'s ``lean``)."""
        self._spec, self._base_url, self._timeout_s, self._lean = spec, base_url, timeout_s, lean
        self._start()
        self._lock = asyncio.Lock()

    def _start(self) -> None:
        spec = self._spec
        ctx = mp.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(
            target=_child,
            args=(child, spec, self._base_url, self._timeout_s, self._lean),
            daemon=True,
            name="ttft-backend",
        )
        with _real_stdio():
            self._proc.start()
        child.close()
        if not self._conn.poll(START_TIMEOUT_S):
            self._kill()
            raise BackendStartError(f"The backend for {spec} did not start within {START_TIMEOUT_S:.0f} s.")
        try:
            msg = self._conn.recv()
        except EOFError:
            self._proc.join(EXIT_WAIT_S)
            self._kill()
            died = crash_event(self._proc.exitcode, "backend")
            raise BackendStartError(died.message, kind=ErrorKind.ENGINE_CRASHED, hint=died.hint) from None
        if msg[0] == "error":
            self._kill()
            raise BackendStartError(msg[1], kind=msg[2], hint=msg[3])
        _, self.provider, self.api, self.model, self.base_url, self.price, known = msg
        remember(*known)  # a key pasted into a prompt is masked in the history and drafts (secrets.mask)

    @property
    def pid(self) -> int | None:
        """The child's process id (what a crash test signals)."""
        return self._proc.pid

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
            if not self._proc.is_alive():  # the last turn's child died: this turn gets a fresh one
                try:
                    await loop.run_in_executor(None, self._restart)
                except BackendStartError as exc:
                    yield ev.Failed.of(exc)
                    return
                conn = self._conn
            loop.add_reader(conn.fileno(), readable)
            ended = False
            said = ""
            try:
                conn.send(("turn", request))
                while True:
                    msg = await inbox.get()
                    if msg[0] == "events":
                        for e in msg[1]:
                            yield e
                    elif msg[0] == "end":
                        ended = True
                        return
                    elif msg[0] == "crashed":  # the child's own unforeseen error: its crash report's line
                        said = msg[1]
                    elif msg[0] == "gone":
                        ended = True
                        await loop.run_in_executor(None, self._proc.join, EXIT_WAIT_S)
                        died = crash_event(self._proc.exitcode, "engine" if self.provider == "local" else "backend")
                        yield replace(died, message=f"{died.message} {said}") if said else died
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

    async def warm_up(self, extra: dict[str, Any] | None = None) -> None:
        """Have the child pay its first-use costs now (the SDK's first stream, a local model's load), outside
        any turn; a turn started meanwhile waits for it (the chat calls this at start-up, while the user types)."""
        async with self._lock:
            if self._proc.is_alive():
                await asyncio.get_running_loop().run_in_executor(None, self._warm_blocking, extra)

    def _warm_blocking(self, extra: dict[str, Any] | None) -> None:
        with contextlib.suppress(EOFError, OSError):  # a child that died is restarted by the next turn
            self._conn.send(("warm", extra) if extra else ("warm",))
            while self._conn.recv()[0] != "warmed":
                pass

    async def aclose(self) -> None:
        if not self._proc.is_alive():
            return
        with contextlib.suppress(Exception):
            self._conn.send(("close",))
        await asyncio.get_running_loop().run_in_executor(None, self._proc.join, 3.0)
        self._kill()

    def _restart(self) -> None:
        with contextlib.suppress(Exception):
            self._conn.close()
        self._start()

    def _kill(self) -> None:
        if self._proc.is_alive():
            self._proc.terminate()
            self._proc.join(1.0)
        with contextlib.suppress(Exception):
            self._conn.close()
