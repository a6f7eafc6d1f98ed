"""Anthropic Messages without the SDK: the same requests, retries, stamps and events.

The request body, the translation of each event's JSON dict, the usage and the end of a turn are
:class:`backends.providers.messages_wire.MessagesWire`'s, shared with the SDK backend
(:mod:`backends.providers.anthropic_messages`); the call is :class:`backends.providers.lean.base.LeanHosted`'s.
What it keeps of the Anthropic SDK's behaviour (anthropic 2.15), so a record does not depend on the path:

- the URL ``{base_url}/v1/messages`` (default ``https://api.anthropic.com``, or ``ANTHROPIC_BASE_URL``),
  ``anthropic-version``, ``Authorization: Bearer KEY`` only with a key, the headers of
  ``ANTHROPIC_CUSTOM_HEADERS`` (one ``Name: value`` a line) under the configured ones;
- the Anthropic SDK's retries (:data:`backends.providers.lean.retry.ANTHROPIC`: a server's
  ``retry-after`` is honoured however long) and its status errors (the whole body kept,
  :func:`backends.providers.lean.sdk_errors.anthropic_status_error`);
- the stream read as the SDK reads it (:class:`backends.providers.lean.sse.LeanMessageEvents`): events
  without an ``event:`` line and ``ping`` skipped, ``event: error`` raised as a status error of 200.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import httpx2

from ....telemetry import events as ev
from ...base import ChatRequest
from ...transport.http import Probe
from ..hosted import TurnState
from ..messages_wire import MessagesWire
from .base import LeanHosted, join_url
from .retry import ANTHROPIC
from .sdk_errors import APIStatusError, anthropic_status_error
from .sse import LeanMessageEvents

DEFAULT_BASE_URL = "https://api.anthropic.com"
# What anthropic 2.15 sends (anthropic._constants.ANTHROPIC_API_VERSION); a test checks it against the SDK.
ANTHROPIC_VERSION = "2026-10-21"


def messages_url(base_url: str | None) -> str:
    """``{base_url}/v1/messages``, joined as the SDK joins it."""
    base = base_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL
    return join_url(base, "v1/messages")


def custom_headers(value: str | None) -> dict[str, str]:
    """``ANTHROPIC_CUSTOM_HEADERS`` as the SDK reads it: ``Name: value`` lines, each stripped."""
    out: dict[str, str] = {}
    for line in (value or "").split("\n"):
        name, colon, rest = line.partition(":")
        if colon:
            out[name.strip()] = rest.strip()
    return out


class LeanMessagesBackend(MessagesWire, LeanHosted):
    """``anthropic`` with no SDK (see the module doc)."""

    api = "messages"
    retry_policy = ANTHROPIC
    events = LeanMessageEvents

    def __init__(self, model: str, **opts: Any) -> None:
        super().__init__(model, **opts)
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        headers.update(custom_headers(os.environ.get("ANTHROPIC_CUSTOM_HEADERS")))
        self._lean_setup(messages_url(self._sdk_base_url), headers)

    def _status_error(self, response: httpx2.Response) -> APIStatusError:
        return anthropic_status_error(response)

    async def _open(self, request: ChatRequest, probe: Probe, state: TurnState) -> Any:
        state.extra["usage"] = {}
        return await self._create(self._params(request), probe, request.settings.max_retries)

    def _translate(self, item: Any, t: int, state: TurnState) -> Iterable[ev.Event]:
        return self._translate_raw(item, t, state)
