"""The one loopback fake server: request recording, per-model schedules, models listing, injected HTTP
errors, and routing each generation request to its API's module (served from its own loop and thread
by tests/fakes/loop_thread.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from aiohttp import web

from tests.fakes import anthropic_messages, openai_chat, openai_responses
from tests.fakes.loop_thread import LoopThreadServer
from tests.fakes.schedule import RecordedRequest, Schedule
from tests.fakes.stream import Gone, Stream, default_error_type


class FakeServer(LoopThreadServer):
    thread_name = "fake-llm"

    def __init__(self, schedule: Schedule | None = None, *, port: int = 0) -> None:
        super().__init__(port=port)
        self._schedule = schedule or Schedule()
        self.schedules: dict[str, Schedule] = {}
        self.requests: list[RecordedRequest] = []
        self._attempts: dict[str, int] = {}
        self._slots: tuple[int, asyncio.Semaphore] | None = None  # Schedule.slots' scheduler, on the server's loop

    # --- configuration ---------------------------------------------------------------
    @property
    def schedule(self) -> Schedule:
        return self._schedule

    @schedule.setter
    def schedule(self, value: Schedule) -> None:
        self._schedule = value
        self._attempts.clear()

    def reset(self) -> None:
        """Forget recorded requests and attempt counts."""
        self.requests.clear()
        self._attempts.clear()

    @property
    def openai_base_url(self) -> str:
        return f"{self.url}/v1"

    def generation_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.method == "POST"]

    def wait_for(self, pred: Callable[[RecordedRequest], bool], timeout: float = 5.0) -> RecordedRequest | None:
        """Block until a recorded request satisfies ``pred`` (thread-safe polling)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for r in list(self.requests):
                if pred(r):
                    return r
            time.sleep(0.005)
        return None

    # --- HTTP ------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        return app

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        t0 = asyncio.get_running_loop().time()
        raw = await request.read()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        path = request.path
        model = body.get("model") if isinstance(body, dict) else None
        schedule = self.schedules.get(model or "", self._schedule)
        key = model if model in self.schedules else ""
        attempt = 0
        if request.method == "POST":
            self._attempts[key] = attempt = self._attempts.get(key, 0) + 1
        rec = RecordedRequest(
            request.method,
            path,
            {k.lower(): v for k, v in request.headers.items()},
            body,
            time.monotonic_ns(),
            attempt,
            query=dict(request.query),
            peer=_peer(request),
        )
        self.requests.append(rec)
        is_anthropic = "anthropic-version" in rec.headers or path.endswith("/messages")
        if request.method == "GET" and path.rstrip("/").endswith("/models"):
            rec.status = 200
            rec.completed = True
            return web.json_response(self._models(schedule, is_anthropic))
        if request.method != "POST" or not isinstance(body, dict):
            rec.status = 404
            return web.json_response({"error": {"message": f"no route {request.method} {path}"}}, status=404)
        if schedule.reject_stream_options and "stream_options" in body:  # checked first, like a request validator
            return self._error(
                rec, 400, "Unrecognized request argument supplied: stream_options", schedule, is_anthropic
            )
        if schedule.fail_status is not None and attempt <= schedule.fail_times:
            return self._error(rec, schedule.fail_status, schedule.fail_message, schedule, is_anthropic)
        if schedule.error_as_200:
            return self._error(rec, 200, schedule.fail_message, schedule, is_anthropic)
        stream = Stream(request, rec, t0)
        if schedule.keepalive_s:
            stream.keepalive = (schedule.keepalive_s, schedule.keepalive.encode())
        try:
            async with self._scheduled(stream, schedule):
                return await self._generate(stream, rec, body, path, schedule)
        except Gone:
            rec.disconnected = True
            rec.disconnect_ns = time.monotonic_ns()
        assert stream.resp is not None or rec.disconnected
        return stream.resp if stream.resp is not None else web.Response(status=499)

    @contextlib.asynccontextmanager
    async def _scheduled(self, stream: Stream, s: Schedule) -> AsyncIterator[None]:
        """The scheduler: held ``queue_hold_ms``, then a free one of the server's ``slots``; from then on the
        request's clock (``stream.t0``) starts at its scheduling, as a serving engine's per-request metrics do."""
        if s.queue_hold_ms:
            await stream.until(s.queue_hold_ms)
        if not s.slots:
            if s.queue_hold_ms:
                stream.t0 = asyncio.get_running_loop().time()
            yield
            return
        if self._slots is None or self._slots[0] != s.slots:
            self._slots = (s.slots, asyncio.Semaphore(s.slots))
        async with self._slots[1]:
            stream.t0 = asyncio.get_running_loop().time()
            yield

    async def _generate(
        self, stream: Stream, rec: RecordedRequest, body: dict[str, Any], path: str, schedule: Schedule
    ) -> web.StreamResponse:
        """One generation request's answer, in its API's shape."""
        if schedule.headers_ms:
            await stream.until(schedule.headers_ms)
        if schedule.raw_sse is not None and body.get("stream"):
            await stream.open()
            await stream.raw(schedule.raw_sse.encode())
            await stream.end()
        elif path.endswith("/chat/completions"):
            if not body.get("stream"):
                return await openai_chat.chat_json(stream, body, schedule)
            await openai_chat.chat_sse(stream, body, schedule)
        elif path.endswith("/responses"):
            if not body.get("stream"):
                return await openai_responses.responses_json(stream, body, schedule)
            await openai_responses.responses_sse(stream, body, schedule)
        elif path.endswith("/messages"):
            if not body.get("stream"):
                return await anthropic_messages.anthropic_json(stream, body, schedule)
            await anthropic_messages.anthropic_sse(stream, body, schedule)
        else:
            rec.status = 404
            return web.json_response({"error": {"message": f"no route {path}"}}, status=404)
        assert stream.resp is not None
        return stream.resp

    def _models(self, s: Schedule, anthropic: bool) -> dict[str, Any]:
        if anthropic:
            data = [
                {"type": "model", "id": m, "display_name": m, "created_at": "2025-01-01T00:00:00Z"} for m in s.models
            ]
            return {"data": data, "has_more": False, "first_id": s.models[0], "last_id": s.models[-1]}
        return {
            "object": "list",
            "data": [{"id": m, "object": "model", "created": 1700000000, "owned_by": "fake"} for m in s.models],
        }

    def _error(self, rec: RecordedRequest, status: int, message: str, s: Schedule, anthropic: bool) -> web.Response:
        rec.status = status
        rec.completed = True
        etype = s.fail_type or default_error_type(status, anthropic)
        headers: dict[str, str] = {}
        if s.retry_after is not None:
            headers["retry-after"] = f"{s.retry_after:g}"
        if s.fail_body is not None:
            return web.Response(text=s.fail_body, status=status, headers=headers, content_type="application/json")
        if anthropic:
            body: dict[str, Any] = {
                "type": "error",
                "error": {"type": etype, "message": message},
                "request_id": "req_fake",
            }
        else:
            body = {"error": {"message": message, "type": etype, "param": None, "code": etype}}
        return web.json_response(body, status=status, headers=headers)


def _peer(request: web.Request) -> str | None:
    peer = request.transport.get_extra_info("peername") if request.transport is not None else None
    return f"{peer[0]}:{peer[1]}" if peer else None


def _main() -> None:  # pragma: no cover - manual use
    import argparse

    p = argparse.ArgumentParser(description="run a fake LLM server on 127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="default: a free port")
    p.add_argument("--first-token-ms", type=float, default=300)
    p.add_argument("--token-ms", type=float, default=30)
    p.add_argument("--reasoning-tokens", type=int, default=20)
    p.add_argument("--visible-tokens", type=int, default=60)
    p.add_argument("--reasoning", default="reasoning_content")
    args = p.parse_args()
    srv = FakeServer(
        Schedule(
            first_token_ms=args.first_token_ms,
            token_ms=args.token_ms,
            reasoning_tokens=args.reasoning_tokens,
            visible_tokens=args.visible_tokens,
            reasoning=args.reasoning,
        ),
        port=args.port,
    ).start()
    print(f"fake server on {srv.url}  (OpenAI base {srv.openai_base_url})", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        srv.stop()
