"""Loopback fake LLM servers that speak the real streaming wire formats, on a schedule.

The real ``openai`` and ``anthropic`` SDKs run against these, so a test exercises the
same parsing, retries and HTTP client a user gets. One server answers every API:

- ``POST .../chat/completions``: OpenAI Chat Completions, SSE ``data:`` lines ending with
  ``data: [DONE]``; a usage-only last chunk when ``stream_options.include_usage``;
  reasoning as ``delta.reasoning_content``, ``delta.reasoning`` or ``<think>`` in content;
  llama-server ``timings`` / Ollama durations on the last chunk (llama-server's on every chunk too
  with ``timings_per_chunk``, its draft counts with ``draft``); non-streaming JSON when
  ``"stream"`` is false.
- ``POST .../responses``: OpenAI Responses, ``event:`` + ``data:`` lines in the real event
  order (created, in_progress, reasoning item with ``reasoning_summary_text.delta``, message
  item with ``output_text.delta``, ``response.completed`` with usage).
- ``POST .../messages``: Anthropic Messages, ``event:`` lines, ``thinking`` (with
  ``signature_delta``), ``redacted_thinking`` and ``text`` blocks, ``display: omitted``
  honoured from the request, usage in ``message_start`` and ``message_delta`` (with
  ``output_tokens_details.thinking_tokens``).
- Responses and Messages also answer non-streamed (``"stream"`` false or absent): the whole
  ``response`` object (reasoning item with its summary, message item with ``output_text``,
  usage) or ``message`` (``thinking`` / ``redacted_thinking`` and ``text`` blocks, usage), sent
  when the schedule's last token is due (``end_ms()``), like non-streamed Chat Completions.
- ``GET .../models``: OpenAI list shape, or Anthropic's when the request has ``anthropic-version``.

The path prefix does not matter (``/v1/chat/completions`` and ``/chat/completions`` both work),
so use ``server.openai_base_url`` (``http://127.0.0.1:PORT/v1``) for OpenAI clients and
``server.url`` (``http://127.0.0.1:PORT``) for Anthropic ones.

API
---
::

    from tests.fakes import FakeServer, Schedule

    with FakeServer(Schedule(first_token_ms=100, token_ms=10, reasoning_tokens=5, visible_tokens=20)) as srv:
        client = openai.OpenAI(base_url=srv.openai_base_url, api_key="sk-test")
        ...
        srv.requests[-1].body           # the JSON the SDK sent
        srv.requests[-1].headers        # its headers (lower-case keys)
        srv.requests[-1].query          # its URL's query parameters (the path, .path, has none)
        srv.schedule = Schedule(fail_status=429, fail_times=1, retry_after=0)   # resets attempt counting
        srv.schedules["slow-model"] = Schedule(first_token_ms=500)             # per-model schedule
        srv.wait_for(lambda r: r.disconnected, timeout=2)                      # e.g. after a cancel

``FakeServer`` runs aiohttp on its own event loop in a daemon thread, bound to 127.0.0.1 on a
free port, so it works from sync tests, async tests (any loop) and subprocesses (pass the URL).
``start()`` / ``stop()`` or use it as a context manager. The pytest fixture ``fake_server``
(import it into a test module: ``from tests.fakes import fake_server_fixture  # noqa: F401``) yields a
started server with the default schedule. ``python -m tests.fakes --port 8099`` runs one by hand.

Timing (all from the moment the request body was read; ``asyncio.sleep`` on an absolute
target, so no drift): headers after ``headers_ms``; token-bearing chunk ``j`` (counting all
chunks, reasoning first) at ``first_token_ms + j * tokens_per_chunk * token_ms``. So the
expected TTFT is ``first_token_ms``, TTFVT is ``first_token_ms + ceil(R/c) * c * token_ms``
(``expected_ttfvt_ms()``), and with one token per chunk TPOT is ``token_ms``. A role-only
chunk (Chat Completions) is sent right after the headers: it is not a token. Hidden reasoning
(``reasoning="hidden"``, or Anthropic ``display: omitted``) takes its time but streams nothing.

Every token is four characters (``"r07 "`` reasoning, ``"w07 "`` visible), so the 4-chars-a-token
estimate matches the schedule. Usage reports ``output = reasoning_tokens + visible_tokens``.

Failures (see ``Schedule``): ``fail_status`` for the first ``fail_times`` attempts (provider-shaped
error body, ``retry-after`` when ``retry_after`` is set); after ``*_after`` token chunks:
``error_after`` (mid-stream error event of the API's shape), ``drop_after`` (TCP connection closed
mid-body), ``malformed_after`` (a line of broken JSON), ``stall_after`` (silence for ``stall_s``);
``no_done`` ends the body cleanly without ``[DONE]`` / ``response.completed`` / ``message_stop``;
``reject_stream_options`` answers 400 to a request carrying ``stream_options`` (before any
``fail_status``, which the request sent again without it then meets).
Each ``RecordedRequest`` says whether the stream ``completed`` or the client ``disconnected``
(detected within ~10 ms, also while the server is sleeping).

Scripted content: ``texts`` gives the chunks' text (hostile text on any API's normal shape);
``raw_sse`` is sent verbatim as a streamed body (wire content the schedule cannot make).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

__all__ = ["FakeServer", "RecordedRequest", "Schedule", "fake_server_fixture"]


@dataclass(frozen=True)
class Schedule:
    first_token_ms: float = 20.0  # T: first token-bearing chunk after the request arrived
    token_ms: float = 5.0  # D: per token
    reasoning_tokens: int = 0
    visible_tokens: int = 8
    tokens_per_chunk: int = 1
    headers_ms: float = 0.0  # delay before the response headers
    # Chat Completions reasoning shape: "reasoning_content" | "reasoning" | "think" | "hidden".
    # Responses: anything but "hidden" streams reasoning_summary_text deltas.
    # Anthropic: "thinking" | "hidden"/"omitted" (signature only) | "redacted"; a request with
    # thinking.display == "omitted" is always answered as omitted.
    reasoning: str = "reasoning_content"
    think_tag_split: bool = False  # cut "</think>" across two chunks
    input_tokens: int = 12
    cached_tokens: int = 0
    usage: bool = True  # send usage (Chat Completions: only when include_usage is asked)
    timings: str | None = None  # "llama" (llama-server timings) | "ollama" (durations) on the last chunk
    timings_per_chunk: bool = False  # llama timings on every token chunk too (llama-server's timings_per_token)
    draft: tuple[int, int] | None = None  # llama timings' (draft_n, draft_n_accepted): speculative decoding
    stop_reason: str | None = None  # default per API: stop / completed / end_turn
    # failure injection
    fail_status: int | None = None
    fail_times: int = 1 << 30  # first K attempts fail (default: all)
    fail_message: str = "Injected failure"
    fail_type: str | None = None  # provider error type; a sensible default per status
    retry_after: float | None = None
    error_after: int | None = None  # mid-stream error event after N token chunks
    error_message: str = "The server had an error while processing your request."
    drop_after: int | None = None  # close the connection after N token chunks
    malformed_after: int | None = None  # emit a broken JSON line after N token chunks
    stall_after: int | None = None  # stop sending after N token chunks ...
    stall_s: float = 30.0  # ... for this long
    no_done: bool = False
    reject_stream_options: bool = False
    models: tuple[str, ...] = ("fake-model", "fake-reasoner")
    # Scripted text: each token-bearing chunk's text in order (reasoning first) instead of "r07 " / "w07 ".
    # JSON-escaped on the wire, so a lone surrogate goes out as "\ud800", as an ASCII-escaping server sends it.
    texts: tuple[str, ...] | None = None
    # A streamed answer's body, sent verbatim after the headers (any API): wire content no schedule makes.
    raw_sse: str | None = None
    # Keepalives: these bytes every ``keepalive_s`` while the open stream waits (for a token, a stall,
    # the end), as a proxy or a server's heartbeat sends them; they carry no event.
    keepalive_s: float | None = None
    keepalive: str = ": ping\n\n"

    def chunks(self, reasoning_visible: bool = True) -> list[tuple[float, str, str]]:
        """``(at_ms, kind, text)`` for every token-bearing chunk, reasoning first.

        Hidden reasoning keeps its time slots but yields no chunk.
        """
        out: list[tuple[float, str, str]] = []
        c = max(1, self.tokens_per_chunk)
        j = 0
        for kind, n, prefix in (("reasoning", self.reasoning_tokens, "r"), ("text", self.visible_tokens, "w")):
            for start in range(0, n, c):
                text = "".join(f"{prefix}{i % 100:02d} " for i in range(start, min(n, start + c)))
                if self.texts is not None and j < len(self.texts):
                    text = self.texts[j]
                if kind == "text" or reasoning_visible:
                    out.append((self.first_token_ms + j * c * self.token_ms, kind, text))
                j += 1
        return out

    def expected_ttfvt_ms(self) -> float:
        c = max(1, self.tokens_per_chunk)
        return self.first_token_ms + math.ceil(self.reasoning_tokens / c) * c * self.token_ms

    def end_ms(self) -> float:
        c = max(1, self.tokens_per_chunk)
        n = math.ceil(self.reasoning_tokens / c) + math.ceil(self.visible_tokens / c)
        return self.first_token_ms + max(0, n - 1) * c * self.token_ms

    @property
    def output_tokens(self) -> int:
        return self.reasoning_tokens + self.visible_tokens

    def reasoning_text(self) -> str:
        if self.texts is not None:
            return "".join(t for _, kind, t in self.chunks() if kind == "reasoning")
        return "".join(f"r{i % 100:02d} " for i in range(self.reasoning_tokens))

    def visible_text(self) -> str:
        if self.texts is not None:
            return "".join(t for _, kind, t in self.chunks() if kind == "text")
        return "".join(f"w{i % 100:02d} " for i in range(self.visible_tokens))


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    received_ns: int
    attempt: int  # per server (or per model schedule) since the schedule was last set
    status: int | None = None
    completed: bool = False  # the whole body went out
    disconnected: bool = False  # the client went away before the end
    disconnect_ns: int | None = None
    chunks_sent: int = 0
    query: dict[str, str] = field(default_factory=dict)  # the URL's query parameters, as they arrived


class _Gone(Exception):
    """The client closed the connection."""


class _Stream:
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
                raise _Gone
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
            raise _Gone
        assert self.resp is not None
        try:
            await self.resp.write(data)
        except (ConnectionResetError, ConnectionError, RuntimeError) as exc:
            raise _Gone from exc

    async def data(self, obj: Any, event: str | None = None) -> None:
        payload = obj if isinstance(obj, str) else json.dumps(obj, separators=(",", ":"))
        head = f"event: {event}\n" if event else ""
        await self.raw(f"{head}data: {payload}\n\n".encode())

    async def drop(self) -> None:
        tr = self.request.transport
        if tr is not None:
            tr.abort()
        raise _Gone

    async def end(self) -> None:
        assert self.resp is not None
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self.resp.write_eof()
        self.rec.completed = True


def _default_error_type(status: int, anthropic: bool) -> str:
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


class FakeServer:
    def __init__(self, schedule: Schedule | None = None) -> None:
        self._schedule = schedule or Schedule()
        self.schedules: dict[str, Schedule] = {}
        self.requests: list[RecordedRequest] = []
        self._attempts: dict[str, int] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._sock: socket.socket | None = None
        self.port: int = 0

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
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

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

    # --- lifecycle -------------------------------------------------------------------
    def start(self) -> FakeServer:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        async def boot() -> None:
            app = web.Application()
            app.router.add_route("*", "/{tail:.*}", self._dispatch)
            self._runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.5)
            await self._runner.setup()
            await web.SockSite(self._runner, self._sock).start()

        def main() -> None:
            assert self._loop is not None
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(boot())
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=main, name=f"fake-llm-{self.port}", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("fake server did not start")
        return self

    def stop(self) -> None:
        loop = self._loop
        if loop is None:
            return
        if self._runner is not None:
            fut = asyncio.run_coroutine_threadsafe(self._runner.cleanup(), loop)
            with contextlib.suppress(Exception):
                fut.result(5)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(5)
        with contextlib.suppress(Exception):
            loop.close()
        self._loop = None

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- HTTP ------------------------------------------------------------------------
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
        stream = _Stream(request, rec, t0)
        if schedule.keepalive_s:
            stream.keepalive = (schedule.keepalive_s, schedule.keepalive.encode())
        try:
            if schedule.headers_ms:
                await stream.until(schedule.headers_ms)
            if schedule.raw_sse is not None and body.get("stream"):
                await stream.open()
                await stream.raw(schedule.raw_sse.encode())
                await stream.end()
            elif path.endswith("/chat/completions"):
                if not body.get("stream"):
                    return await self._chat_json(stream, body, schedule)
                await self._chat_sse(stream, body, schedule)
            elif path.endswith("/responses"):
                if not body.get("stream"):
                    return await self._responses_json(stream, body, schedule)
                await self._responses_sse(stream, body, schedule)
            elif path.endswith("/messages"):
                if not body.get("stream"):
                    return await self._anthropic_json(stream, body, schedule)
                await self._anthropic_sse(stream, body, schedule)
            else:
                rec.status = 404
                return web.json_response({"error": {"message": f"no route {path}"}}, status=404)
        except _Gone:
            rec.disconnected = True
            rec.disconnect_ns = time.monotonic_ns()
        assert stream.resp is not None or rec.disconnected
        return stream.resp if stream.resp is not None else web.Response(status=499)

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
        etype = s.fail_type or _default_error_type(status, anthropic)
        headers: dict[str, str] = {}
        if s.retry_after is not None:
            headers["retry-after"] = f"{s.retry_after:g}"
        if anthropic:
            body: dict[str, Any] = {
                "type": "error",
                "error": {"type": etype, "message": message},
                "request_id": "req_fake",
            }
        else:
            body = {"error": {"message": message, "type": etype, "param": None, "code": etype}}
        return web.json_response(body, status=status, headers=headers)

    async def _failures(self, st: _Stream, s: Schedule, n_sent: int, error: Callable[[], Any]) -> bool:
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

    # --- OpenAI Chat Completions -------------------------------------------------------
    def _usage_chat(self, s: Schedule) -> dict[str, Any]:
        return {
            "prompt_tokens": s.input_tokens,
            "completion_tokens": s.output_tokens,
            "total_tokens": s.input_tokens + s.output_tokens,
            "prompt_tokens_details": {"cached_tokens": s.cached_tokens, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": s.reasoning_tokens,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }

    def _server_timings(self, s: Schedule, done: float = 1.0) -> dict[str, Any]:
        """The server's own figures; ``done`` < 1: those of a chunk mid-stream (that share of the answer)."""
        gen_ms = s.end_ms() - s.first_token_ms
        if s.timings == "llama":
            timings = {
                "cache_n": s.cached_tokens,
                "prompt_n": s.input_tokens - s.cached_tokens,
                "prompt_ms": s.first_token_ms,
                "prompt_per_second": 1000 * s.input_tokens / max(s.first_token_ms, 1e-3),
                "predicted_n": round(s.output_tokens * done),
                "predicted_ms": gen_ms * done,
                "predicted_per_second": 1000 * s.output_tokens / max(gen_ms, 1e-3),
            }
            if s.draft:
                timings["draft_n"], timings["draft_n_accepted"] = (round(n * done) for n in s.draft)
            return {"timings": timings}
        if s.timings == "ollama":
            return {
                "total_duration": int((s.end_ms() + 1) * 1e6),
                "load_duration": 1_000_000,
                "prompt_eval_count": s.input_tokens,
                "prompt_eval_duration": int(s.first_token_ms * 1e6),
                "eval_count": s.output_tokens,
                "eval_duration": int(gen_ms * 1e6),
            }
        return {}

    def _chat_base(self, body: dict[str, Any], cid: str) -> dict[str, Any]:
        return {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body.get("model", "fake-model"),
            "system_fingerprint": "fp_fake",
        }

    async def _chat_sse(self, st: _Stream, body: dict[str, Any], s: Schedule) -> None:
        cid = f"chatcmpl-{uuid.uuid4().hex[:12]}"
        base = self._chat_base(body, cid)
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))

        def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
            out = {
                **base,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
                **extra,
            }
            if include_usage:
                out["usage"] = None
            return out

        async def error() -> None:
            await st.data({"error": {"message": s.error_message, "type": "server_error", "param": None, "code": None}})

        await st.open()
        await st.data(chunk({"role": "assistant", "content": ""}))
        mode = s.reasoning
        chunks = s.chunks(reasoning_visible=mode != "hidden")
        n_reasoning = sum(1 for c in chunks if c[1] == "reasoning")
        seen_r = 0
        first_text = True
        for n_sent, (at, kind, text) in enumerate(chunks):
            if await self._failures(st, s, n_sent, error):
                return
            await st.until(at)
            if kind == "reasoning":
                seen_r += 1
                if mode == "think":
                    piece = ("<think>" if seen_r == 1 else "") + text
                    if seen_r == n_reasoning and s.think_tag_split:
                        piece += "</thi"
                    delta = {"content": piece}
                else:
                    delta = {"content": None, mode: text} if mode in ("reasoning_content", "reasoning") else {}
            else:
                piece = text
                if first_text and n_reasoning and mode == "think":
                    piece = ("nk>" if s.think_tag_split else "</think>") + text
                first_text = False
                delta = {"content": piece}
            mid = self._server_timings(s, (n_sent + 1) / len(chunks)) if s.timings_per_chunk else {}
            await st.data(chunk(delta, **mid))
            st.rec.chunks_sent += 1
        if await self._failures(st, s, len(chunks), error):
            return
        if s.no_done:  # cut off cleanly: no finish chunk, no usage, no [DONE]
            await st.end()
            return
        await st.data(chunk({}, s.stop_reason or "stop", **self._server_timings(s)))
        if include_usage and s.usage:
            usage_chunk = {**base, "choices": [], "usage": self._usage_chat(s)}
            await st.data(usage_chunk)
        await st.data("[DONE]")
        await st.end()

    async def _chat_json(self, st: _Stream, body: dict[str, Any], s: Schedule) -> web.Response:
        await st.until(s.end_ms())
        message: dict[str, Any] = {"role": "assistant", "content": s.visible_text(), "refusal": None}
        if s.reasoning in ("reasoning_content", "reasoning"):
            message[s.reasoning] = s.reasoning_text()
        elif s.reasoning == "think" and s.reasoning_tokens:
            message["content"] = f"<think>{s.reasoning_text()}</think>{s.visible_text()}"
        out = {
            **self._chat_base(body, f"chatcmpl-{uuid.uuid4().hex[:12]}"),
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": s.stop_reason or "stop"}],
            **self._server_timings(s),
        }
        if s.usage:
            out["usage"] = self._usage_chat(s)
        st.rec.status = 200
        st.rec.completed = True
        return web.json_response(out)

    # --- OpenAI Responses --------------------------------------------------------------
    def _response_obj(
        self, body: dict[str, Any], rid: str, status: str, output: list[Any], usage: dict[str, Any] | None
    ) -> dict[str, Any]:
        """A Responses API ``response`` object (streamed inside events, or the whole non-streamed body)."""
        return {
            "id": rid,
            "object": "response",
            "created_at": int(time.time()),
            "status": status,
            "error": None,
            "incomplete_details": None,
            "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"),
            "model": body.get("model", "fake-model"),
            "output": output,
            "parallel_tool_calls": True,
            "previous_response_id": None,
            "reasoning": body.get("reasoning") or {"effort": None, "summary": None},
            "store": True,
            "temperature": body.get("temperature", 1.0),
            "text": {"format": {"type": "text"}},
            "tool_choice": "auto",
            "tools": [],
            "top_p": 1.0,
            "truncation": "disabled",
            "usage": usage,
            "user": None,
            "metadata": {},
        }

    def _usage_responses(self, s: Schedule) -> dict[str, Any]:
        return {
            "input_tokens": s.input_tokens,
            "input_tokens_details": {"cached_tokens": s.cached_tokens},
            "output_tokens": s.output_tokens,
            "output_tokens_details": {"reasoning_tokens": s.reasoning_tokens},
            "total_tokens": s.input_tokens + s.output_tokens,
        }

    async def _responses_json(self, st: _Stream, body: dict[str, Any], s: Schedule) -> web.Response:
        """Non-streamed: the whole ``response`` object once the schedule's last token is due."""
        await st.until(s.end_ms())
        output: list[dict[str, Any]] = []
        if s.reasoning_tokens:
            summary = [] if s.reasoning == "hidden" else [{"type": "summary_text", "text": s.reasoning_text()}]
            output.append({"id": f"rs_{uuid.uuid4().hex[:12]}", "type": "reasoning", "summary": summary})
        if s.visible_tokens:
            part = {"type": "output_text", "text": s.visible_text(), "annotations": [], "logprobs": []}
            output.append(
                {
                    "id": f"msg_{uuid.uuid4().hex[:12]}",
                    "type": "message",
                    "status": "completed",
                    "role": "assistant",
                    "content": [part],
                }
            )
        status = s.stop_reason or "completed"
        out = self._response_obj(
            body, f"resp_{uuid.uuid4().hex[:12]}", status, output, self._usage_responses(s) if s.usage else None
        )
        if status == "incomplete":
            out["incomplete_details"] = {"reason": "max_output_tokens"}
        st.rec.status = 200
        st.rec.completed = True
        return web.json_response(out)

    async def _responses_sse(self, st: _Stream, body: dict[str, Any], s: Schedule) -> None:
        rid = f"resp_{uuid.uuid4().hex[:12]}"
        seq = 0

        async def emit(obj: dict[str, Any]) -> None:
            nonlocal seq
            obj = {**obj, "sequence_number": seq}
            seq += 1
            await st.data(obj, event=obj["type"])

        def response(status: str, output: list[Any], usage: dict[str, Any] | None) -> dict[str, Any]:
            return self._response_obj(body, rid, status, output, usage)

        async def error() -> None:
            await emit({"type": "error", "code": "server_error", "message": s.error_message, "param": None})

        await st.open()
        await emit({"type": "response.created", "response": response("in_progress", [], None)})
        await emit({"type": "response.in_progress", "response": response("in_progress", [], None)})
        chunks = s.chunks(reasoning_visible=s.reasoning != "hidden")
        output: list[dict[str, Any]] = []
        idx = 0
        rs_id, msg_id = f"rs_{uuid.uuid4().hex[:12]}", f"msg_{uuid.uuid4().hex[:12]}"
        summary = ""
        text = ""
        reasoning_open = message_open = False
        for n_sent, (at, kind, piece) in enumerate(chunks):
            if await self._failures(st, s, n_sent, error):
                return
            await st.until(at)
            if kind == "reasoning":
                if not reasoning_open:
                    reasoning_open = True
                    item = {"id": rs_id, "type": "reasoning", "summary": []}
                    await emit({"type": "response.output_item.added", "output_index": idx, "item": item})
                    part = {"type": "summary_text", "text": ""}
                    await emit(
                        {
                            "type": "response.reasoning_summary_part.added",
                            "item_id": rs_id,
                            "output_index": idx,
                            "summary_index": 0,
                            "part": part,
                        }
                    )
                summary += piece
                await emit(
                    {
                        "type": "response.reasoning_summary_text.delta",
                        "item_id": rs_id,
                        "output_index": idx,
                        "summary_index": 0,
                        "delta": piece,
                    }
                )
            else:
                if reasoning_open:
                    reasoning_open = False
                    await self._close_reasoning(emit, rs_id, idx, summary, output)
                    idx += 1
                elif not message_open and s.reasoning_tokens and s.reasoning == "hidden":
                    item = {"id": rs_id, "type": "reasoning", "summary": []}
                    await emit({"type": "response.output_item.added", "output_index": idx, "item": item})
                    await emit({"type": "response.output_item.done", "output_index": idx, "item": item})
                    output.append(item)
                    idx += 1
                if not message_open:
                    message_open = True
                    item = {
                        "id": msg_id,
                        "type": "message",
                        "status": "in_progress",
                        "role": "assistant",
                        "content": [],
                    }
                    await emit({"type": "response.output_item.added", "output_index": idx, "item": item})
                    await emit(
                        {
                            "type": "response.content_part.added",
                            "item_id": msg_id,
                            "output_index": idx,
                            "content_index": 0,
                            "part": {"type": "output_text", "text": "", "annotations": [], "logprobs": []},
                        }
                    )
                text += piece
                await emit(
                    {
                        "type": "response.output_text.delta",
                        "item_id": msg_id,
                        "output_index": idx,
                        "content_index": 0,
                        "delta": piece,
                        "logprobs": [],
                    }
                )
            st.rec.chunks_sent += 1
        if await self._failures(st, s, len(chunks), error):
            return
        if reasoning_open:
            await self._close_reasoning(emit, rs_id, idx, summary, output)
            idx += 1
        if message_open:
            part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
            await emit(
                {
                    "type": "response.output_text.done",
                    "item_id": msg_id,
                    "output_index": idx,
                    "content_index": 0,
                    "text": text,
                    "logprobs": [],
                }
            )
            await emit(
                {
                    "type": "response.content_part.done",
                    "item_id": msg_id,
                    "output_index": idx,
                    "content_index": 0,
                    "part": part,
                }
            )
            item = {"id": msg_id, "type": "message", "status": "completed", "role": "assistant", "content": [part]}
            await emit({"type": "response.output_item.done", "output_index": idx, "item": item})
            output.append(item)
        if s.no_done:
            await st.end()
            return
        usage = self._usage_responses(s)
        status = s.stop_reason or "completed"
        kind = "response.completed" if status == "completed" else f"response.{status}"
        await emit({"type": kind, "response": response(status, output, usage if s.usage else None)})
        await st.end()

    async def _close_reasoning(
        self, emit: Callable[[dict[str, Any]], Any], rs_id: str, idx: int, summary: str, output: list[Any]
    ) -> None:
        common = {"item_id": rs_id, "output_index": idx, "summary_index": 0}
        await emit({"type": "response.reasoning_summary_text.done", **common, "text": summary})
        part = {"type": "summary_text", "text": summary}
        await emit({"type": "response.reasoning_summary_part.done", **common, "part": part})
        item = {"id": rs_id, "type": "reasoning", "summary": [part]}
        await emit({"type": "response.output_item.done", "output_index": idx, "item": item})
        output.append(item)

    # --- Anthropic Messages ------------------------------------------------------------
    @staticmethod
    def _anthropic_mode(body: dict[str, Any], s: Schedule) -> str:
        """``thinking`` | ``hidden`` (signature only) | ``redacted``."""
        thinking = body.get("thinking") or {}
        mode = s.reasoning
        if thinking.get("display") == "omitted" or mode == "omitted":
            mode = "hidden"
        return mode if mode in ("hidden", "redacted") else "thinking"

    async def _anthropic_json(self, st: _Stream, body: dict[str, Any], s: Schedule) -> web.Response:
        """Non-streamed: the whole ``message`` once the schedule's last token is due."""
        await st.until(s.end_ms())
        mid = f"msg_{uuid.uuid4().hex[:12]}"
        mode = self._anthropic_mode(body, s)
        content: list[dict[str, Any]] = []
        if s.reasoning_tokens:
            if mode == "redacted":
                content.append({"type": "redacted_thinking", "data": "EmwKAhgBEgy" + "x" * 40})
            else:
                text = s.reasoning_text() if mode == "thinking" else ""
                content.append({"type": "thinking", "thinking": text, "signature": "EqQBCkYIBRgCKkAfakesig=="})
        if s.visible_tokens:
            content.append({"type": "text", "text": s.visible_text()})
        usage: dict[str, Any] = {
            "input_tokens": s.input_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": s.cached_tokens,
            "output_tokens": s.output_tokens if s.usage else 0,
        }
        if s.usage and s.reasoning_tokens:
            usage["output_tokens_details"] = {"thinking_tokens": s.reasoning_tokens}
        out = {
            "id": mid,
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "fake-model"),
            "content": content,
            "stop_reason": s.stop_reason or "end_turn",
            "stop_sequence": None,
            "usage": usage,
        }
        st.rec.status = 200
        st.rec.completed = True
        return web.json_response(out, headers={"request-id": f"req_{mid}"})

    async def _anthropic_sse(self, st: _Stream, body: dict[str, Any], s: Schedule) -> None:
        mid = f"msg_{uuid.uuid4().hex[:12]}"

        async def emit(obj: dict[str, Any]) -> None:
            await st.data(obj, event=obj["type"])

        async def error() -> None:
            await emit({"type": "error", "error": {"type": "overloaded_error", "message": s.error_message}})

        mode = self._anthropic_mode(body, s)
        await st.open({"request-id": f"req_{mid}"})
        await emit(
            {
                "type": "message_start",
                "message": {
                    "id": mid,
                    "type": "message",
                    "role": "assistant",
                    "content": [],
                    "model": body.get("model", "fake-model"),
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": s.input_tokens,
                        "cache_creation_input_tokens": 0,
                        "cache_read_input_tokens": s.cached_tokens,
                        "output_tokens": 1,
                    },
                },
            }
        )
        await emit({"type": "ping"})
        chunks = s.chunks(reasoning_visible=mode == "thinking")
        block = -1
        current: str | None = None
        if s.reasoning_tokens and mode in ("hidden", "redacted"):
            # Nothing readable streams while it thinks: the block opens, carries a signature, closes.
            block += 1
            start: dict[str, Any] = (
                {"type": "thinking", "thinking": "", "signature": ""}
                if mode == "hidden"
                else {"type": "redacted_thinking", "data": "EmwKAhgBEgy" + "x" * 40}
            )
            await emit({"type": "content_block_start", "index": block, "content_block": start})
            await st.until(s.expected_ttfvt_ms() - s.token_ms)
            if mode == "hidden":
                sig = {"type": "signature_delta", "signature": "EqQBCkYIBRgCKkAfakesig=="}
                await emit({"type": "content_block_delta", "index": block, "delta": sig})
            await emit({"type": "content_block_stop", "index": block})
        for n_sent, (at, kind, piece) in enumerate(chunks):
            if await self._failures(st, s, n_sent, error):
                return
            await st.until(at)
            if kind != current:
                if current == "reasoning":
                    sig = {"type": "signature_delta", "signature": "EqQBCkYIBRgCKkAfakesig=="}
                    await emit({"type": "content_block_delta", "index": block, "delta": sig})
                if current is not None:
                    await emit({"type": "content_block_stop", "index": block})
                block += 1
                current = kind
                cb = (
                    {"type": "thinking", "thinking": "", "signature": ""}
                    if kind == "reasoning"
                    else {
                        "type": "text",
                        "text": "",
                    }
                )
                await emit({"type": "content_block_start", "index": block, "content_block": cb})
            delta = (
                {"type": "thinking_delta", "thinking": piece}
                if kind == "reasoning"
                else {"type": "text_delta", "text": piece}
            )
            await emit({"type": "content_block_delta", "index": block, "delta": delta})
            st.rec.chunks_sent += 1
        if await self._failures(st, s, len(chunks), error):
            return
        if current is not None:
            await emit({"type": "content_block_stop", "index": block})
        usage: dict[str, Any] = {"output_tokens": s.output_tokens if s.usage else 0}
        if s.usage and s.reasoning_tokens:
            usage["output_tokens_details"] = {"thinking_tokens": s.reasoning_tokens}
        await emit(
            {
                "type": "message_delta",
                "delta": {"stop_reason": s.stop_reason or "end_turn", "stop_sequence": None},
                "usage": usage,
            }
        )
        if s.no_done:
            await st.end()
            return
        await emit({"type": "message_stop"})
        await st.end()


try:
    import pytest

    @pytest.fixture(name="fake_server")
    def fake_server_fixture() -> Iterator[FakeServer]:
        """A started FakeServer with the default schedule; stopped after the test."""
        with FakeServer() as srv:
            yield srv

except ImportError:  # pragma: no cover - the fakes also run outside pytest
    pass


def _main() -> None:  # pragma: no cover - manual use
    import argparse

    p = argparse.ArgumentParser(description="run a fake LLM server on 127.0.0.1")
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
        )
    ).start()
    print(f"fake server on {srv.url}  (OpenAI base {srv.openai_base_url})", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        srv.stop()
