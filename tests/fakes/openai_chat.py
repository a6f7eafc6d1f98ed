"""OpenAI Chat Completions on the fake server: SSE chunks (reasoning in any of the servers' shapes,
usage chunk, llama-server / Ollama timings, vLLM's per-request ``metrics`` on the usage chunk), or the whole
JSON completion when not streamed."""

from __future__ import annotations

import time
import uuid
from typing import Any

from aiohttp import web

from tests.fakes.schedule import Schedule
from tests.fakes.stream import Stream, failures, with_metrics


def usage_chat(s: Schedule) -> dict[str, Any]:
    return {
        "prompt_tokens": s.input_tokens,
        "completion_tokens": s.claimed_output_tokens or s.output_tokens,
        "total_tokens": s.input_tokens + (s.claimed_output_tokens or s.output_tokens),
        "prompt_tokens_details": {"cached_tokens": s.cached_tokens, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": s.reasoning_tokens,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def server_timings(s: Schedule, done: float = 1.0) -> dict[str, Any]:
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


def chat_base(body: dict[str, Any], cid: str) -> dict[str, Any]:
    return {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": body.get("model", "fake-model"),
        "system_fingerprint": "fp_fake",
    }


async def chat_sse(st: Stream, body: dict[str, Any], s: Schedule) -> None:
    cid = f"chatcmpl-{uuid.uuid4().hex[:12]}"
    base = chat_base(body, cid)
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
        if await failures(st, s, n_sent, error):
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
        mid = server_timings(s, (n_sent + 1) / len(chunks)) if s.timings_per_chunk else {}
        st.sent_token(kind)
        await st.data(chunk(delta, **mid))
        st.rec.chunks_sent += 1
    if await failures(st, s, len(chunks), error):
        return
    for at, i, name, piece in s.tool_chunks():
        await st.until(at)
        call: dict[str, Any] = {"index": i, "function": {"arguments": piece}}
        if name:
            call = {"index": i, "id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": ""}}
        st.sent_token("tool")
        await st.data(chunk({"tool_calls": [call]}))
        st.rec.chunks_sent += 1
    if s.no_done:  # cut off cleanly: no finish chunk, no usage, no [DONE]
        await st.end()
        return
    await st.data(chunk({}, s.stop_reason or ("tool_calls" if s.tool_calls else "stop"), **server_timings(s)))
    if include_usage and s.usage:
        usage_chunk = {**base, "choices": [], "usage": usage_chat(s)}
        await st.data(with_metrics(usage_chunk, st, s, s.output_tokens))  # vLLM: metrics ride the usage chunk
    await st.data("[DONE]")
    await st.end()


async def chat_json(st: Stream, body: dict[str, Any], s: Schedule) -> web.Response:
    await st.until(s.end_ms())
    message: dict[str, Any] = {"role": "assistant", "content": s.visible_text(), "refusal": None}
    if s.reasoning in ("reasoning_content", "reasoning"):
        message[s.reasoning] = s.reasoning_text()
    elif s.reasoning == "think" and s.reasoning_tokens:
        message["content"] = f"<think>{s.reasoning_text()}</think>{s.visible_text()}"
    if s.tool_calls:
        message["content"] = message["content"] or None
        message["tool_calls"] = [
            {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": args}}
            for i, (name, args) in enumerate(s.tool_calls)
        ]
    finish = s.stop_reason or ("tool_calls" if s.tool_calls else "stop")
    out = {
        **chat_base(body, f"chatcmpl-{uuid.uuid4().hex[:12]}"),
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        **server_timings(s),
    }
    if s.usage:
        out["usage"] = usage_chat(s)
    st.rec.status = 200
    st.rec.completed = True
    body_out = with_metrics(out, st, s, s.output_tokens, streamed=False)
    if isinstance(body_out, str):
        return web.Response(text=body_out, content_type="application/json")
    return web.json_response(body_out)
