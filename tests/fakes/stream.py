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


def vllm_metrics(st: Stream, s: Schedule, output_tokens: int, streamed: bool = True) -> dict[str, Any] | None:
    """vLLM's per-request ``metrics`` object as this request's own clock measured it (None when off).

    Times are from scheduling (``st.t0``); a non-streamed answer's tokens are timed by its schedule."""
    if not (s.vllm_metrics or s.output_token_metrics or s.spec_decode):
        return None
    ms = 1000.0
    if streamed and "any" in st.first_at and st.last_at is not None:
        first = (st.first_at["any"] - st.t0) * ms
        if s.reasoning_tokens and "reasoning" not in st.first_at:  # hidden reasoning: generated, not sent
            first = s.first_token_ms
        gen = (st.last_at - st.t0) * ms - first
    else:
        first, gen = s.first_token_ms, s.end_ms() - s.first_token_ms
    out: dict[str, Any] = {
        "time_to_first_token_ms": round(first, 3),
        "generation_time_ms": round(gen, 3),
        "queue_time_ms": round((st.t0 - st.arrived) * ms, 3),
        "mean_itl_ms": round(gen / (output_tokens - 1), 3) if output_tokens > 1 else None,
        "tokens_per_second": round(output_tokens / ((first + gen) / ms), 3) if first + gen > 0 else None,
    }
    if s.output_token_metrics:

        def category(kind: str, n: int, nominal_ms: float) -> dict[str, Any]:
            at = st.first_at.get(kind)
            ttft = (at - st.t0) * ms if at is not None and streamed else nominal_ms
            return {
                "token_count": n,
                "time_to_first_token_ms": round(ttft, 3) if n else None,
                "generation_time_ms": None,
                "mean_itl_ms": None,
                "tokens_per_second": None,
            }

        out["output_token_metrics"] = {
            "reasoning": category("reasoning", s.reasoning_tokens, s.first_token_ms),
            "content": category("text", s.visible_tokens, s.expected_ttfvt_ms()),
            "unclassified_token_count": 0,
        }
    if s.spec_decode:
        drafted, accepted, steps = s.spec_decode
        out["speculative_decoding"] = {
            "mean_acceptance_length": 1 + accepted / steps,
            "draft_acceptance_rate": accepted / drafted,
            "acceptance_histogram": _histogram(accepted, steps, 3),
            "num_spec_steps": steps,
            "num_accepted_draft_tokens": accepted,
            "num_draft_tokens": drafted,
            "num_spec_tokens": 3,
        }
    st.rec.server_metrics = out
    return out


def _histogram(accepted: int, steps: int, k: int) -> list[int]:
    """Steps by how many drafts each accepted, spread as evenly as the totals allow."""
    q, r = divmod(accepted, steps)
    out = [0] * (k + 1)
    out[min(q, k)] += steps - r
    if r:
        out[min(q + 1, k)] += r
    return out


def with_metrics(obj: dict[str, Any], st: Stream, s: Schedule, output_tokens: int, streamed: bool = True) -> Any:
    """``obj`` with vLLM's ``metrics`` at its top: the measured object, or ``Schedule.metrics_json`` verbatim
    (then the JSON text of the whole, since that value may be no Python object at all)."""
    if s.metrics_json is not None:
        head = json.dumps(obj, separators=(",", ":"))
        return head[:-1] + ',"metrics":' + s.metrics_json + "}"
    m = vllm_metrics(st, s, output_tokens, streamed)
    return {**obj, "metrics": m} if m is not None else obj


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
        self.arrived = t0  # t0 moves to the scheduling moment when the request queued (Schedule.slots)
        self.first_at: dict[str, float] = {}  # loop time each kind's first token chunk went out
        self.last_at: float | None = None

    def sent_token(self, kind: str) -> None:
        """A token-bearing chunk of ``kind`` (reasoning | text | tool) is about to be written: for the per-request
        metrics. Stamped before the write, as a server times its tokens: stamped after it, a client thread that
        read the chunk first could measure a shorter TTFT than the server's own."""
        now = asyncio.get_running_loop().time()
        self.first_at.setdefault(kind, now)
        self.first_at.setdefault("any", now)
        self.last_at = now

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
