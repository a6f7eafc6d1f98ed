"""Chat Completions without the OpenAI SDK: the same requests, retries, stamps and events.

Why: importing ``openai`` costs 0.5-1.2 s of a process start (it builds ~650 pydantic models),
which is most of ``ttft ask``'s own delay on a hosted call, and its typed chunks cost a third
of the client's CPU per chunk under load. This backend sends the request through the same
:class:`backends.transport.http.InstrumentedHTTP` client (so AttemptSent / HeadersReceived and byte
arrival come from the same hooks as on the SDK path), splits SSE ``data:`` events from the
bytes as they arrive, and translates each chunk's JSON dict with the one translation both
paths share (:class:`backends.providers.chat_wire.ChatWire`).

What it keeps of the SDK's behaviour, so a record does not depend on the path:

- the URL ``{base_url}/chat/completions`` (default ``https://api.openai.com/v1``, or
  ``OPENAI_BASE_URL``), the configured headers, ``Authorization: Bearer KEY`` only with a key;
- retries on 408/409/429/5xx (or ``x-should-retry: true``) and on transport errors, up to
  ``settings.max_retries``, with the SDK's backoff (:mod:`backends.providers.lean.retry`);
- its errors: the SDK's exception classes (:mod:`backends.providers.lean.sdk_errors`), which
  :mod:`backends.providers.errors` reads as it reads the SDK's, so the Failed event (type, message, hint)
  is the same;
- a mid-stream ``{"error": ...}`` object, malformed JSON, a dropped connection and a missing
  ``[DONE]`` end the turn as they do through the SDK's stream (:mod:`backends.providers.lean.sse`).
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import TYPE_CHECKING, Any

import httpx2

from backends.base import ChatRequest
from backends.providers.chat_wire import (
    OLLAMA_KEYS,
    STREAM_OPTIONS_NOT_SENT,
    STREAM_OPTIONS_NOTICE,
    STREAM_OPTIONS_REJECTED,
    ChatWire,
)
from backends.providers.errors import MalformedStream, check_content_type
from backends.providers.hosted import HostedBackend, TurnState
from backends.providers.lean.retry import retry_delay_s, should_retry
from backends.providers.lean.sdk_errors import APIConnectionError, APITimeoutError, BadRequestError, status_error
from backends.providers.lean.sse import LeanChunks, loads
from backends.think import ThinkSplitter
from backends.transport.http import Probe, needs_ca_bundle
from telemetry import events as ev

if TYPE_CHECKING:
    from backends.transport.aiohttp_client import AiohttpClient
    from backends.transport.protocol import ProtoClient

DEFAULT_BASE_URL = "https://api.openai.com/v1"


def chat_url(base_url: str | None) -> str:
    """``{base_url}/chat/completions``, joined as the SDK joins it (one slash between)."""
    base = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
    return base.rstrip("/") + "/chat/completions"


# A chunk with any of these keys (or a delta with any key but these) takes the general translation.
_NOT_PLAIN = frozenset({"usage", "timings", "error", *OLLAMA_KEYS})
_PLAIN_DELTA = frozenset({"content", "role"})


class LeanChatBackend(ChatWire, HostedBackend):
    """``openai`` / ``compat`` Chat Completions with no SDK (see the module doc)."""

    api = "chat.completions"
    raw_stream = True  # chunks are JSON dicts by construction

    def __init__(self, model: str, *, compat: bool = False, **opts: Any) -> None:
        super().__init__(model, compat=compat, **opts)
        # the address without its query (the query goes as parameters), as the SDK path gets it
        base = getattr(self, "_sdk_base_url", self.base_url)
        self._url = chat_url(base)
        self._params_query: dict[str, str] = dict(getattr(self, "_query", None) or {})
        headers = {"Accept": "application/json", "Content-Type": "application/json", "User-Agent": "ttft"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        if not compat:  # the SDK's organization/project headers; never sent to a third-party server
            for env, name in (("OPENAI_ORG_ID", "OpenAI-Organization"), ("OPENAI_PROJECT_ID", "OpenAI-Project")):
                if os.environ.get(env):
                    headers[name] = os.environ[env]
        headers.update(self.headers)
        self._headers = headers
        self._aio: AiohttpClient | ProtoClient | None = None

    async def _warm_up(self) -> None:
        """No SDK models to build: nothing to pay ahead of the first send."""

    async def _open(self, request: ChatRequest, probe: Probe, state: TurnState) -> Any:
        params = self._params(request)
        state.extra["splitter"] = ThinkSplitter() if self.compat else None
        state.extra["complete"] = not request.settings.stream
        if request.settings.stream and not self.stream_options_ok:
            state.notices.append(ev.Notice(ev.now_ns(), STREAM_OPTIONS_NOTICE, STREAM_OPTIONS_NOT_SENT))
        retries = request.settings.max_retries
        try:
            return await self._create(params, probe, retries)
        except BadRequestError as exc:
            if "stream_options" not in params or "stream_options" not in str(exc):
                raise
            # The server does not know stream_options: ask once more without it.
            self.stream_options_ok = False
            del params["stream_options"]
            state.notices.append(ev.Notice(ev.now_ns(), STREAM_OPTIONS_NOTICE, STREAM_OPTIONS_REJECTED))
            return await self._create(params, probe, retries)

    def use_aiohttp(self, transport: str = "aiohttp") -> None:
        """Send through aiohttp (:mod:`backends.transport.aiohttp_client`), or with ``transport="proto"`` through
        the asyncio Protocol + httptools transport (:mod:`backends.transport.protocol`), rather than httpx2:
        the load driver's clients, the cheaper per chunk under many streams. The same stamps,
        events and errors."""
        from backends.transport.http import CONNECT_TIMEOUT_S

        if transport == "proto":
            from backends.transport.protocol import ProtoClient as client_class
        else:
            from backends.transport.aiohttp_client import AiohttpClient as client_class  # type: ignore[assignment]

        self._aio = client_class(
            timeout_s=self.timeout_s,
            connect_timeout_s=min(CONNECT_TIMEOUT_S, self.timeout_s or CONNECT_TIMEOUT_S),
            max_connections=self.http.limits.max_connections,
            tls=needs_ca_bundle(self._url),
        )

    async def _send(self, body: bytes, headers: dict[str, str], probe: Probe) -> Any:
        """One attempt, returned once its headers are in (an ``httpx2.Response`` or its aiohttp twin)."""
        if self._aio is not None:
            return await self._aio.send(self._url, body=body, headers=headers, params=self._params_query, probe=probe)
        client = self.http.client
        req = client.build_request("POST", self._url, content=body, headers=headers, params=self._params_query)
        try:
            return await client.send(req, stream=True)
        except httpx2.RequestError as err:
            err.request = req
            raise

    async def _create(self, params: dict[str, Any], probe: Probe, max_retries: int) -> Any:
        """One call with the SDK's retry loop; each attempt goes through the instrumented hooks."""
        body = json.dumps(params, separators=(",", ":")).encode()
        headers = {**self._headers, **probe.headers} if self._aio is None else self._headers
        for taken in range(max_retries + 1):
            remaining = max_retries - taken
            try:
                response = await self._send(body, headers, probe)
            except httpx2.TimeoutException as err:
                if remaining > 0:
                    await asyncio.sleep(retry_delay_s(taken, None))
                    continue
                raise APITimeoutError(err.request) from err
            except httpx2.RequestError as err:
                if remaining > 0:
                    await asyncio.sleep(retry_delay_s(taken, None))
                    continue
                raise APIConnectionError(request=err.request) from err
            if response.is_success:
                break
            if remaining > 0 and should_retry(response):
                await response.aclose()
                await asyncio.sleep(retry_delay_s(taken, response.headers))
                continue
            try:
                await response.aread()
            finally:
                await response.aclose()
            raise status_error(response)
        if params.get("stream"):
            try:
                check_content_type(response)
            except MalformedStream:
                await response.aclose()
                raise
            return LeanChunks(response)
        try:
            await response.aread()  # through the stamped stream: the body's arrival is the stamp
        except httpx2.TimeoutException as err:
            raise APITimeoutError(response.request) from err
        except httpx2.RequestError as err:
            raise APIConnectionError(request=response.request) from err
        finally:
            await response.aclose()
        return loads(response.content)

    async def aclose(self) -> None:
        if self._aio is not None:
            await self._aio.aclose()
        await super().aclose()

    def _translate(self, item: Any, t: int, state: TurnState) -> Any:
        if state.extra.get("complete"):
            return self._translate_complete_raw(item, t, state)
        # Most chunks of a long answer carry one choice whose delta is text and nothing else to
        # read (no usage, timings, tool call or finish): their events without the general walk
        # (a third of the reader's CPU per chunk). Anything else takes it, shape checks included.
        if type(item) is dict and item.keys().isdisjoint(_NOT_PLAIN):
            choices = item.get("choices")
            if type(choices) is list and len(choices) == 1:
                choice = choices[0]
                if type(choice) is dict and choice.get("finish_reason") is None:
                    delta = choice.get("delta")
                    if type(delta) is dict and delta.keys() <= _PLAIN_DELTA:
                        text = delta.get("content")
                        if type(text) is str and text:
                            splitter = state.extra.get("splitter")
                            if splitter is None:
                                return (ev.TextDelta(t, text),)
                            return [
                                ev.ReasoningDelta(t, piece) if kind == "reasoning" else ev.TextDelta(t, piece)
                                for kind, piece in splitter.feed(text)
                            ]
        return self._translate_raw(item, t, state)
