"""In-process fake backends on known schedules, for the compare tests and benchmark.

They implement ``backends.base.Backend`` directly (no HTTP): the compare code under
test is the orchestration, which must not care what is behind the protocol. The
wire-level backends have their own loopback tests.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from backends.base import ChatRequest
from telemetry import events as ev


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
    requests: list[ChatRequest] = field(default_factory=list)
    closed: bool = False
    sent_ns: list[int] = field(default_factory=list)

    async def _sleep_until(self, t_ns: int) -> None:
        delay = (t_ns - ev.now_ns()) / 1e9
        if delay > 0:
            await asyncio.sleep(delay)

    async def stream(self, request: ChatRequest) -> AsyncIterator[ev.Event]:
        self.requests.append(request)
        t0 = ev.now_ns()
        self.sent_ns.append(t0)
        yield ev.AttemptSent(t0, 1)
        yield ev.HeadersReceived(ev.now_ns(), 1, 500 if self.fail_status and not self.fail_after else 200)
        if self.fail_status and not self.fail_after:
            yield ev.Failed(ev.now_ns(), "InternalServerError", "the fake server failed", self.fail_status, "retry")
            return
        start = t0 + int(self.ttft_s * 1e9)
        n = 0
        for k in range(self.reasoning):
            await self._sleep_until(start + int(n * self.gap_s * 1e9))
            yield ev.ReasoningDelta(ev.now_ns(), f"think{k} ", 1)
            n += 1
        for k in range(self.tokens):
            if self.fail_status and k == self.fail_after:
                yield ev.Failed(ev.now_ns(), "APIError", "stream broke", self.fail_status, None)
                return
            if self.raise_exc is not None and k == self.fail_after:
                raise self.raise_exc
            await self._sleep_until(start + int(n * self.gap_s * 1e9))
            yield ev.TextDelta(ev.now_ns(), f"{self.word}{k} ", 1)
            n += 1
        yield ev.Usage(ev.now_ns(), input=10, cached_input=0, output=n, reasoning=self.reasoning)
        yield ev.Finished(ev.now_ns(), "stop")

    async def aclose(self) -> None:
        self.closed = True
