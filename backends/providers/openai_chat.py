"""OpenAI Chat Completions (``POST {base}/chat/completions``) with the official SDK.

Also the backend for every OpenAI-compatible server (``compat``): vLLM, SGLang,
llama-server, Ollama, OpenRouter, LM Studio. Compat differences handled here:

- reasoning text from ``delta.reasoning_content`` or ``delta.reasoning``, and
  ``<think>...</think>`` inside content split by :class:`backends.think.ThinkSplitter`;
- llama-server ``timings`` and Ollama's ``*_duration`` fields kept as ServerTimings;
- a server that rejects ``stream_options`` gets the request again once without it (a
  second attempt, visible as such, with the reason in the record's ``notices``); the token
  counts are then estimated;
- no API key is demanded (and none from the environment is sent to a third party).

Load driver option (``raw_stream=True``, off by default): the streamed answer is read with
``with_raw_response`` and the SDK's own SSE decoder, and each ``data:`` line is translated from
its JSON dict instead of the SDK's typed chunk model, which costs about a third of the client's
CPU per chunk. Same bytes, same probe stamps, same events; the chat keeps the typed SDK path, and
`ttft ask` reads without the SDK at all (backends.providers.lean.chat, the same translation).

Non-streamed (``settings.stream`` False): the whole answer arrives at once, so TTFT ==
E2E; every part of the answer is stamped with the arrival of the response body.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import httpx2
import openai

from ...telemetry import events as ev
from ...telemetry import json_guard
from ..base import ChatRequest
from ..think import ThinkSplitter
from ..transport.http import Probe
from .answers.stream_shape import check_stream, count, shape_checked
from .chat_wire import (
    SERVER_FIELDS,
    STREAM_OPTIONS_NOT_SENT,
    STREAM_OPTIONS_NOTICE,
    STREAM_OPTIONS_REJECTED,
    ChatWire,
    server_events_raw,
)
from .fields import field
from .hosted import HostedBackend, TurnState, guarded_client, openai_parses
from .tools_wire import text_id


def _extra(obj: Any) -> dict[str, Any]:
    return dict(getattr(obj, "model_extra", None) or {})


def usage_event(t: int, usage: Any) -> ev.Usage:
    details_in = getattr(usage, "prompt_tokens_details", None)
    details_out = getattr(usage, "completion_tokens_details", None)
    return ev.Usage(
        t,
        input=count(getattr(usage, "prompt_tokens", None)),
        cached_input=count(getattr(details_in, "cached_tokens", None)) if details_in else None,
        output=count(getattr(usage, "completion_tokens", None)),
        reasoning=count(getattr(details_out, "reasoning_tokens", None)) if details_out else None,
        cache_write_input=count(field(details_in, "cache_write_tokens")),  # not modelled: read from its extras
    )


class RawChunks:
    """A streamed answer as JSON dicts: the SDK's SSE decoder and error rules, no typed models.

    Iterates the same (stamped) byte stream the SDK would, so probe stamps are unchanged.
    """

    def __init__(self, response: httpx2.Response, decoder: Any) -> None:
        self.response = response
        self._decoder = decoder

    def __aiter__(self) -> Any:
        return self._events()

    async def _events(self) -> Any:
        response = self.response
        try:
            async for sse in self._decoder.aiter_bytes(response.aiter_bytes()):
                data = sse.data
                if data.startswith("[DONE]"):
                    if response.http_version == "HTTP/1.1":
                        # A private SDK helper, imported here so only the opt-in raw path depends on it.
                        from openai._streaming_cleanup import drain_response_async

                        await drain_response_async(response)  # keeps the connection reusable, as the SDK does
                    return
                json_guard.check(data, "a stream event")  # before the stdlib's parser recurses into it
                obj = sse.json()
                if isinstance(obj, dict) and obj.get("error"):
                    error = obj["error"]
                    message = error.get("message") if isinstance(error, dict) else None
                    if not message or not isinstance(message, str):
                        message = "An error occurred during streaming"
                    raise openai.APIError(message=message, request=response.request, body=error)
                yield obj
        except httpx2.TimeoutException as err:
            raise openai.APITimeoutError(request=response.request) from err
        except httpx2.RequestError as err:
            raise openai.APIConnectionError(request=response.request) from err

    async def close(self) -> None:
        await self.response.aclose()


class OpenAIChatBackend(ChatWire, HostedBackend):
    api = "chat.completions"
    raw_stream = False  # the load driver's cheaper streamed path (see the module doc)

    def __init__(self, model: str, *, compat: bool = False, **opts: Any) -> None:
        super().__init__(model, compat=compat, **opts)
        self._client = guarded_client(openai.AsyncOpenAI, openai_parses)(**self.sdk_options())

    async def _open(self, request: ChatRequest, probe: Probe, state: TurnState) -> Any:
        client = self._client.with_options(max_retries=request.settings.max_retries)
        params = self._params(request)
        state.extra["splitter"] = ThinkSplitter() if self.compat else None
        if request.settings.stream and not self.stream_options_ok:
            state.notices.append(ev.Notice(ev.now_ns(), STREAM_OPTIONS_NOTICE, STREAM_OPTIONS_NOT_SENT))
        raw = self.raw_stream and request.settings.stream
        try:
            return await self._create(client, params, probe, raw)
        except openai.BadRequestError as exc:
            if "stream_options" not in params or "stream_options" not in str(exc):
                raise
            # The server does not know stream_options: ask once more without it.
            self.stream_options_ok = False
            del params["stream_options"]
            state.notices.append(ev.Notice(ev.now_ns(), STREAM_OPTIONS_NOTICE, STREAM_OPTIONS_REJECTED))
            return await self._create(client, params, probe, raw)

    async def _create(self, client: openai.AsyncOpenAI, params: dict[str, Any], probe: Probe, raw: bool) -> Any:
        kw = {k: v for k, v in params.items() if k not in SERVER_FIELDS}
        if extra := {k: params[k] for k in SERVER_FIELDS if k in params}:
            kw["extra_body"] = extra
        if not raw:
            out = await client.chat.completions.create(**kw, extra_headers=probe.headers)
        else:
            resp = await client.chat.completions.with_raw_response.create(**kw, extra_headers=probe.headers)
            out = RawChunks(resp.http_response, client._make_sse_decoder())
        await check_stream(out)
        return out

    def _server(self, obj: Any, t: int) -> Iterable[ev.Event]:
        yield from server_events_raw(_extra(obj), t)  # the typed model keeps unknown fields as extras

    @shape_checked("Chat Completions")
    def _translate(self, item: Any, t: int, state: TurnState) -> Iterable[ev.Event]:
        if type(item) is dict:
            yield from self._translate_raw(item, t, state)
            return
        if getattr(item, "object", None) == "chat.completion" or not hasattr(item, "choices"):
            yield from self._translate_complete(item, t, state)
            return
        yield from self._server(item, t)
        if getattr(item, "usage", None) is not None:
            state.usage["event"] = usage_event(t, item.usage)
        for choice in item.choices or ():
            delta = choice.delta
            if delta is not None:
                extra = _extra(delta)
                reasoning = extra.get("reasoning_content") or extra.get("reasoning")
                if isinstance(reasoning, str) and reasoning:
                    yield ev.ReasoningDelta(t, reasoning)
                if delta.content:
                    yield from self._content(delta.content, t, state)
                for tc in delta.tool_calls or ():
                    fn = tc.function
                    name = (fn.name if fn else None) or ""
                    args = (fn.arguments if fn else None) or ""
                    call_id = text_id(tc.id)
                    if name or args or call_id:
                        yield ev.ToolCallDelta(t, name, args, index=count(tc.index), call_id=call_id)
            if choice.finish_reason:
                state.stop_reason = choice.finish_reason

    def _translate_complete(self, resp: Any, t: int, state: TurnState) -> Iterable[ev.Event]:
        """A non-streamed ``chat.completion``: its JSON (extra fields included) through the one dict translation."""
        yield from self._translate_complete_raw(resp.model_dump(), t, state)


def _sse(*objs: str) -> bytes:
    return b"".join(f"data: {o}\n\n".encode() for o in objs)


OpenAIChatBackend.WARM_UP_BODY = _sse(
    '{"id":"w","object":"chat.completion.chunk","created":0,"model":"w","choices":[{"index":0,'
    '"delta":{"role":"assistant","content":"","reasoning_content":"r"},"logprobs":null,"finish_reason":null}],'
    '"usage":null}',
    '{"id":"w","object":"chat.completion.chunk","created":0,"model":"w","choices":[{"index":0,"delta":{},'
    '"logprobs":null,"finish_reason":"stop"}],"usage":null}',
    '{"id":"w","object":"chat.completion.chunk","created":0,"model":"w","choices":[],"usage":{"prompt_tokens":1,'
    '"completion_tokens":1,"total_tokens":2,"prompt_tokens_details":{"cached_tokens":0},'
    '"completion_tokens_details":{"reasoning_tokens":0}}}',
    "[DONE]",
)


async def _warm_chat(self: HostedBackend, client: httpx2.AsyncClient) -> None:
    sdk = openai.AsyncOpenAI(api_key="warm-up", base_url="http://warm.up/v1", http_client=client, max_retries=0)
    stream = await sdk.chat.completions.create(model="w", messages=[{"role": "user", "content": "w"}], stream=True)
    async for _ in stream:
        pass


OpenAIChatBackend._warm_request = _warm_chat  # type: ignore[method-assign]
