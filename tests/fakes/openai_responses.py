"""OpenAI Responses on the fake server: ``event:`` + ``data:`` lines in the real event order, or the
whole ``response`` object when not streamed."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from aiohttp import web

from tests.fakes.schedule import Schedule
from tests.fakes.stream import Stream, failures, with_metrics


def response_obj(
    body: dict[str, Any], rid: str, status: str, output: list[Any], usage: dict[str, Any] | None
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


def usage_responses(s: Schedule) -> dict[str, Any]:
    return {
        "input_tokens": s.input_tokens,
        "input_tokens_details": {"cached_tokens": s.cached_tokens},
        "output_tokens": s.output_tokens,
        "output_tokens_details": {"reasoning_tokens": s.reasoning_tokens},
        "total_tokens": s.input_tokens + s.output_tokens,
    }


async def responses_json(st: Stream, body: dict[str, Any], s: Schedule) -> web.Response:
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
    output += [function_call(i, name, args, "completed") for i, (name, args) in enumerate(s.tool_calls)]
    status = s.stop_reason or "completed"
    out = response_obj(body, f"resp_{uuid.uuid4().hex[:12]}", status, output, usage_responses(s) if s.usage else None)
    if status == "incomplete":
        out["incomplete_details"] = {"reason": "max_output_tokens"}
    st.rec.status = 200
    st.rec.completed = True
    body_out = with_metrics(out, st, s, s.output_tokens, streamed=False)
    if isinstance(body_out, str):
        return web.Response(text=body_out, content_type="application/json")
    return web.json_response(body_out)


async def responses_sse(st: Stream, body: dict[str, Any], s: Schedule) -> None:
    rid = f"resp_{uuid.uuid4().hex[:12]}"
    seq = 0

    async def emit(obj: dict[str, Any]) -> None:
        nonlocal seq
        obj = {**obj, "sequence_number": seq}
        seq += 1
        await st.data(obj, event=obj["type"])

    def response(status: str, output: list[Any], usage: dict[str, Any] | None) -> dict[str, Any]:
        return response_obj(body, rid, status, output, usage)

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
        if await failures(st, s, n_sent, error):
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
            st.sent_token("reasoning")
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
                await close_reasoning(emit, rs_id, idx, summary, output)
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
            st.sent_token("text")
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
    if await failures(st, s, len(chunks), error):
        return
    if reasoning_open:
        await close_reasoning(emit, rs_id, idx, summary, output)
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
        idx += 1
    calls: dict[int, dict[str, Any]] = {}
    for at, i, name, piece in s.tool_chunks():
        await st.until(at)
        if name:
            if i - 1 in calls:
                await close_call(emit, calls[i - 1], idx + i - 1, output)
            calls[i] = function_call(i, name, "", "in_progress")
            await emit({"type": "response.output_item.added", "output_index": idx + i, "item": calls[i]})
        else:
            calls[i]["arguments"] += piece
            await emit(
                {
                    "type": "response.function_call_arguments.delta",
                    "item_id": calls[i]["id"],
                    "output_index": idx + i,
                    "delta": piece,
                }
            )
        st.rec.chunks_sent += 1
    if calls:
        last = max(calls)
        await close_call(emit, calls[last], idx + last, output)
    if s.no_done:
        await st.end()
        return
    usage = usage_responses(s)
    status = s.stop_reason or "completed"
    kind = "response.completed" if status == "completed" else f"response.{status}"
    final = with_metrics(response(status, output, usage if s.usage else None), st, s, s.output_tokens)
    if isinstance(final, str):  # Schedule.metrics_json: spliced as text, as a server would send it
        await st.data(f'{{"type":"{kind}","sequence_number":{seq},"response":{final}}}', event=kind)
    else:
        await emit({"type": kind, "response": final})
    await st.end()


def function_call(i: int, name: str, arguments: str, status: str) -> dict[str, Any]:
    return {
        "id": f"fc_{i}",
        "type": "function_call",
        "status": status,
        "arguments": arguments,
        "call_id": f"call_{i}",
        "name": name,
    }


async def close_call(emit: Callable[[dict[str, Any]], Any], item: dict[str, Any], idx: int, output: list[Any]) -> None:
    common = {"item_id": item["id"], "output_index": idx}
    await emit({"type": "response.function_call_arguments.done", **common, "arguments": item["arguments"]})
    done = {**item, "status": "completed"}
    await emit({"type": "response.output_item.done", "output_index": idx, "item": done})
    output.append(done)


async def close_reasoning(
    emit: Callable[[dict[str, Any]], Any], rs_id: str, idx: int, summary: str, output: list[Any]
) -> None:
    common = {"item_id": rs_id, "output_index": idx, "summary_index": 0}
    await emit({"type": "response.reasoning_summary_text.done", **common, "text": summary})
    part = {"type": "summary_text", "text": summary}
    await emit({"type": "response.reasoning_summary_part.done", **common, "part": part})
    item = {"id": rs_id, "type": "reasoning", "summary": [part]}
    await emit({"type": "response.output_item.done", "output_index": idx, "item": item})
    output.append(item)
