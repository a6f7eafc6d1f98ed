"""The engine thread's hand-off of stamped events to the asyncio loop: appended per token, woken once per drain.

The worker stamps each event as it is produced (that stamp is the figure; the hand-off never moves it).
Waking the loop per token (``call_soon_threadsafe`` is a lock and a write to the loop's self-pipe, and
each wake-up is a pass of the loop taking the GIL from the decoding thread) cost the turn's TPOT more
than every other piece of ttft's per-token Python together. Here the worker appends to a deque (atomic
under the GIL) and wakes the loop only when no wake-up is already on its way: while the loop is busy
with the events it has, the next tokens wait in the deque and go over in one batch, each with its stamp.

While a turn decodes, even one wake-up per token cost the decoding thread 30 µs a token on a 2-core
machine: the woken loop took the GIL at each of the worker's next ctypes calls (sampling, the token's
piece, the batch), which release it. So a decode holds its events (:meth:`held`) and wakes the loop once
per step, just before it enters llama.cpp's decode (:meth:`flush`), where it leaves the GIL for
milliseconds: the loop's work then runs beside the decode, not between it and the next. An event waits
for that at most the few microseconds between its stamp and the decode's start; its stamp never moves.

The wake-up is a byte written to a pipe the loop watches, by libc's ``write`` called through
``ctypes.PyDLL``, which keeps the GIL across the call: a GIL-releasing write (``os.write``, the loop's own
self-pipe) let the woken loop take the GIL before the worker reached the decode, and the worker then
waited for the loop's pass. Where that call or the pipe is not to be had, ``call_soon_threadsafe`` wakes it.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ctypes
import os
import threading
from collections.abc import Callable, Iterator

from ...telemetry import events as ev


def _write_keeping_the_gil() -> Callable[[int, bytes, int], int] | None:
    """libc's ``write(fd, buf, n)`` as a ctypes function that does not release the GIL; None where there is none."""
    try:
        write = ctypes.PyDLL(None).write
    except (OSError, AttributeError, TypeError):  # no libc to find in this process (Windows)
        return None
    write.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t)
    write.restype = ctypes.c_ssize_t
    return write


_WRITE = _write_keeping_the_gil()


class Handoff:
    """Events from one worker thread to one loop, in order; :meth:`put` on the thread, :meth:`take` on the loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._items: collections.deque[ev.Event] = collections.deque()
        self._lock = threading.Lock()  # guards the wake-up flag, not the deque
        self._waking = False
        self._held = False  # set and read by the worker thread only
        self._ready = asyncio.Event()
        self._pipe = self._open_pipe()  # (read end, write end): the wake-up that keeps the GIL, or None

    def _open_pipe(self) -> tuple[int, int] | None:
        if _WRITE is None:
            return None
        r, w = os.pipe()
        try:
            os.set_blocking(r, False)
            os.set_blocking(w, False)  # a full pipe is a wake-up already on its way: the write may fail
            self._loop.add_reader(r, self._drain)
        except (OSError, NotImplementedError, RuntimeError):  # a loop without add_reader (Windows' proactor)
            os.close(r)
            os.close(w)
            return None
        return r, w

    def close(self) -> None:
        """Stop watching the pipe and close it (the loop's thread, once the worker is done with the hand-off)."""
        pipe, self._pipe = self._pipe, None
        if pipe is None:
            return
        with contextlib.suppress(Exception):  # a closed loop has no reader left to remove
            self._loop.remove_reader(pipe[0])
        for fd in pipe:
            os.close(fd)

    def _drain(self) -> None:
        if self._pipe is not None:
            with contextlib.suppress(OSError):
                os.read(self._pipe[0], 4096)
        self._wake()

    def put(self, e: ev.Event) -> None:
        """Hand ``e`` on (the worker thread). Wakes the loop unless a wake-up is already pending, or the
        worker holds its events until its next :meth:`flush`."""
        self._items.append(e)
        if not self._held:
            self.flush()

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Inside, :meth:`put` only queues; the worker calls :meth:`flush` where the loop should run (before
        a decode). Leaving flushes what is left (the turn's end)."""
        self._held = True
        try:
            yield
        finally:
            self._held = False
            self.flush()

    def flush(self) -> None:
        """Wake the loop for what is queued (the worker thread), unless nothing is or a wake-up is pending."""
        if not self._items:
            return
        with self._lock:
            if self._waking:
                return
            self._waking = True
        pipe = self._pipe
        if pipe is not None and _WRITE is not None:
            _WRITE(pipe[1], b"\x01", 1)  # the loop runs once this thread leaves the GIL (see the module doc)
            return
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody is listening
            self._loop.call_soon_threadsafe(self._wake)

    def _wake(self) -> None:
        with self._lock:
            self._waking = False
        self._ready.set()

    async def take(self) -> list[ev.Event]:
        """Every event handed on so far, oldest first, waiting for at least one."""
        while not self._items:
            self._ready.clear()
            if self._items:  # one arrived between the check and the clear: its wake-up may be spent
                break
            await self._ready.wait()
        out: list[ev.Event] = []
        with contextlib.suppress(IndexError):
            while True:
                out.append(self._items.popleft())
        return out
