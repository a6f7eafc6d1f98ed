"""Shared by the backend tests: run one turn through the real loop and return its record."""

from __future__ import annotations

from typing import Any

from ttft.backends.base import Backend, ChatRequest, Message
from ttft.backends.turn import new_recorder, run_turn
from ttft.telemetry.settings import TurnSettings

from tests.support.turns import reads_back


def make_request(prompt: str = "hi", **settings: Any) -> ChatRequest:
    return ChatRequest((Message("user", prompt),), TurnSettings(**settings))


async def one_turn(backend: Backend, **settings: Any) -> dict[str, Any]:
    request = make_request(**settings)
    recorder = new_recorder(backend, request, session_id="test", turn_index=0)
    record = await run_turn(backend, request, recorder)
    return reads_back(record.to_dict())


def backend_for(api: str, srv: Any, **kw: Any) -> Backend:
    """``api``'s backend on the fake server ``srv``: ``chat``/``compat`` (Chat Completions), ``responses``,
    ``messages`` (any other name) through the SDKs; ``lean-responses``, ``lean-messages`` without them."""
    from ttft.backends.providers.anthropic_messages import AnthropicMessagesBackend
    from ttft.backends.providers.openai_chat import OpenAIChatBackend
    from ttft.backends.providers.openai_responses import OpenAIResponsesBackend

    if api == "lean-responses":
        from ttft.backends.providers.lean.responses import LeanResponsesBackend

        return LeanResponsesBackend("fake-model", base_url=srv.openai_base_url, api_key=kw.pop("api_key", "k"), **kw)
    if api == "lean-messages":
        from ttft.backends.providers.lean.messages import LeanMessagesBackend

        return LeanMessagesBackend("fake-model", base_url=srv.url, api_key=kw.pop("api_key", "k"), **kw)
    if api == "chat":
        return OpenAIChatBackend("fake-model", base_url=srv.openai_base_url, api_key=kw.pop("api_key", "sk-test"), **kw)
    if api == "compat":
        return OpenAIChatBackend("fake-model", provider="compat", base_url=srv.openai_base_url, compat=True, **kw)
    if api == "responses":
        return OpenAIResponsesBackend("fake-model", base_url=srv.openai_base_url, api_key=kw.pop("api_key", "k"), **kw)
    return AnthropicMessagesBackend("fake-model", base_url=srv.url, api_key=kw.pop("api_key", "k"), **kw)
