"""Anthropic Messages (``POST {base}/v1/messages``) with the official SDK.

Extended thinking: ``settings.thinking_budget`` N gives ``{"type": "enabled",
"budget_tokens": N}``; ``settings.extra["thinking"] == "adaptive"`` gives ``{"type":
"adaptive"}``; ``settings.thinking_display`` adds ``display`` (summarized | omitted);
``settings.reasoning_effort`` becomes ``output_config.effort``.

What is a token: ``thinking_delta`` (reasoning), ``text_delta`` (visible),
``input_json_delta`` / ``tool_use`` (tool call). A signature-only thinking block (omitted
display) and ``redacted_thinking`` carry no readable token, so they are not tokens; the
thinking they stand for is counted from ``usage.output_tokens_details.thinking_tokens``
and its time is estimated by the metrics.

Usage: ``input`` is everything the model read (``input_tokens`` + cache reads + cache
writes), ``cached_input`` the cache reads; ``output`` is the final cumulative
``output_tokens`` (thinking included).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import anthropic
import httpx2

from backends.base import ChatRequest
from backends.providers.errors import check_stream, count, shape_checked
from backends.providers.hosted import HostedBackend, TurnState
from backends.providers.parts import messages_content
from backends.transport.http import Probe
from telemetry import events as ev
from telemetry.errors import ErrorKind

DEFAULT_MAX_TOKENS = 4096


def _get(obj: Any, name: str) -> Any:
    """A field the SDK may or may not model yet (unknown fields survive in model_extra)."""
    if obj is None:
        return None
    v = getattr(obj, name, None)
    if v is None:
        v = (getattr(obj, "model_extra", None) or {}).get(name)
    return v


class AnthropicMessagesBackend(HostedBackend):
    api = "messages"

    def __init__(self, model: str, **opts: Any) -> None:
        opts.setdefault("provider", "anthropic")
        opts.setdefault("key_env", "ANTHROPIC_API_KEY")
        super().__init__(model, **opts)
        self._client = anthropic.AsyncAnthropic(**self.sdk_options())

    def _params(self, request: ChatRequest) -> dict[str, Any]:
        s = request.settings
        system = [m.content for m in request.messages if m.role == "system"]
        thinking: dict[str, Any] | None = None
        if s.extra.get("thinking") == "adaptive":
            thinking = {"type": "adaptive"}
        elif s.thinking_budget:
            thinking = {"type": "enabled", "budget_tokens": s.thinking_budget}
        if thinking is not None and s.thinking_display:
            thinking["display"] = s.thinking_display
        max_tokens = s.max_output_tokens
        if max_tokens is None:
            max_tokens = DEFAULT_MAX_TOKENS + (s.thinking_budget or 0)
        p: dict[str, Any] = {
            "model": self.model,
            "max_tokens": max_tokens,
            "messages": [
                {"role": m.role, "content": messages_content(m)} for m in request.messages if m.role != "system"
            ],
            "stream": True,
        }
        if system:
            p["system"] = "\n\n".join(system)
        if thinking is not None:
            p["thinking"] = thinking
        if s.reasoning_effort is not None:
            p["output_config"] = {"effort": s.reasoning_effort}
        if s.temperature is not None:
            p["temperature"] = s.temperature
        return p

    async def _open(self, request: ChatRequest, probe: Probe, state: TurnState) -> Any:
        client = self._client.with_options(max_retries=request.settings.max_retries)
        params = self._params(request)
        if not request.settings.stream:
            params["stream"] = False
        state.extra["usage"] = {}
        out = await client.messages.create(**params, extra_headers=probe.headers)
        await check_stream(out)
        return out

    @shape_checked("Anthropic Messages")
    def _translate(self, item: Any, t: int, state: TurnState) -> Iterable[ev.Event]:
        u: dict[str, Any] = state.extra["usage"]
        kind = getattr(item, "type", None)
        if kind == "message":  # non-streamed: the whole message at once
            yield from self._complete(item, t, state)
            return
        match kind:
            case "message_start":
                self._read_usage(item.message.usage, u)
            case "content_block_start":
                block = item.content_block
                if block.type == "tool_use":
                    yield ev.ToolCallDelta(t, block.name or "", "")
                elif block.type == "thinking" and getattr(block, "thinking", ""):
                    yield ev.ReasoningDelta(t, block.thinking)
                elif block.type == "text" and getattr(block, "text", ""):
                    yield ev.TextDelta(t, block.text)
                # redacted_thinking: encrypted, not a readable token
            case "content_block_delta":
                d = item.delta
                match d.type:
                    case "thinking_delta":
                        if d.thinking:
                            yield ev.ReasoningDelta(t, d.thinking)
                    case "text_delta":
                        if d.text:
                            yield ev.TextDelta(t, d.text)
                    case "input_json_delta":
                        if d.partial_json:
                            yield ev.ToolCallDelta(t, "", d.partial_json)
                    # signature_delta / citations: not tokens
            case "message_delta":
                state.stop_reason = getattr(item.delta, "stop_reason", None) or state.stop_reason
                self._read_usage(item.usage, u)
            case "message_stop":
                state.finished = True

    @staticmethod
    def _read_usage(usage: Any, u: dict[str, Any]) -> None:
        if usage is None:
            return
        for name in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens", "output_tokens"):
            v = count(_get(usage, name))  # a count that is not an int would break the metrics later
            if v is not None:
                u[name] = v
        details = _get(usage, "output_tokens_details")
        thinking = _get(details, "thinking_tokens") if not isinstance(details, dict) else details.get("thinking_tokens")
        if count(thinking) is not None:
            u["thinking_tokens"] = thinking

    def _usage_event(self, u: dict[str, Any], t: int) -> ev.Usage | None:
        if "output_tokens" not in u:
            return None
        read = u.get("cache_read_input_tokens") or 0
        inp = u.get("input_tokens")
        total_in = None if inp is None else inp + read + (u.get("cache_creation_input_tokens") or 0)
        return ev.Usage(
            t, input=total_in, cached_input=read, output=u["output_tokens"], reasoning=u.get("thinking_tokens")
        )

    def _complete(self, msg: Any, t: int, state: TurnState) -> Iterable[ev.Event]:
        u: dict[str, Any] = state.extra["usage"]
        self._read_usage(msg.usage, u)
        usage = self._usage_event(u, t)
        thinking = "".join(getattr(b, "thinking", "") or "" for b in msg.content if b.type == "thinking")
        text = "".join(b.text for b in msg.content if b.type == "text")
        r_tokens = usage.reasoning if usage else None
        v_tokens = (usage.output - (usage.reasoning or 0)) if usage and usage.output is not None else None
        if thinking:
            yield ev.ReasoningDelta(t, thinking, r_tokens or None)
        if text:
            yield ev.TextDelta(t, text, v_tokens or None)
        for b in msg.content:
            if b.type == "tool_use":
                import json

                yield ev.ToolCallDelta(t, b.name, json.dumps(b.input))
        state.stop_reason = msg.stop_reason
        state.finished = True

    def _finish(self, state: TurnState, probe: Probe, t: int) -> Iterable[ev.Event]:
        usage = self._usage_event(state.extra["usage"], t)
        if usage is not None:
            yield usage
        if not state.finished:
            yield ev.Failed(
                t,
                ErrorKind.INCOMPLETE_STREAM,
                "The stream ended before message_stop, so the answer may be cut short.",
                None,
                "The partial answer is kept; retry the turn, and check any proxy between you and the server.",
            )
            return
        yield ev.Finished(t, state.stop_reason)


def _events(*objs: str) -> bytes:
    out = b""
    for o in objs:
        kind = o.split('"type":"', 1)[1].split('"', 1)[0]
        out += f"event: {kind}\ndata: {{{o}}}\n\n".encode()
    return out


AnthropicMessagesBackend.WARM_UP_BODY = _events(
    '"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"model":"w",'
    '"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}',
    '"type":"ping"',
    '"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}',
    '"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"r"}',
    '"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"s"}',
    '"type":"content_block_stop","index":0',
    '"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}',
    '"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"w"}',
    '"type":"content_block_stop","index":1',
    '"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":2}',
    '"type":"message_stop"',
)


async def _warm_messages(self: HostedBackend, client: httpx2.AsyncClient) -> None:
    sdk = anthropic.AsyncAnthropic(api_key="warm-up", base_url="http://warm.up", http_client=client, max_retries=0)
    stream = await sdk.messages.create(
        model="w", max_tokens=8, messages=[{"role": "user", "content": "w"}], stream=True
    )
    async for _ in stream:
        pass


AnthropicMessagesBackend._warm_request = _warm_messages  # type: ignore[method-assign]
