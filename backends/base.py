"""The one interface every backend implements.

A request goes in; an async stream of :mod:`telemetry.events` comes out, each
stamped where the bytes arrived. Closing the stream early (``aclose()`` or task
cancellation) must close the HTTP stream / stop the engine at once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from telemetry.events import Event
from telemetry.settings import TurnSettings

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    content: str


@dataclass(frozen=True, slots=True)
class ChatRequest:
    messages: tuple[Message, ...]
    settings: TurnSettings = field(default_factory=TurnSettings)

    @property
    def prompt(self) -> str:
        """The last user message: what the log records as the turn's prompt."""
        for m in reversed(self.messages):
            if m.role == "user":
                return m.content
        return ""


def build_request(
    prompt: str, *, system: str | None = None, history: Sequence[Message] = (), settings: TurnSettings | None = None
) -> ChatRequest:
    """The one way a turn's request is put together: the system prompt (when there is one), the
    conversation so far, then the new user prompt. The chat, ``ask`` and compare all call this."""
    head = (Message("system", system),) if system else ()
    return ChatRequest((*head, *history, Message("user", prompt)), settings or TurnSettings())


class Backend(Protocol):
    provider: str  # "openai", "anthropic", "local", or a configured provider's name
    api: str  # "chat.completions", "responses", "messages", "llama.cpp"
    model: str
    base_url: str | None

    def stream(self, request: ChatRequest) -> AsyncIterator[Event]:
        """Yield the turn's events; the last one is Finished, Failed or Cancelled."""
        ...

    async def aclose(self) -> None:
        """Release connections / the model."""
        ...
