"""OpenAI Responses API (``POST {base}/responses``) with the official SDK.

The request, the usage and the end of a turn are :class:`backends.providers.responses_wire.ResponsesWire`'s
(shared with the lean reader, :mod:`backends.providers.lean.responses`); this module opens the SDK's
stream and translates its typed events. The stream must end with ``response.completed`` (or
``response.incomplete``); one that stops before is an error.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import httpx2
import openai

from ...telemetry import events as ev
from ..base import ChatRequest
from ..transport.http import Probe
from .answers.stream_shape import check_stream, count, shape_checked
from .fields import require_object
from .hosted import HostedBackend, TurnState, guarded_client, openai_parses
from .responses_wire import REASONING_DELTAS, TEXT_DELTAS, ResponsesWire
from .tools_wire import text_id


class OpenAIResponsesBackend(ResponsesWire, HostedBackend):
    api = "responses"

    def __init__(self, model: str, **opts: Any) -> None:
        super().__init__(model, **opts)
        self._client = guarded_client(openai.AsyncOpenAI, openai_parses)(**self.sdk_options())

    async def _open(self, request: ChatRequest, probe: Probe, state: TurnState) -> Any:
        client = self._client.with_options(max_retries=request.settings.max_retries)
        out = await client.responses.create(**self._params(request), extra_headers=probe.headers)
        await check_stream(out)
        return out

    @shape_checked("Responses")
    def _translate(self, item: Any, t: int, state: TurnState) -> Iterable[ev.Event]:
        require_object(item)
        kind = getattr(item, "type", None)
        if kind is None or getattr(item, "object", None) == "response":
            yield from self._complete(item, t, state)
            return
        if kind in TEXT_DELTAS:
            if item.delta:
                yield ev.TextDelta(t, item.delta)
        elif kind in REASONING_DELTAS:
            if item.delta:
                yield ev.ReasoningDelta(t, item.delta)
        elif kind == "response.output_item.added":
            it = item.item
            if getattr(it, "type", None) == "function_call":
                index = count(getattr(item, "output_index", None))
                yield ev.ToolCallDelta(
                    t,
                    getattr(it, "name", "") or "",
                    getattr(it, "arguments", "") or "",
                    index=index,
                    call_id=text_id(getattr(it, "call_id", None)),
                )
        elif kind == "response.function_call_arguments.delta":
            if item.delta:
                yield ev.ToolCallDelta(t, "", item.delta, index=count(getattr(item, "output_index", None)))
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            self._lifecycle(kind, item.response, None, None, t, state)
        elif kind == "error":
            self._lifecycle(kind, None, getattr(item, "message", None), getattr(item, "code", None), t, state)


def _events(*objs: str) -> bytes:
    out = b""
    for i, o in enumerate(objs):
        kind = o.split('"type":"', 1)[1].split('"', 1)[0]
        out += f'event: {kind}\ndata: {{{o},"sequence_number":{i}}}\n\n'.encode()
    return out


_RESP = '"response":{"id":"r","object":"response","created_at":0,"status":"%s","model":"w","output":[],"usage":%s}'
_USAGE = (
    '{"input_tokens":1,"input_tokens_details":{"cached_tokens":0},"output_tokens":2,'
    '"output_tokens_details":{"reasoning_tokens":1},"total_tokens":3}'
)
_ITEM = '"item_id":"i","output_index":0'
OpenAIResponsesBackend.WARM_UP_BODY = _events(
    '"type":"response.created",' + _RESP % ("in_progress", "null"),
    '"type":"response.in_progress",' + _RESP % ("in_progress", "null"),
    '"type":"response.output_item.added","output_index":0,"item":{"id":"i","type":"reasoning","summary":[]}',
    '"type":"response.reasoning_summary_part.added",' + _ITEM + ',"summary_index":0,"part":{"type":"summary_text",'
    '"text":""}',
    '"type":"response.reasoning_summary_text.delta",' + _ITEM + ',"summary_index":0,"delta":"r"',
    '"type":"response.reasoning_summary_text.done",' + _ITEM + ',"summary_index":0,"text":"r"',
    '"type":"response.output_item.done","output_index":0,"item":{"id":"i","type":"reasoning","summary":[]}',
    '"type":"response.output_item.added","output_index":0,"item":{"id":"i","type":"message","status":"in_progress",'
    '"role":"assistant","content":[]}',
    '"type":"response.content_part.added",' + _ITEM + ',"content_index":0,"part":{"type":"output_text","text":"",'
    '"annotations":[]}',
    '"type":"response.output_text.delta",' + _ITEM + ',"content_index":0,"delta":"w","logprobs":[]',
    '"type":"response.output_text.done",' + _ITEM + ',"content_index":0,"text":"w","logprobs":[]',
    '"type":"response.completed",' + _RESP % ("completed", _USAGE),
)


async def _warm_responses(self: HostedBackend, client: httpx2.AsyncClient) -> None:
    sdk = openai.AsyncOpenAI(api_key="warm-up", base_url="http://warm.up/v1", http_client=client, max_retries=0)
    stream = await sdk.responses.create(model="w", input="w", stream=True)
    async for _ in stream:
        pass


OpenAIResponsesBackend._warm_request = _warm_responses  # type: ignore[method-assign]
