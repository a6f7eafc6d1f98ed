"""OpenAI Responses API (``POST {base}/responses``) with the official SDK.

``reasoning.effort`` and ``reasoning.summary`` (auto | concise | detailed) come from the
turn settings; reasoning summaries (and the raw ``reasoning_text`` of open models) arrive
as reasoning events, ``output_text`` as visible text. The stream must end with
``response.completed`` (or ``response.incomplete``); one that stops before is an error.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import httpx2
import openai

from backends.base import ChatRequest
from backends.providers.errors import check_stream, count, shape_checked
from backends.providers.hosted import HostedBackend, TurnState
from backends.providers.parts import responses_content
from backends.transport.http import Probe
from telemetry import events as ev
from telemetry.errors import ErrorKind


class OpenAIResponsesBackend(HostedBackend):
    api = "responses"

    def __init__(self, model: str, **opts: Any) -> None:
        opts.setdefault("provider", "openai-responses")
        opts.setdefault("key_env", "OPENAI_API_KEY")
        super().__init__(model, **opts)
        self._client = openai.AsyncOpenAI(**self.sdk_options())

    def _params(self, request: ChatRequest) -> dict[str, Any]:
        s = request.settings
        system = [m.content for m in request.messages if m.role == "system"]
        p: dict[str, Any] = {
            "model": self.model,
            "input": [
                {"role": m.role, "content": responses_content(m)} for m in request.messages if m.role != "system"
            ],
            "stream": s.stream,
        }
        if system:
            p["instructions"] = "\n\n".join(system)
        reasoning: dict[str, str] = {}
        if s.reasoning_effort is not None:
            reasoning["effort"] = s.reasoning_effort
        if s.reasoning_summary is not None:
            reasoning["summary"] = s.reasoning_summary
        if reasoning:
            p["reasoning"] = reasoning
        if s.max_output_tokens is not None:
            p["max_output_tokens"] = s.max_output_tokens
        if s.temperature is not None:
            p["temperature"] = s.temperature
        return p

    async def _open(self, request: ChatRequest, probe: Probe, state: TurnState) -> Any:
        client = self._client.with_options(max_retries=request.settings.max_retries)
        out = await client.responses.create(**self._params(request), extra_headers=probe.headers)
        await check_stream(out)
        return out

    @shape_checked("Responses")
    def _translate(self, item: Any, t: int, state: TurnState) -> Iterable[ev.Event]:
        kind = getattr(item, "type", None)
        if kind is None or getattr(item, "object", None) == "response":
            yield from self._complete(item, t, state)
            return
        match kind:
            case "response.reasoning_summary_text.delta" | "response.reasoning_text.delta":
                if item.delta:
                    yield ev.ReasoningDelta(t, item.delta)
            case "response.output_text.delta":
                if item.delta:
                    yield ev.TextDelta(t, item.delta)
            case "response.refusal.delta":
                if item.delta:
                    yield ev.TextDelta(t, item.delta)
            case "response.output_item.added":
                it = item.item
                if getattr(it, "type", None) == "function_call":
                    yield ev.ToolCallDelta(t, getattr(it, "name", "") or "", "")
            case "response.function_call_arguments.delta":
                if item.delta:
                    yield ev.ToolCallDelta(t, "", item.delta)
            case "response.completed" | "response.incomplete":
                self._usage(item.response, t, state)
                state.finished = True
                if kind == "response.incomplete":
                    details = getattr(item.response, "incomplete_details", None)
                    state.stop_reason = f"incomplete: {getattr(details, 'reason', None) or 'unknown'}"
                else:
                    state.stop_reason = "completed"
            case "response.failed":
                err = getattr(item.response, "error", None)
                msg = getattr(err, "message", None) or "the response failed"
                code = getattr(err, "code", None) or "failed"
                state.failed = self._stream_failure(t, f"{code}: {msg}")
            case "error":
                msg = getattr(item, "message", None) or "unknown error"
                code = getattr(item, "code", None) or "error"
                state.failed = self._stream_failure(t, f"{code}: {msg}")

    def _stream_failure(self, t: int, detail: str) -> ev.Failed:
        detail = self._secrets.mask(" ".join(detail.split()))
        return ev.Failed(
            t,
            ErrorKind.STREAM_ERROR,
            f"The server reported an error in the middle of the answer ({detail.rstrip('.')}).",
            None,
            "The partial answer is kept; retry the turn, and raise --max-retries if this keeps happening.",
        )

    def _usage(self, response: Any, t: int, state: TurnState) -> None:
        u = getattr(response, "usage", None)
        if u is None:
            return
        din = getattr(u, "input_tokens_details", None)
        dout = getattr(u, "output_tokens_details", None)
        state.usage["event"] = ev.Usage(
            t,
            input=count(getattr(u, "input_tokens", None)),  # the SDK builds its models without validating
            cached_input=count(getattr(din, "cached_tokens", None)) if din else None,
            output=count(getattr(u, "output_tokens", None)),
            reasoning=count(getattr(dout, "reasoning_tokens", None)) if dout else None,
        )

    def _complete(self, resp: Any, t: int, state: TurnState) -> Iterable[ev.Event]:
        """A non-streamed ``response`` object."""
        self._usage(resp, t, state)
        usage: ev.Usage | None = state.usage.get("event")
        reasoning, text = [], []
        for out in getattr(resp, "output", None) or ():
            if out.type == "reasoning":
                reasoning += [s.text for s in (getattr(out, "summary", None) or ())]
                reasoning += [c.text for c in (getattr(out, "content", None) or ()) if getattr(c, "text", None)]
            elif out.type == "message":
                text += [c.text for c in out.content if getattr(c, "text", None)]
            elif out.type == "function_call":
                yield ev.ToolCallDelta(t, out.name, out.arguments)
        r_tokens = usage.reasoning if usage else None
        v_tokens = (usage.output - (usage.reasoning or 0)) if usage and usage.output is not None else None
        if reasoning:
            yield ev.ReasoningDelta(t, "".join(reasoning), r_tokens or None)
        if text:
            yield ev.TextDelta(t, "".join(text), v_tokens or None)
        state.finished = True
        state.stop_reason = getattr(resp, "status", None)

    def _finish(self, state: TurnState, probe: Probe, t: int) -> Iterable[ev.Event]:
        if "event" in state.usage:
            yield state.usage["event"]
        if not state.finished:
            yield ev.Failed(
                t,
                ErrorKind.INCOMPLETE_STREAM,
                "The stream ended before response.completed, so the answer may be cut short.",
                None,
                "The partial answer is kept; retry the turn, and check any proxy between you and the server.",
            )
            return
        yield ev.Finished(t, state.stop_reason)


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
