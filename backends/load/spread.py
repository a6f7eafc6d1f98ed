"""Spreads the per-request work a level's streams all want at once over passes of the event loop.

A batching server decodes every running sequence on the same step, so with equal answer lengths a
level's streams end together, and in closed loop each user then opens its next request at once. Done
where it falls, that is ~300 us of Python per request (end the record: metrics, diagnosis; build and
send the next request) in ONE pass of the loop: 256 users stall the loop for tens of milliseconds.
No socket is read meanwhile, so every stream still running gets its chunks stamped late, and the
requests just sent read their first token late: the client's own burst inside the figures.

:class:`PassSpreader` bounds that work per pass: at most ``opens_per_pass`` requests start, or
take in their response's headers (the Protocol transport, through :mod:`backends.transport.pacing`), in one pass (the
rest wait for the next passes, in order), and records are ended (:func:`backends.finish.
finish_turns`) in batches of up to ``finishes_per_pass``, in passes that start no request, once a
batch has gathered or its oldest record has waited ``ending_wait_s``.
Between passes the loop polls its sockets and runs its timers, so stamps stay on time and the loop's
lag stays about one pass's budget. Nothing measured moves: a request's ``sent`` is stamped when it
is written, and a record is built from stamps already taken.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from ...telemetry.record import TurnRecord
from ...telemetry.recorder import TurnRecorder
from ..finish import finish_turns

# ~100-200 us each to build and send a request, ~50-110 us to end a record in a batch, on this project's
# 2-core machines: a pass then holds about 1-2 ms of this work at most.
OPENS_PER_PASS = 8
FINISHES_PER_PASS = 16
MAX_ENDING = 4096  # records left to end past which endings no longer wait for the openings
ENDING_WAIT_S = 0.1  # the longest a record waits for a batch to gather

Done = Callable[[TurnRecord], None]


class PassSpreader:
    """One level's openings and endings, spread over loop passes. Use from one event loop."""

    def __init__(
        self,
        opens_per_pass: int = OPENS_PER_PASS,
        finishes_per_pass: int = FINISHES_PER_PASS,
        max_ending: int = MAX_ENDING,
        ending_wait_s: float = ENDING_WAIT_S,
    ) -> None:
        self.opens_per_pass = max(1, opens_per_pass)
        self.finishes_per_pass = max(1, finishes_per_pass)
        self.max_ending = max_ending
        self.ending_wait_s = ending_wait_s
        self._opened = 0  # requests let through since the last pass began
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._ending: deque[tuple[TurnRecorder, Done, float]] = deque()  # (..., loop time it was queued)
        self._drained: list[asyncio.Future[None]] = []
        self._tick_due = False
        self._timer: asyncio.TimerHandle | None = None
        self.error: Exception | None = None  # the first a ``done`` callback raised

    async def admit(self) -> None:
        """Returns when this pass still has room for one more request's heavy step (at once, mostly):
        building and sending a request, or taking in its response's headers (:func:`admit`)."""
        if not self._waiting and self._opened < self.opens_per_pass:
            self._opened += 1
            self._schedule()
            return
        fut = asyncio.get_running_loop().create_future()
        self._waiting.append(fut)
        self._schedule()
        await fut

    def end_later(self, recorder: TurnRecorder, done: Done) -> None:
        """End ``recorder``'s turn within ``ending_wait_s`` (sooner once a batch has gathered), then
        call ``done`` with its record."""
        loop = asyncio.get_running_loop()
        self._ending.append((recorder, done, loop.time()))
        if self._batch_ready(loop):
            self._schedule()
        elif self._timer is None:
            self._timer = loop.call_at(self._ending[0][2] + self.ending_wait_s, self._on_timer)

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

    def _batch_ready(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Whether to end records now: a full batch (its ITL percentiles cost one numpy call, however
        many records share it), a drain waiting, or the oldest record queued ``ending_wait_s`` (what
        reads the records, such as a progress line, is never later than that)."""
        return bool(self._ending) and (
            len(self._ending) >= self.finishes_per_pass
            or bool(self._drained)
            or loop.time() - self._ending[0][2] >= self.ending_wait_s
        )

    def _schedule(self) -> None:
        if not self._tick_due:
            self._tick_due = True
            asyncio.get_running_loop().call_soon(self._pass)

    def _on_timer(self) -> None:
        self._timer = None
        self._schedule()

    def _pass(self) -> None:
        """Runs once per loop pass while there is work: a new pass's room for openings, one batch of
        endings when one is ready, and a tick on the next pass (or a timer) if any of it is left."""
        self._tick_due = False
        self._opened = 0
        while self._waiting and self._opened < self.opens_per_pass:
            fut = self._waiting.popleft()
            if not fut.done():  # a cancelled waiter gives its place to the next
                fut.set_result(None)
                self._opened += 1
        loop = asyncio.get_running_loop()
        # Openings first: a request waiting to go out is a user kept waiting, a record waiting to be
        # ended only memory. So records are ended in passes that start no request, unless too many wait.
        if self._batch_ready(loop) and (not self._opened or len(self._ending) > self.max_ending):
            self._end(self.finishes_per_pass)
        if not self._ending:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            for fut in self._drained:
                if not fut.done():
                    fut.set_result(None)
            self._drained.clear()
        if self._waiting or self._opened or self._batch_ready(loop):
            self._schedule()
        elif self._ending and self._timer is None:
            self._timer = loop.call_at(self._ending[0][2] + self.ending_wait_s, self._on_timer)

    def _end(self, n: int) -> None:
        batch = [self._ending.popleft() for _ in range(min(n, len(self._ending)))]
        records = finish_turns([recorder for recorder, _, _ in batch])  # one numpy call per answer length
        for (_, done, _), record in zip(batch, records, strict=True):
            try:
                done(record)
            except Exception as exc:  # raised by drain(), in the level's task, not lost in a loop callback
                if self.error is None:
                    self.error = exc
