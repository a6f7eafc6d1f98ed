"""Runs turns off the rendering path.

Each backend lives in one background thread with its own asyncio loop: bytes are
read and stamped there, the recorder is fed there, the session log is written
there. The UI thread only polls ``recorder.snapshot()`` at its frame rate, so a
slow paint can never delay a timestamp. Several panes (compare mode) can share a
runner, so their requests start on the same loop at the same instant.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import gc
import itertools
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from ..backends.ask.core import TurnCore
from ..backends.base import ChatRequest
from ..telemetry.record import TurnRecord
from ..telemetry.recorder import TurnRecorder

if TYPE_CHECKING:
    from ..backends.agent.loop import AgentTurn

T = TypeVar("T")

# The stream thread must get the GIL back quickly when bytes arrive while the UI
# thread is busy painting: 0.5 ms instead of CPython's default 5 ms.
SWITCH_INTERVAL_S = 0.0005


class LoopThread:
    """A daemon thread running an asyncio loop; coroutines are submitted from any thread."""

    def __init__(self, name: str = "ttft-stream") -> None:
        if sys.getswitchinterval() > SWITCH_INTERVAL_S:
            sys.setswitchinterval(SWITCH_INTERVAL_S)
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coro: Awaitable[T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)  # type: ignore[arg-type]

    async def call(self, fn: Callable[[], Awaitable[T]]) -> T:
        """Run ``fn()`` on the stream loop and await it from the UI loop."""
        return await asyncio.wrap_future(self.submit(fn()))

    def close(self, timeout: float = 2.0) -> None:
        if self.loop.is_closed():
            return

        async def _drain() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        if self._thread.is_alive():
            with contextlib.suppress(Exception):
                self.submit(_drain()).result(timeout)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout)
        if not self._thread.is_alive():
            self.loop.close()


@dataclass
class LiveTurn:
    """A turn in flight: the recorder the UI polls (a tool-using turn's UI moves it to each model step as it
    draws that step), the turn itself (``core``: its loop and steps so far) and the future holding its record."""

    recorder: TurnRecorder
    request: ChatRequest
    core: TurnCore | None = None
    future: concurrent.futures.Future[TurnRecord] = field(init=False)
    log_error: str | None = None
    _loop: asyncio.AbstractEventLoop | None = None
    _task: asyncio.Task[Any] | None = None
    _cancel_requested: bool = False

    @property
    def done(self) -> bool:
        return self.future.done()

    @property
    def agent(self) -> AgentTurn | None:
        """The agent loop of a tool-using turn; None for a plain one."""
        return self.core.agent if self.core is not None else None

    def cancel(self) -> None:
        """Stop the turn; the record keeps what arrived and says Cancelled."""
        self._cancel_requested = True
        if self._loop is not None and self._task is not None:
            self._loop.call_soon_threadsafe(self._task.cancel)

    async def wait(self) -> TurnRecord:
        return await asyncio.wrap_future(self.future)


def start(runner: LoopThread, core: TurnCore) -> LiveTurn:
    """Run ``core`` (:class:`backends.ask.core.TurnCore`, the turn every front end runs) on the runner's loop;
    returns at once. Cancelling stops it wherever it is; the record keeps every step that arrived. A bug
    outside the turn's own guards still ends it with a record, never a crash."""
    live = LiveTurn(core.recorder, core.request, core)
    where = "a chat turn with tools" if core.agent is not None else "a chat turn"

    async def drive() -> TurnRecord:
        live._loop = asyncio.get_running_loop()
        live._task = task = asyncio.current_task()
        try:
            if live._cancel_requested:  # cancelled before it began: a plain turn sends nothing
                if core.agent is None or task is None:
                    raise asyncio.CancelledError
                task.cancel()  # the loop's first await raises: it records the turn as cancelled
            record = await core.run()
        except (asyncio.CancelledError, Exception) as exc:
            record = core.failed(exc, where)  # what arrived, recorded and logged
        live.log_error = core.log_error  # the turn stays on screen and in memory, the user is told
        return record

    live.future = runner.submit(drive())
    return live


DEFERRED_GEN2_THRESHOLD = 1_000_000  # gen1 collections before an automatic full one: in practice, never


@contextlib.contextmanager
def full_collections_between_turns() -> Iterator[None]:
    """While a UI runs: no automatic full collection (it would stall a paint, or a stamp, for 50-300 ms
    in the middle of a turn); ``collect_between_turns`` does them when a turn has ended."""
    thresholds = gc.get_threshold()
    gc.set_threshold(thresholds[0], thresholds[1], DEFERRED_GEN2_THRESHOLD)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


def collect_between_turns() -> None:
    """A garbage collection now, while nothing streams, then freeze what survived.

    A long chat holds many objects (records with every chunk's stamp, widgets), and a
    full collection over them takes 100-300 ms: during a turn, that is a stutter on
    screen and, for an in-process backend, a late timestamp. Called when a turn has
    ended, this moves the cost to a moment nobody waits on, and the frozen survivors
    are not scanned again by the collections that happen during the next turn.

    Most turns collect only what is new since the last freeze (what the turn made: a
    tenth of the time); every ``FULL_EVERY`` turns the frozen objects are collected too,
    so the garbage among them (an old turn's widgets, once compacted) is freed.
    """
    if next(_collections) % FULL_EVERY == 0:  # the first one is full
        gc.unfreeze()
    gc.collect()
    gc.freeze()


FULL_EVERY = 10
_collections = itertools.count()
