"""TEST FIXTURE: a loopback model that calls tools, on a schedule, in all three wire formats.

It answers ``POST .../chat/completions``, ``.../responses`` and ``.../messages`` (streamed) from a
script of :class:`Step` s: a step either asks for tool calls (each with an id, its arguments sent in
two pieces, as the APIs stream them) or gives a text answer. Which step a request gets is read from
the request itself: the number of tool-call rounds the conversation already holds (assistant
messages with ``tool_calls``, ``function_call`` items, ``tool_use`` blocks), so the server keeps no
per-conversation state and a retried request gets the same step.

Timing: headers at once; the step's first event ``first_ms`` after the body was read, each further
piece ``piece_ms`` after the previous one (absolute targets, so the server's own work is inside the
schedule). Every request body is kept in ``requests`` (the tests read how results went back).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.fakes.loop_thread import LoopThreadServer


@dataclass(frozen=True)
class Call:
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    raw: str | None = None  # arguments sent verbatim (malformed JSON), instead of ``arguments``


@dataclass(frozen=True)
class Step:
    """One model step: tool calls (``calls``) or a final ``text``; ``first_ms`` to its first event."""

    calls: tuple[Call, ...] = ()
    text: str = ""
    first_ms: float = 20.0
    piece_ms: float = 2.0


def _rounds(path: str, body: dict[str, Any]) -> int:
    """How many tool-call rounds the conversation in this request already holds."""
    if path.endswith("/responses"):
        n, previous = 0, None
        for item in body.get("input") or ():
            kind = item.get("type") if isinstance(item, dict) else None
            if kind == "function_call" and previous != "function_call":
                n += 1
            previous = kind
        return n
    if path.endswith("/messages"):
        return sum(
            1
            for m in body.get("messages") or ()
            if m.get("role") == "assistant"
            and isinstance(m.get("content"), list)
            and any(b.get("type") == "tool_use" for b in m["content"])
        )
    return sum(1 for m in body.get("messages") or () if m.get("role") == "assistant" and m.get("tool_calls"))


def _pieces(call: Call) -> list[str]:
    text = call.raw if call.raw is not None else json.dumps(call.arguments)
    half = len(text) // 2
    return [p for p in (text[:half], text[half:]) if p]


class AgentServer(LoopThreadServer):
    thread_name = "agent-fake"

    def __init__(self, script: list[Step], *, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(host=host, port=port)
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self.arrived_ns: list[int] = []  # when each request's body was read (time.monotonic_ns)

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/{tail:.*}", self._handle)
        return app

    def step_for(self, path: str, body: dict[str, Any]) -> tuple[int, Step]:
        i = min(_rounds(path, body), len(self.script) - 1)
        return i, self.script[i]

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        t0 = time.monotonic()
        self.arrived_ns.append(time.monotonic_ns())
        self.requests.append(body)
        path = request.path
        i, step = self.step_for(path, body)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        if path.endswith("/responses"):
            frames = _responses(i, step, body)
        elif path.endswith("/messages"):
            frames = _messages(i, step, body)
        else:
            frames = _chat(i, step, body)
        for n, frame in enumerate(frames):
            if n > 0:  # the first frame is metadata (role chunk, created, message_start): sent at once
                due = t0 + (step.first_ms + (n - 1) * step.piece_ms) / 1000
                delay = due - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
            await resp.write(frame)
        await resp.write_eof()
        return resp


def _sse(obj: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    data = obj if isinstance(obj, str) else json.dumps(obj)
    return f"{head}data: {data}\n\n".encode()


def _call_id(step: int, i: int) -> str:
    return f"call_{step}_{i}_{uuid.uuid4().hex[:6]}"


def _chat(n: int, step: Step, body: dict[str, Any]) -> Iterator[bytes]:
    base = {"id": f"chatcmpl-{n}", "object": "chat.completion.chunk", "created": int(time.time()), "model": "m"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _sse({**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]})

    yield chunk({"role": "assistant", "content": ""})
    if step.text:
        for word in step.text.split(" "):
            yield chunk({"content": word + " "})
    for i, c in enumerate(step.calls):
        first = {"index": i, "id": _call_id(n, i), "type": "function", "function": {"name": c.name, "arguments": ""}}
        yield chunk({"tool_calls": [first]})
        for piece in _pieces(c):
            yield chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
    yield chunk({}, "tool_calls" if step.calls else "stop")
    if (body.get("stream_options") or {}).get("include_usage"):
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        yield _sse({**base, "choices": [], "usage": usage})
    yield _sse("[DONE]")


def _responses(n: int, step: Step, body: dict[str, Any]) -> Iterator[bytes]:
    seq = iter(range(10_000))
    rid = f"resp_{n}"
    response = {"id": rid, "object": "response", "created_at": 0, "status": "in_progress", "model": "m", "output": []}

    def ev(kind: str, **fields: Any) -> bytes:
        return _sse({"type": kind, **fields, "sequence_number": next(seq)}, kind)

    yield ev("response.created", response=response)
    output: list[dict[str, Any]] = []
    index = 0
    if step.text:
        msg = {"type": "message", "id": "msg_1", "status": "in_progress", "role": "assistant", "content": []}
        yield ev("response.output_item.added", output_index=index, item=msg)
        for word in step.text.split(" "):
            yield ev(
                "response.output_text.delta", item_id="msg_1", output_index=index, content_index=0, delta=word + " "
            )
        output.append(
            {**msg, "status": "completed", "content": [{"type": "output_text", "text": step.text, "annotations": []}]}
        )
        index += 1
    for i, c in enumerate(step.calls):
        item = {
            "type": "function_call",
            "id": f"fc_{n}_{i}",
            "call_id": _call_id(n, i),
            "name": c.name,
            "arguments": "",
            "status": "in_progress",
        }
        yield ev("response.output_item.added", output_index=index, item=item)
        for piece in _pieces(c):
            yield ev("response.function_call_arguments.delta", item_id=item["id"], output_index=index, delta=piece)
        done = {**item, "arguments": "".join(_pieces(c)), "status": "completed"}
        yield ev("response.output_item.done", output_index=index, item=done)
        output.append(done)
        index += 1
    usage = {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 15,
    }
    yield ev("response.completed", response={**response, "status": "completed", "output": output, "usage": usage})


def _messages(n: int, step: Step, body: dict[str, Any]) -> Iterator[bytes]:
    message: dict[str, Any] = {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": "m",
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1},
    }
    yield _sse({"type": "message_start", "message": message}, "message_start")
    index = 0
    if step.text:
        start = {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}
        yield _sse(start, "content_block_start")
        for word in step.text.split(" "):
            delta = {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": word + " "}}
            yield _sse(delta, "content_block_delta")
        yield _sse({"type": "content_block_stop", "index": index}, "content_block_stop")
        index += 1
    for i, c in enumerate(step.calls):
        block = {"type": "tool_use", "id": f"toolu_{_call_id(n, i)}", "name": c.name, "input": {}}
        yield _sse({"type": "content_block_start", "index": index, "content_block": block}, "content_block_start")
        for piece in _pieces(c):
            delta = {"type": "input_json_delta", "partial_json": piece}
            yield _sse({"type": "content_block_delta", "index": index, "delta": delta}, "content_block_delta")
        yield _sse({"type": "content_block_stop", "index": index}, "content_block_stop")
        index += 1
    stop = "tool_use" if step.calls else "end_turn"
    yield _sse(
        {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 5}},
        "message_delta",
    )
    yield _sse({"type": "message_stop"}, "message_stop")


def main() -> None:
    """``python -m tests.fakes.agent_server``: a model that calls the ``echo`` tool (of tests/fakes/mcp_server.py)
    after ``--tool-call-ms``, then answers ``--answer-ms`` after the result came back."""
    p = argparse.ArgumentParser(description="TEST FIXTURE: a loopback model that calls a tool, then answers")
    p.add_argument("--port", type=int, default=8124)
    p.add_argument("--tool-call-ms", type=float, default=150.0)
    p.add_argument("--answer-ms", type=float, default=100.0)
    a = p.parse_args()
    script = [
        Step(calls=(Call("echo", {"text": "hello from the tool"}),), first_ms=a.tool_call_ms),
        Step(text="The tool answered: hello from the tool.", first_ms=a.answer_ms),
    ]
    srv = AgentServer(script, port=a.port)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(srv.serve_forever(lambda: print(f"agent fake on {srv.base_url}", flush=True)))


if __name__ == "__main__":
    main()
