"""In-process fake backends on known schedules, for the compare tests and benchmark.

They implement ``backends.base.Backend`` directly (no HTTP): the compare code under
test is the orchestration, which must not care what is behind the protocol. The
wire-level backends have their own loopback tests.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from ttft.backends.base import ChatRequest
from ttft.telemetry import events as ev


@dataclass
class ScheduledBackend:
    """Answers after ``ttft_s``, then ``tokens`` text chunks ``gap_s`` apart (one token each).

    ``reasoning`` reasoning chunks come first at the same pace. ``fail_status`` makes it
    fail after the headers (with ``fail_after`` tokens streamed first); ``raise_exc`` makes
    the stream raise instead of reporting a Failed event.
    """

    model: str = "fake"
    ttft_s: float = 0.05
    gap_s: float = 0.005
    tokens: int = 10
    reasoning: int = 0
    provider: str = "fake"
    api: str = "chat.completions"
    base_url: str | None = "http://127.0.0.1:9/v1"
    fail_status: int | None = None
    fail_after: int = 0
    raise_exc: BaseException | None = None
    word: str = "tok"
    # Virtual time: stamps are exactly ``virtual_t0_ns`` + the schedule and nothing sleeps
    # (deterministic figures for snapshots); None streams in real time.
    virtual_t0_ns: int | None = None
    requests: list[ChatRequest] = field(default_factory=list)
    closed: bool = False
    sent_ns: list[int] = field(default_factory=list)
    _now: int = 0

    async def _at(self, t_ns: int) -> int:
        """Wait until ``t_ns`` (real time) and return the stamp to use."""
        if self.virtual_t0_ns is not None:
            await asyncio.sleep(0)
            self._now = max(self._now, t_ns)
            return t_ns
        delay = (t_ns - ev.now_ns()) / 1e9
        if delay > 0:
            await asyncio.sleep(delay)
        return ev.now_ns()

    def _stamp(self) -> int:
        return self._now if self.virtual_t0_ns is not None else ev.now_ns()

    async def stream(self, request: ChatRequest) -> AsyncIterator[ev.Event]:
        self.requests.append(request)
        t0 = self.virtual_t0_ns if self.virtual_t0_ns is not None else ev.now_ns()
        self._now = t0
        self.sent_ns.append(t0)
        yield ev.AttemptSent(t0, 1)
        failing_now = self.fail_status is not None and not self.fail_after
        yield ev.HeadersReceived(await self._at(t0 + 1_000_000), 1, self.fail_status if failing_now else 200)
        if failing_now:
            yield ev.Failed(self._stamp(), "InternalServerError", "the fake server failed", self.fail_status, "retry")
            return
        start = t0 + int(self.ttft_s * 1e9)
        n = 0
        for k in range(self.reasoning):
            yield ev.ReasoningDelta(await self._at(start + int(n * self.gap_s * 1e9)), f"think{k} ", 1)
            n += 1
        for k in range(self.tokens):
            if self.fail_status and k == self.fail_after:
                yield ev.Failed(self._stamp(), "APIError", "stream broke", self.fail_status, None)
                return
            if self.raise_exc is not None and k == self.fail_after:
                raise self.raise_exc
            yield ev.TextDelta(await self._at(start + int(n * self.gap_s * 1e9)), f"{self.word}{k} ", 1)
            n += 1
        yield ev.Usage(self._stamp(), input=10, cached_input=0, output=n, reasoning=self.reasoning)
        yield ev.Finished(self._stamp() + 1000, "stop")

    async def aclose(self) -> None:
        self.closed = True
