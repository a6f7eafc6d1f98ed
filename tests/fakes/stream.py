"""The plumbing every fake API shares: one SSE response that sleeps to the schedule and notices a gone
client, the provider-shaped default error types, and the mid-stream failures a schedule injects."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from typing import Any

from aiohttp import web

from tests.fakes.schedule import RecordedRequest, Schedule


class Gone(Exception):
    """The client closed the connection."""


class Stream:
    """One SSE response with schedule-aware sleeping and disconnect detection."""

    def __init__(self, request: web.Request, rec: RecordedRequest, t0: float) -> None:
        self.request = request
        self.rec = rec
        self.t0 = t0
        self.resp: web.StreamResponse | None = None
        self.keepalive: tuple[float, bytes] | None = None  # (every S seconds, these bytes) once open

    def gone(self) -> bool:
        tr = self.request.transport
        return tr is None or tr.is_closing()

    async def until(self, at_ms: float) -> None:
        loop = asyncio.get_running_loop()
        target = self.t0 + at_ms / 1000
        ping_at = loop.time() + self.keepalive[0] if self.keepalive else None
        while True:
            left = target - loop.time()
            if self.gone():
                raise Gone
            if left <= 0:
                return
            if ping_at is not None and self.keepalive and self.resp is not None and loop.time() >= ping_at:
                await self.raw(self.keepalive[1])
                ping_at += self.keepalive[0]
            await asyncio.sleep(min(left, 0.01))

    async def open(self, extra_headers: dict[str, str] | None = None) -> None:
        self.resp = web.StreamResponse(
            status=200,
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache", **(extra_headers or {})},
        )
        self.rec.status = 200
        await self.resp.prepare(self.request)

    async def raw(self, data: bytes) -> None:
        if self.gone():
            raise Gone
        assert self.resp is not None
        try:
            await self.resp.write(data)
        except (ConnectionResetError, ConnectionError, RuntimeError) as exc:
            raise Gone from exc

    async def data(self, obj: Any, event: str | None = None) -> None:
        payload = obj if isinstance(obj, str) else json.dumps(obj, separators=(",", ":"))
        head = f"event: {event}\n" if event else ""
        await self.raw(f"{head}data: {payload}\n\n".encode())

    async def drop(self) -> None:
        tr = self.request.transport
        if tr is not None:
            tr.abort()
        raise Gone

    async def end(self) -> None:
        assert self.resp is not None
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self.resp.write_eof()
        self.rec.completed = True


def default_error_type(status: int, anthropic: bool) -> str:
    if anthropic:
        return {
            400: "invalid_request_error",
            401: "authentication_error",
            403: "permission_error",
            404: "not_found_error",
            413: "request_too_large",
            429: "rate_limit_error",
            529: "overloaded_error",
        }.get(status, "api_error")
    return {
        400: "invalid_request_error",
        401: "invalid_request_error",
        403: "permission_error",
        404: "invalid_request_error",
        429: "rate_limit_exceeded",
    }.get(status, "server_error")


async def failures(st: Stream, s: Schedule, n_sent: int, error: Callable[[], Any]) -> bool:
    """Apply mid-stream failures due after ``n_sent`` token chunks; True when the stream must end."""
    if s.error_after is not None and n_sent == s.error_after:
        await error()
        await st.end()
        return True
    if s.drop_after is not None and n_sent == s.drop_after:
        await st.drop()
    if s.malformed_after is not None and n_sent == s.malformed_after:
        head = b""  # Anthropic's SDK drops data without an event: line, so name one
        if st.rec.path.endswith("/messages"):
            head = b"event: content_block_delta\n"
        elif st.rec.path.endswith("/responses"):
            head = b"event: response.output_text.delta\n"
        await st.raw(head + b'data: {"id": "broken", "choices": [\n\n')
        await st.end()
        return True
    if s.stall_after is not None and n_sent == s.stall_after:
        loop = asyncio.get_running_loop()
        await st.until((loop.time() - st.t0) * 1000 + s.stall_s * 1000)
    return False
