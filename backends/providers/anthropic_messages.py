"""Anthropic Messages (``POST {base}/v1/messages``) with the official SDK.

The request, the usage and the end of a turn are :class:`backends.providers.messages_wire.MessagesWire`'s
(shared with the lean reader, :mod:`backends.providers.lean.messages`); this module opens the SDK's
stream and translates its typed events. What is a token, and how usage is read: see that module.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import anthropic
import httpx2

from ...telemetry import events as ev
from ..base import ChatRequest
from ..transport.http import Probe
from .answers.stream_shape import check_stream, count, shape_checked
from .fields import field, require_object
from .hosted import HostedBackend, TurnState, anthropic_parses, guarded_client
from .messages_wire import MessagesWire, read_usage
from .tools_wire import text_id

SDK_BODY_ONLY = ("temperature",)


class AnthropicMessagesBackend(MessagesWire, HostedBackend):
    api = "messages"

    def __init__(self, model: str, **opts: Any) -> None:
        super().__init__(model, **opts)
        self._client = guarded_client(anthropic.AsyncAnthropic, anthropic_parses)(**self.sdk_options())

    async def _open(self, request: ChatRequest, probe: Probe, state: TurnState) -> Any:
        client = self._client.with_options(max_retries=request.settings.max_retries)
        state.extra["usage"] = {}
        params = self._params(request)
        # What this SDK's create() takes no argument for goes in the body as is (anthropic 2.15 has no
        # `temperature`): the request the lean reader sends, not a TypeError.
        extra = {k: params.pop(k) for k in SDK_BODY_ONLY if k in params}
        out = await client.messages.create(**params, extra_headers=probe.headers, extra_body=extra or None)
        await check_stream(out)
        return out

    @shape_checked("Anthropic Messages")
    def _translate(self, item: Any, t: int, state: TurnState) -> Iterable[ev.Event]:
        require_object(item)
        u: dict[str, Any] = state.extra["usage"]
        kind = getattr(item, "type", None)
        if kind == "message":  # non-streamed: the whole message at once
            yield from self._complete(item, t, state)
            return
        match kind:
            case "message_start":
                read_usage(item.message.usage, u)
            case "content_block_start":
                block = item.content_block
                if block.type == "tool_use":
                    index = count(getattr(item, "index", None))
                    yield ev.ToolCallDelta(
                        t, block.name or "", "", index=index, call_id=text_id(getattr(block, "id", None))
                    )
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
                            yield ev.ToolCallDelta(t, "", d.partial_json, index=count(getattr(item, "index", None)))
                    # signature_delta / citations: not tokens
            case "message_delta":
                state.stop_reason = getattr(item.delta, "stop_reason", None) or state.stop_reason
                read_usage(item.usage, u)
            case "message_stop":
                state.finished = True

    def _complete(self, msg: Any, t: int, state: TurnState) -> Iterable[ev.Event]:
        """A non-streamed ``message`` (the SDK's model)."""
        blocks = [(b.type, b) for b in msg.content]
        yield from self._complete_blocks(msg.usage, blocks, field, msg.stop_reason, t, state)


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
