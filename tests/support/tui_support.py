"""Helpers for the chat UI tests: a scripted in-process Backend and pilot waiting."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from ttft.backends.base import ChatRequest
from ttft.telemetry import events as ev

T0 = 1_000_000_000_000  # a fixed monotonic origin for deterministic snapshots
MS = 1_000_000


class ScriptedBackend:
    """Yields a fixed event list (stamps relative to T0), then blocks or finishes: deterministic UI states."""

    provider = "fake"
    api = "chat.completions"
    base_url: str | None = None

    def __init__(self, events: Iterable[ev.Event], *, block: bool = True, model: str = "scripted-1") -> None:
        self.events = list(events)
        self.block = block
        self.model = model
        self.requests: list[ChatRequest] = []
        self.closed = False

    async def stream(self, request: ChatRequest) -> AsyncIterator[ev.Event]:
        self.requests.append(request)
        for e in self.events:
            yield e
        if self.block:
            await asyncio.Event().wait()

    async def aclose(self) -> None:
        self.closed = True


class TimedBackend:
    """Streams in real time: reasoning then visible tokens, stamped with the real clock."""

    provider = "fake"
    api = "chat.completions"
    base_url: str | None = None

    def __init__(
        self,
        *,
        first_ms: float = 30,
        token_ms: float = 5,
        reasoning: int = 3,
        visible: int = 20,
        fail_status: int | None = None,
        model: str = "timed-1",
        text: Callable[[int], str] = lambda i: f"w{i:02d} ",
    ) -> None:
        self.first_ms, self.token_ms, self.reasoning, self.visible = first_ms, token_ms, reasoning, visible
        self.fail_status = fail_status
        self.model = model
        self.text = text
        self.requests: list[ChatRequest] = []

    async def stream(self, request: ChatRequest) -> AsyncIterator[ev.Event]:
        self.requests.append(request)
        t0 = ev.now_ns()
        yield ev.AttemptSent(t0, 1)
        if self.fail_status:
            await asyncio.sleep(self.first_ms / 1000)
            yield ev.HeadersReceived(ev.now_ns(), 1, self.fail_status)
            yield ev.Failed(ev.now_ns(), "RateLimitError", "Rate limit reached for requests", self.fail_status, None)
            return
        await asyncio.sleep(self.first_ms / 1000)
        yield ev.HeadersReceived(ev.now_ns(), 1, 200)
        for i in range(self.reasoning):
            if i:
                await asyncio.sleep(self.token_ms / 1000)
            yield ev.ReasoningDelta(ev.now_ns(), f"r{i:02d} ")
        for i in range(self.visible):
            await asyncio.sleep(self.token_ms / 1000)
            yield ev.TextDelta(ev.now_ns(), self.text(i))
        yield ev.Usage(ev.now_ns(), 12, 0, self.reasoning + self.visible, self.reasoning)
        yield ev.Finished(ev.now_ns(), "stop")

    async def aclose(self) -> None:
        pass


def factory_for(backend: Any) -> Callable[[str, str | None], Any]:
    def make(spec: str, base_url: str | None) -> Any:
        return backend

    return make


def heard(app: Any) -> list[str]:
    """Every notice ``app`` has shown, in order, expired toasts included (kept by tests/conftest.py)."""
    return list(app.__dict__.get("_ttft_heard", []))


def said(app: Any, words: str) -> bool:
    """Whether any notice ``app`` showed holds ``words``."""
    return any(words in text for text in heard(app))


async def wait_until(pilot: Any, cond: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await pilot.pause(0.02)


def script(*, reasoning: int = 0, visible: int = 0, first_ms: float = 412, token_ms: float = 12.5) -> list[ev.Event]:
    """Events at fixed stamps: sent at T0, first token at first_ms, then one token every token_ms."""
    out: list[ev.Event] = [ev.AttemptSent(T0, 1), ev.HeadersReceived(T0 + 200 * MS, 1, 200)]
    t = T0 + int(first_ms * MS)
    for i in range(reasoning):
        out.append(ev.ReasoningDelta(t, f"Considering step {i}. "))
        t += int(token_ms * MS)
    for i in range(visible):
        out.append(ev.TextDelta(t, f"word{i} "))
        t += int(token_ms * MS)
    return out


class SequenceBackend:
    """One fixed event list per turn, in order (the last one repeats); never blocks."""

    provider = "fake"
    api = "chat.completions"
    base_url: str | None = None

    def __init__(self, turns: list[list[ev.Event]], model: str = "scripted-1") -> None:
        self.turns = turns
        self.model = model
        self.n = 0

    async def stream(self, request: ChatRequest) -> AsyncIterator[ev.Event]:
        events = self.turns[min(self.n, len(self.turns) - 1)]
        self.n += 1
        for e in events:
            yield e

    async def aclose(self) -> None:
        pass


def finished(
    events: list[ev.Event], *, input_tokens: int = 42, reasoning: int = 0, end_ms: float = 5
) -> list[ev.Event]:
    """Close a scripted turn: usage then Finished, just after its last event."""
    last = max(e.t_ns for e in events)
    output = sum(1 for e in events if isinstance(e, ev.ReasoningDelta | ev.TextDelta))
    return [
        *events,
        ev.Usage(last + MS, input_tokens, 0, output, reasoning),
        ev.Finished(last + int(end_ms * MS), "stop"),
    ]
