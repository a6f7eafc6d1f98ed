"""OpenAI Responses without the SDK: the same requests, retries, stamps and events.

The request body, the translation of each event's JSON dict and the end of a turn are
:class:`backends.providers.responses_wire.ResponsesWire`'s, shared with the SDK backend
(:mod:`backends.providers.openai_responses`); the call is :class:`backends.providers.lean.base.LeanHosted`'s.
What it keeps of the OpenAI SDK's behaviour, so a record does not depend on the path:

- the URL ``{base_url}/responses`` (default ``https://api.openai.com/v1``, or ``OPENAI_BASE_URL``),
  the configured headers, ``Authorization: Bearer KEY`` only with a key, and ``OpenAI-Organization``
  / ``OpenAI-Project`` from ``OPENAI_ORG_ID`` / ``OPENAI_PROJECT_ID``, as the SDK sends them;
- the OpenAI SDK's retries (:data:`backends.providers.lean.retry.OPENAI`) and errors;
- the stream read as the SDK reads it (:class:`backends.providers.lean.sse.LeanChunks`): the event's
  ``type`` field, not its ``event:`` line, says what it is; an object with a truthy ``error`` ends
  the turn as the SDK's ``APIError``, an ``error`` event with flat ``code``/``message`` as the
  server's stream error.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ....telemetry import events as ev
from ...base import ChatRequest
from ...transport.http import Probe
from ..hosted import TurnState
from ..responses_wire import ResponsesWire
from .base import LeanHosted, join_url
from .chat import openai_base, openai_headers


def responses_url(base_url: str | None) -> str:
    """``{base_url}/responses``, joined as the SDK joins it."""
    return join_url(openai_base(base_url), "responses")


class LeanResponsesBackend(ResponsesWire, LeanHosted):
    """``openai-responses`` with no SDK (see the module doc)."""

    api = "responses"

    def __init__(self, model: str, **opts: Any) -> None:
        super().__init__(model, **opts)
        self._lean_setup(responses_url(self._sdk_base_url), openai_headers(self.api_key, compat=False))

    async def _open(self, request: ChatRequest, probe: Probe, state: TurnState) -> Any:
        return await self._create(self._params(request), probe, request.settings.max_retries)

    def _translate(self, item: Any, t: int, state: TurnState) -> Iterable[ev.Event]:
        return self._translate_raw(item, t, state)
