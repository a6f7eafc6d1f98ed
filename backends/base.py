"""The one interface every backend implements.

A request goes in; an async stream of :mod:`telemetry.events` comes out, each
stamped where the bytes arrived. Closing the stream early (``aclose()`` or task
cancellation) must close the HTTP stream / stop the engine at once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from ..telemetry import json_guard
from ..telemetry.events import Event
from ..telemetry.settings import TurnSettings

if TYPE_CHECKING:  # a request without files never loads the module that reads them
    from .attachments import Attachment

Role = Literal["system", "user", "assistant", "tool"]
# A call's arguments past this are refused before any parser reads them: real calls are a few KB, and a
# tool that takes more (a file's text) still fits; the depth limit is json_guard's (128 levels).
MAX_TOOL_ARGUMENT_BYTES = 4 * 1024 * 1024


class ArgumentsRefused(json_guard.JsonRefused):
    """A call's arguments that no tool may get: too large, too deep, not JSON, or not an object."""


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool offered to the model: its name, what it does, its arguments' JSON Schema, and the MCP server
    that holds it (its configured name, or the spec shown masked; "" for a tool of no server)."""

    name: str
    description: str = ""
    input_schema: dict[str, Any] = field(default_factory=dict)
    server: str = ""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A call the model made: the API's id for it (its result goes back under it), the tool's name,
    and its arguments as the model streamed them (JSON text, possibly malformed)."""

    call_id: str
    name: str
    arguments: str = ""

    def arguments_object(self) -> dict[str, Any]:
        """The arguments read as the JSON object a tool takes (empty text: ``{}``), through the
        untrusted-JSON guard: the model's text is outside input, and a document nested thousands deep
        would make a plain parser, or any code that walks what it returns, raise ``RecursionError``.
        Anything else raises :class:`ArgumentsRefused`, whose message says why in words."""
        if not self.arguments.strip():
            return {}
        what = f"the arguments of {self.name}"
        try:
            value = json_guard.loads(self.arguments, what, max_bytes=MAX_TOOL_ARGUMENT_BYTES)
        except json_guard.JsonRefused as exc:
            raise ArgumentsRefused(str(exc), reason=exc.reason, what=what) from None
        if not isinstance(value, dict):
            raise ArgumentsRefused(f"{what}: not a JSON object", reason="not_json", what=what)
        return value


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    content: str
    # Files sent with a user message (backends.attachments), each as its API's own part
    # (backends.providers.parts); ``content`` stays the typed text alone.
    attachments: tuple[Attachment, ...] = ()
    # The agent loop's messages (backends.agent.loop): an assistant's calls, and a "tool" message that
    # answers one of them (``tool_call_id``), ``is_error`` when the tool failed or was not allowed.
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str = ""
    is_error: bool = False

    def text(self) -> str:
        """The content with the text attachments inlined before it (images left out): what a text-only
        consumer (the local engine) sends, and a message's content on any API when it has no image."""
        blocks = [a.fenced() for a in self.attachments if not a.is_image]
        if not blocks:
            return self.content
        return "\n\n".join([*blocks, self.content] if self.content else blocks)


@dataclass(frozen=True, slots=True)
class ChatRequest:
    messages: tuple[Message, ...]
    settings: TurnSettings = field(default_factory=TurnSettings)
    tools: tuple[ToolSpec, ...] = ()  # offered to the model in each API's own form (backends.providers.tools_wire)

    @property
    def attachments(self) -> tuple[Attachment, ...]:
        """The last user message's attachments: this turn's files (earlier ones are history)."""
        for m in reversed(self.messages):
            if m.role == "user":
                return m.attachments
        return ()

    @property
    def prompt(self) -> str:
        """The last user message: what the log records as the turn's prompt."""
        for m in reversed(self.messages):
            if m.role == "user":
                return m.content
        return ""


def build_request(
    prompt: str,
    *,
    system: str | None = None,
    history: Sequence[Message] = (),
    settings: TurnSettings | None = None,
    attachments: Sequence[Attachment] = (),
) -> ChatRequest:
    """The one way a turn's request is put together: the system prompt (when there is one), the
    conversation so far, then the new user prompt with its attachments. The chat, ``ask`` and
    compare all call this."""
    head = (Message("system", system),) if system else ()
    user = Message("user", prompt, tuple(attachments))
    return ChatRequest((*head, *history, user), settings or TurnSettings())


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
