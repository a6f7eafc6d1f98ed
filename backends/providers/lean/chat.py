"""Chat Completions without the OpenAI SDK: the same requests, retries, stamps and events.

Why: importing ``openai`` costs 0.5-1.2 s of a process start (it builds ~650 pydantic models),
which is most of ``ttft ask``'s own delay on a hosted call, and its typed chunks cost a third
of the client's CPU per chunk under load. This backend sends the request through the same
:class:`backends.transport.http.InstrumentedHTTP` client as the SDK path (:mod:`backends.providers.lean.base`:
AttemptSent / HeadersReceived and byte arrival come from the same hooks), splits SSE ``data:`` events from the
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

import os
from typing import Any

from ....telemetry import events as ev
from ...base import ChatRequest
from ...think import ThinkSplitter
from ...transport.http import Probe
from ..chat_wire import (
    OLLAMA_KEYS,
    STREAM_OPTIONS_NOT_SENT,
    STREAM_OPTIONS_NOTICE,
    STREAM_OPTIONS_REJECTED,
    ChatWire,
)
from ..hosted import TurnState
from .base import LeanHosted, join_url
from .sdk_errors import BadRequestError

DEFAULT_BASE_URL = "https://api.openai.com/v1"


def openai_base(base_url: str | None) -> str:
    """The OpenAI SDK's base URL: the given one, else ``OPENAI_BASE_URL``, else the OpenAI API."""
    return base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL


def openai_headers(api_key: str | None, compat: bool) -> dict[str, str]:
    """What the OpenAI SDK sends besides the body: ``Authorization: Bearer KEY`` only with a key, and
    (not to a third-party server) the organization and project from the environment."""
    headers: dict[str, str] = {}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    if not compat:
        for env, name in (("OPENAI_ORG_ID", "OpenAI-Organization"), ("OPENAI_PROJECT_ID", "OpenAI-Project")):
            if os.environ.get(env):
                headers[name] = os.environ[env]
    return headers


def chat_url(base_url: str | None) -> str:
    """``{base_url}/chat/completions``, joined as the SDK joins it (one slash between)."""
    return join_url(openai_base(base_url), "chat/completions")


# A chunk with any of these keys (or a delta with any key but these) takes the general translation.
_NOT_PLAIN = frozenset({"usage", "timings", "metrics", "error", *OLLAMA_KEYS})
_PLAIN_DELTA = frozenset({"content", "role"})


class LeanChatBackend(ChatWire, LeanHosted):
    """``openai`` / ``compat`` Chat Completions with no SDK (see the module doc)."""

    api = "chat.completions"

    def __init__(self, model: str, *, compat: bool = False, **opts: Any) -> None:
        super().__init__(model, compat=compat, **opts)
        # the address without its query (the query goes as parameters), as the SDK path gets it
        self._lean_setup(chat_url(self._sdk_base_url), openai_headers(self.api_key, compat))

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
