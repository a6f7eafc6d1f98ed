"""Spreads the per-request work a level's streams all want at once over passes of the event loop.

A batching server decodes every running sequence on the same step, so with equal answer lengths a
level's streams end together, and in closed loop each user then opens its next request at once. Done
where it falls, that is ~300 us of Python per request (end the record: metrics, diagnosis; build and
send the next request) in ONE pass of the loop: 256 users stall the loop for tens of milliseconds.
No socket is read meanwhile, so every stream still running gets its chunks stamped late, and the
requests just sent read their first token late: the client's own burst inside the figures.

:class:`PassSpreader` bounds that work per pass: at most ``opens_per_pass`` requests start in one
pass (the rest wait for the next passes, in order), and records are ended (:func:`backends.finish.
finish_turns`, in batches) at most ``finishes_per_pass`` at a time, in passes that start no request, after their
streams are over.
Between passes the loop polls its sockets and runs its timers, so stamps stay on time and the loop's
lag stays about one pass's budget. Nothing measured moves: a request's ``sent`` is stamped when it
is written, and a record is built from stamps already taken.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from backends.finish import finish_turns
from telemetry.record import TurnRecord
from telemetry.recorder import TurnRecorder

# ~100-200 us each to build and send a request, ~50 us to end a record in a batch, on this project's
# 2-core machines: a pass then holds at most ~1.5 ms of this work.
OPENS_PER_PASS = 8
FINISHES_PER_PASS = 32
MAX_ENDING = 4096  # records left to end past which endings no longer wait for the openings

Done = Callable[[TurnRecord], None]


class PassSpreader:
    """One level's openings and endings, spread over loop passes. Use from one event loop."""

    def __init__(
        self,
        opens_per_pass: int = OPENS_PER_PASS,
        finishes_per_pass: int = FINISHES_PER_PASS,
        max_ending: int = MAX_ENDING,
    ) -> None:
        self.opens_per_pass = max(1, opens_per_pass)
        self.finishes_per_pass = max(1, finishes_per_pass)
        self.max_ending = max_ending
        self._opened = 0  # requests let through since the last pass began
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._ending: deque[tuple[TurnRecorder, Done]] = deque()
        self._drained: list[asyncio.Future[None]] = []
        self._tick_due = False
        self.error: Exception | None = None  # the first a ``done`` callback raised

    async def open_turn(self) -> None:
        """Returns when this pass still has room for one more request to start (at once, mostly)."""
        if not self._waiting and self._opened < self.opens_per_pass:
            self._opened += 1
            self._schedule()
            return
        fut = asyncio.get_running_loop().create_future()
        self._waiting.append(fut)
        self._schedule()
        await fut

    def end_later(self, recorder: TurnRecorder, done: Done) -> None:
        """End ``recorder``'s turn within the next passes, then call ``done`` with its record."""
        self._ending.append((recorder, done))
        self._schedule()

    async def drain(self) -> None:
        """Returns once every turn handed to :meth:`end_later` has been ended and ``done`` called;
        raises what a ``done`` callback raised, if one did."""
        if self._ending:
            fut = asyncio.get_running_loop().create_future()
            self._drained.append(fut)
            self._schedule()
            await fut
        if self.error is not None:
            raise self.error

    def end_now(self) -> None:
        """End every queued turn here and now (a level cancelled: nothing left to stall)."""
        while self._ending:
            self._end(len(self._ending))

    def _schedule(self) -> None:
        if not self._tick_due:
            self._tick_due = True
            asyncio.get_running_loop().call_soon(self._pass)

    def _pass(self) -> None:
        """Runs once per loop pass while there is work: a new pass's room for openings, one batch of
        endings, and a tick on the next pass if any of it is left."""
        self._tick_due = False
        self._opened = 0
        while self._waiting and self._opened < self.opens_per_pass:
            fut = self._waiting.popleft()
            if not fut.done():  # a cancelled waiter gives its place to the next
                fut.set_result(None)
                self._opened += 1
        # Openings first: a request waiting to go out is a user kept waiting, a record waiting to be
        # ended only memory. So records are ended in passes that start no request, unless too many wait.
        if self._ending and (not self._opened or len(self._ending) > self.max_ending):
            self._end(self.finishes_per_pass)
        if not self._ending:
            for fut in self._drained:
                if not fut.done():
                    fut.set_result(None)
            self._drained.clear()
        if self._waiting or self._ending or self._opened:
            self._schedule()

    def _end(self, n: int) -> None:
        batch = [self._ending.popleft() for _ in range(min(n, len(self._ending)))]
        records = finish_turns([recorder for recorder, _ in batch])  # one numpy call per answer length
        for (_, done), record in zip(batch, records, strict=True):
            try:
                done(record)
            except Exception as exc:  # raised by drain(), in the level's task, not lost in a loop callback
                if self.error is None:
                    self.error = exc
