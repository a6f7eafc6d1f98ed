"""Tools on the wire: the tools offered, the model's calls and their results, in each API's own form.

One function per API and direction, used by both readers of that API (the SDK backend and the lean
one), so an agent turn's request does not depend on which reader sends it:

- Chat Completions: ``tools: [{"type": "function", "function": {name, description, parameters}}]``;
  the assistant's calls as ``tool_calls`` on its message, each result a ``{"role": "tool",
  "tool_call_id"}`` message after it;
- Responses: ``tools: [{"type": "function", name, description, parameters}]``; each call a
  ``function_call`` input item, each result a ``function_call_output`` item under the same ``call_id``;
- Anthropic Messages: ``tools: [{name, description, input_schema}]``; the calls as ``tool_use`` blocks
  of the assistant's message, the results as ``tool_result`` blocks (``is_error`` kept) of the user
  message after it (results in a row go in one message, as the API asks).

Chat Completions and Responses have no error flag on a result: a failed call's text goes back marked
``Error:`` so the model reads it as one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..base import ArgumentsRefused, Message, ToolCall, ToolSpec
from .parts import chat_content, messages_content, responses_content

MAX_ID_CHARS = 256


def text_id(value: Any) -> str:
    """A tool call's id as the API sent it, or "" for one that is no string (it is echoed back to the
    server, so it is never anything but bounded text)."""
    return value[:MAX_ID_CHARS] if isinstance(value, str) else ""


def _result_text(m: Message) -> str:
    return f"Error: {m.content}" if m.is_error else m.content


def _schema(t: ToolSpec) -> dict[str, Any]:
    return t.input_schema or {"type": "object", "properties": {}}


# --- Chat Completions --------------------------------------------------------------------------------
def chat_tools(tools: Iterable[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": _schema(t)}}
        for t in tools
    ]


def chat_messages(messages: Iterable[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool":
            out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": _result_text(m)})
        elif m.tool_calls:
            out.append(
                {
                    "role": "assistant",
                    "content": m.content or None,
                    "tool_calls": [
                        {"id": c.call_id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                        for c in m.tool_calls
                    ],
                }
            )
        else:
            out.append({"role": m.role, "content": chat_content(m)})
    return out


# --- Responses ---------------------------------------------------------------------------------------
def responses_tools(tools: Iterable[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {"type": "function", "name": t.name, "description": t.description, "parameters": _schema(t), "strict": False}
        for t in tools
    ]


def responses_input(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """The ``input`` items (the system prompt goes as ``instructions``)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            continue
        if m.role == "tool":
            out.append({"type": "function_call_output", "call_id": m.tool_call_id, "output": _result_text(m)})
            continue
        if m.content or not m.tool_calls:
            out.append({"role": m.role, "content": responses_content(m)})
        out.extend(
            {"type": "function_call", "call_id": c.call_id, "name": c.name, "arguments": c.arguments}
            for c in m.tool_calls
        )
    return out


# --- Anthropic Messages ------------------------------------------------------------------------------
def messages_tools(tools: Iterable[ToolSpec]) -> list[dict[str, Any]]:
    return [{"name": t.name, "description": t.description, "input_schema": _schema(t)} for t in tools]


def _input(call: ToolCall) -> dict[str, Any]:
    """A call's arguments as the object ``tool_use.input`` must be: an unreadable or refused text (too
    deep or too large for the guard) echoes as {}; its tool result already told the model why."""
    try:
        return call.arguments_object()
    except ArgumentsRefused:
        return {}


def _results_only(message: dict[str, Any] | None) -> bool:
    """Whether this is a user message of tool results alone (the next result joins it)."""
    if message is None or message["role"] != "user" or not isinstance(message["content"], list):
        return False
    return all(b.get("type") == "tool_result" for b in message["content"])


def messages_messages(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """The ``messages`` (the system prompt goes as ``system``)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            continue
        if m.role == "tool":
            block = {"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.content, "is_error": m.is_error}
            last = out[-1] if out else None
            if _results_only(last):
                assert last is not None
                last["content"].append(block)
                continue
            out.append({"role": "user", "content": [block]})
        elif m.tool_calls:
            blocks: list[dict[str, Any]] = [{"type": "text", "text": m.content}] if m.content else []
            blocks += [{"type": "tool_use", "id": c.call_id, "name": c.name, "input": _input(c)} for c in m.tool_calls]
            out.append({"role": "assistant", "content": blocks})
        else:
            out.append({"role": m.role, "content": messages_content(m)})
    return out
