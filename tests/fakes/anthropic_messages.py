"""Anthropic Messages on the fake server: ``thinking`` / ``redacted_thinking`` / ``text`` blocks as SSE
events with usage in ``message_start`` and ``message_delta``, or the whole ``message`` when not streamed."""

from __future__ import annotations

import json
import uuid
from typing import Any

from aiohttp import web

from tests.fakes.schedule import Schedule
from tests.fakes.stream import Stream, failures


def anthropic_mode(body: dict[str, Any], s: Schedule) -> str:
    """``thinking`` | ``hidden`` (signature only) | ``redacted``."""
    thinking = body.get("thinking") or {}
    mode = s.reasoning
    if thinking.get("display") == "omitted" or mode == "omitted":
        mode = "hidden"
    return mode if mode in ("hidden", "redacted") else "thinking"


async def anthropic_json(st: Stream, body: dict[str, Any], s: Schedule) -> web.Response:
    """Non-streamed: the whole ``message`` once the schedule's last token is due."""
    await st.until(s.end_ms())
    mid = f"msg_{uuid.uuid4().hex[:12]}"
    mode = anthropic_mode(body, s)
    content: list[dict[str, Any]] = []
    if s.reasoning_tokens:
        if mode == "redacted":
            content.append({"type": "redacted_thinking", "data": "EmwKAhgBEgy" + "x" * 40})
        else:
            text = s.reasoning_text() if mode == "thinking" else ""
            content.append({"type": "thinking", "thinking": text, "signature": "EqQBCkYIBRgCKkAfakesig=="})
    if s.visible_tokens:
        content.append({"type": "text", "text": s.visible_text()})
    for i, (name, args) in enumerate(s.tool_calls):
        content.append({"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": json.loads(args or "{}")})
    usage: dict[str, Any] = {
        "input_tokens": s.input_tokens,
        "cache_creation_input_tokens": s.cache_write_tokens,
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
        "stop_reason": s.stop_reason or ("tool_use" if s.tool_calls else "end_turn"),
        "stop_sequence": None,
        "usage": usage,
    }
    st.rec.status = 200
    st.rec.completed = True
    return web.json_response(out, headers={"request-id": f"req_{mid}"})


async def anthropic_sse(st: Stream, body: dict[str, Any], s: Schedule) -> None:
    mid = f"msg_{uuid.uuid4().hex[:12]}"

    async def emit(obj: dict[str, Any]) -> None:
        await st.data(obj, event=obj["type"])

    async def error() -> None:
        await emit({"type": "error", "error": {"type": "overloaded_error", "message": s.error_message}})

    mode = anthropic_mode(body, s)
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
                    "cache_creation_input_tokens": s.cache_write_tokens,
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
        if await failures(st, s, n_sent, error):
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
    if await failures(st, s, len(chunks), error):
        return
    if current is not None:
        await emit({"type": "content_block_stop", "index": block})
    call = -1
    for at, i, name, piece in s.tool_chunks():
        await st.until(at)
        if name:
            if call >= 0:
                await emit({"type": "content_block_stop", "index": block})
            block, call = block + 1, i
            start = {"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": {}}
            await emit({"type": "content_block_start", "index": block, "content_block": start})
        else:
            delta = {"type": "input_json_delta", "partial_json": piece}
            await emit({"type": "content_block_delta", "index": block, "delta": delta})
        st.rec.chunks_sent += 1
    if call >= 0:
        await emit({"type": "content_block_stop", "index": block})
    usage: dict[str, Any] = {"output_tokens": s.output_tokens if s.usage else 0}
    if s.usage and s.reasoning_tokens:
        usage["output_tokens_details"] = {"thinking_tokens": s.reasoning_tokens}
    await emit(
        {
            "type": "message_delta",
            "delta": {
                "stop_reason": s.stop_reason or ("tool_use" if s.tool_calls else "end_turn"),
                "stop_sequence": None,
            },
            "usage": usage,
        }
    )
    if s.no_done:
        await st.end()
        return
    await emit({"type": "message_stop"})
    await st.end()
