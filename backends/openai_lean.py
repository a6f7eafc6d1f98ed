"""Chat Completions without the OpenAI SDK: the same requests, retries, stamps and events.

Why: importing ``openai`` costs 0.5-1.2 s of a process start (it builds ~650 pydantic models),
which is most of ``ttft ask``'s own delay on a hosted call, and its typed chunks cost a third
of the client's CPU per chunk under load. This backend sends the request through the same
:class:`backends.http.InstrumentedHTTP` client (so AttemptSent / HeadersReceived and byte
arrival come from the same hooks as on the SDK path), splits SSE ``data:`` events from the
bytes as they arrive, and translates each chunk's JSON dict with the one translation both
paths share (:class:`backends.openai_wire.ChatWire`).

What it keeps of the SDK's behaviour, so a record does not depend on the path:

- the URL ``{base_url}/chat/completions`` (default ``https://api.openai.com/v1``, or
  ``OPENAI_BASE_URL``), the configured headers, ``Authorization: Bearer KEY`` only with a key;
- retries on 408/409/429/5xx (or ``x-should-retry: true``) and on transport errors, up to
  ``settings.max_retries``, sleeping 0.5 s * 2^n (at most 8 s, less 0-25 % jitter), or what
  ``retry-after-ms`` / ``retry-after`` asks when that is 0-120 s; no retry past a longer one;
- its errors: the exception classes below carry the SDK's names, hierarchy and attributes
  (``status_code``, ``body``, ``message``, ``response``), and :mod:`backends.errors` reads them
  as it reads the SDK's, so the Failed event (type, message, hint) is the same;
- a mid-stream ``{"error": ...}`` object, malformed JSON, a dropped connection and a missing
  ``[DONE]`` end the turn as they do through the SDK's stream.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import httpx2
import orjson

from backends.base import ChatRequest
from backends.errors import MalformedStream, check_content_type
from backends.hosted import HostedBackend, TurnState
from backends.http import Probe, needs_ca_bundle, parse_retry_after
from backends.openai_wire import (
    OLLAMA_KEYS,
    STREAM_OPTIONS_NOT_SENT,
    STREAM_OPTIONS_NOTICE,
    STREAM_OPTIONS_REJECTED,
    ChatWire,
)
from backends.think import ThinkSplitter
from telemetry import events as ev

if TYPE_CHECKING:
    from backends.lean_http import AiohttpClient

DEFAULT_BASE_URL = "https://api.openai.com/v1"
INITIAL_RETRY_DELAY_S = 0.5
MAX_RETRY_DELAY_S = 8.0
MAX_RETRY_AFTER_S = 120.0  # a server asking for longer is not retried (as the SDK does)


# --- the SDK's exception names and shape (backends.errors classifies by these names) ----------
class OpenAIError(Exception):
    pass


class APIError(OpenAIError):
    def __init__(self, message: str, request: httpx2.Request | None, *, body: object | None) -> None:
        super().__init__(message)
        self.message = message
        self.request = request
        self.body = body
        inner = body if isinstance(body, dict) else {}
        self.code = inner.get("code")
        self.param = inner.get("param")
        self.type = inner.get("type")


class APIStatusError(APIError):
    def __init__(self, message: str, *, response: httpx2.Response, body: object | None) -> None:
        super().__init__(message, response.request, body=body)
        self.response = response
        self.status_code = response.status_code
        self.request_id = response.headers.get("x-request-id")


class APIConnectionError(APIError):
    def __init__(self, *, message: str = "Connection error.", request: httpx2.Request | None) -> None:
        super().__init__(message, request, body=None)


class APITimeoutError(APIConnectionError):
    def __init__(self, request: httpx2.Request | None) -> None:
        super().__init__(message="Request timed out.", request=request)


class BadRequestError(APIStatusError):
    pass


class AuthenticationError(APIStatusError):
    pass


class PermissionDeniedError(APIStatusError):
    pass


class NotFoundError(APIStatusError):
    pass


class ConflictError(APIStatusError):
    pass


class UnprocessableEntityError(APIStatusError):
    pass


class RateLimitError(APIStatusError):
    pass


class InternalServerError(APIStatusError):
    pass


# HTTP status -> the class the SDK raises for it (>= 500: InternalServerError; others: APIStatusError).
STATUS_ERRORS: dict[int, type[APIStatusError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    422: UnprocessableEntityError,
    429: RateLimitError,
}
RETRY_STATUSES = frozenset({408, 409, 429})  # and every status >= 500


def loads(data: bytes) -> Any:
    """JSON through orjson (a fifth of the stdlib's time per chunk); what orjson refuses and the
    stdlib reads (a lone surrogate escape, NaN, a huge integer) is read as the SDK path reads it,
    and malformed JSON fails with the stdlib's own error, so the record's message is the same."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def status_error(response: httpx2.Response) -> APIStatusError:
    """The SDK's error for a non-2xx response whose body has been read: the provider's message
    in the exception text, the ``error`` object (or the whole body) as ``body``."""
    text = response.text.strip()
    body: object = text
    msg = f"Error code: {response.status_code}"
    try:
        body = json.loads(text)
    except ValueError:
        pass
    else:
        error = body.get("error", body) if isinstance(body, dict) else None
        message = error.get("message") if isinstance(error, dict) else None
        if isinstance(message, str) and message:
            msg += f" - {message}"
    data = body.get("error", body) if isinstance(body, dict) else body
    status = response.status_code
    cls = STATUS_ERRORS.get(status) or (InternalServerError if status >= 500 else APIStatusError)
    return cls(msg, response=response, body=data)


def retry_after_s(headers: httpx2.Headers) -> float | None:
    """``retry-after-ms`` / ``retry-after`` in seconds, read as the SDK reads them (numbers only;
    an HTTP date is read by :func:`backends.http.parse_retry_after` for the record)."""
    for name, divisor in (("retry-after-ms", 1000), ("retry-after", 1)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return float(value) / divisor
        except ValueError:
            continue
    return parse_retry_after(headers)


def should_retry(response: httpx2.Response) -> bool:
    ra = retry_after_s(response.headers)
    if ra is not None and ra > MAX_RETRY_AFTER_S:
        return False
    hint = response.headers.get("x-should-retry")
    if hint in ("true", "false"):
        return hint == "true"
    return response.status_code in RETRY_STATUSES or response.status_code >= 500


def retry_delay_s(retries_taken: int, headers: httpx2.Headers | None) -> float:
    ra = retry_after_s(headers) if headers is not None else None
    if ra is not None and 0 < ra <= MAX_RETRY_AFTER_S:
        return ra
    base = min(INITIAL_RETRY_DELAY_S * 2.0 ** min(retries_taken, 1000), MAX_RETRY_DELAY_S)
    return base * (1 - 0.25 * random.random())


def chat_url(base_url: str | None) -> str:
    """``{base_url}/chat/completions``, joined as the SDK joins it (one slash between)."""
    base = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
    return base.rstrip("/") + "/chat/completions"


# --- SSE on bytes ------------------------------------------------------------------------------
class SSESplitter:
    """Incremental Server-Sent Events: feed raw bytes, get each complete event's ``data``.

    Events end at a blank line (``\\n\\n``, ``\\r\\n\\r\\n`` or ``\\r\\r``); ``:`` lines are comments
    (``: ping``); several ``data:`` lines of one event are joined by ``\\n``. An event with no
    data but another field (``event:``, ``id:``, ``retry:``) gives ``b""``, as the SDK's decoder does.
    """

    __slots__ = ("_buf", "_cr")

    def __init__(self) -> None:
        self._buf = b""
        self._cr = False  # a \r has been seen: the slower, general boundary search from now on

    def feed(self, chunk: bytes) -> list[bytes]:
        buf = self._buf + chunk if self._buf else chunk
        if not self._cr and b"\r" in chunk:
            self._cr = True
        if not self._cr:  # the usual stream: one C-level split, then each event's one data line
            *blocks, self._buf = buf.split(b"\n\n")
            out = []
            for block in blocks:
                if block.startswith(b"data: ") and b"\n" not in block:
                    out.append(block[6:])
                elif (data := self._event(block)) is not None:
                    out.append(data)
            return out
        out = []
        start = 0
        while True:
            end, sep = self._boundary(buf, start)
            if end < 0:
                break
            data = self._event(buf[start:end])
            if data is not None:
                out.append(data)
            start = end + sep
        self._buf = buf[start:]
        return out

    def _boundary(self, buf: bytes, start: int) -> tuple[int, int]:
        if not self._cr:
            return buf.find(b"\n\n", start), 2
        best, size = -1, 0
        for sep in (b"\r\n\r\n", b"\n\n", b"\r\r"):
            i = buf.find(sep, start)
            if i >= 0 and (best < 0 or i < best):
                best, size = i, len(sep)
        return best, size

    @staticmethod
    def _event(block: bytes) -> bytes | None:
        if block.startswith(b"data: ") and b"\n" not in block and b"\r" not in block:
            return block[6:]  # the usual event: one data line
        data: list[bytes] = []
        other = False
        for line in block.splitlines():
            if not line or line.startswith(b":"):
                continue
            name, _, value = line.partition(b":")
            if value.startswith(b" "):
                value = value[1:]
            if name == b"data":
                data.append(value)
            elif name in (b"event", b"id", b"retry"):
                other = True
        if data:
            return b"\n".join(data)
        return b"" if other else None


class LeanChunks:
    """A streamed answer as JSON dicts, read from the (stamped) byte stream as it arrives."""

    def __init__(self, response: httpx2.Response) -> None:
        self.response = response

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        return self._events()

    async def _events(self) -> AsyncIterator[dict[str, Any]]:
        response = self.response
        split = SSESplitter()
        try:
            chunks = response.aiter_bytes()
            async for raw in chunks:
                for data in split.feed(raw):
                    if data.startswith(b"[DONE]"):
                        async for _ in chunks:  # read the rest: the connection stays reusable
                            pass
                        return
                    obj = loads(data)
                    if isinstance(obj, dict) and obj.get("error"):
                        error = obj["error"]
                        message = error.get("message") if isinstance(error, dict) else None
                        if not message or not isinstance(message, str):
                            message = "An error occurred during streaming"
                        raise APIError(message, response.request, body=error)
                    yield obj
        except httpx2.TimeoutException as err:
            raise APITimeoutError(response.request) from err
        except httpx2.RequestError as err:
            raise APIConnectionError(request=response.request) from err

    async def close(self) -> None:
        await self.response.aclose()


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
        self._aio: AiohttpClient | None = None

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

    def use_aiohttp(self) -> None:
        """Send through aiohttp (:mod:`backends.lean_http`) rather than httpx2: the load driver's
        client, the cheaper per chunk under many streams. The same stamps, events and errors."""
        from backends.http import CONNECT_TIMEOUT_S
        from backends.lean_http import AiohttpClient

        self._aio = AiohttpClient(
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
