"""Tools on the wire, unit by unit: each API's messages for calls and results, and untrusted ids and arguments."""

from __future__ import annotations

from ttft.backends.base import Message, ToolCall, ToolSpec
from ttft.backends.providers.tools_wire import (
    MAX_ID_CHARS,
    chat_messages,
    chat_tools,
    messages_messages,
    messages_tools,
    responses_input,
    responses_tools,
    text_id,
)

CALLS = (ToolCall("c1", "search", '{"q": "x"}'), ToolCall("c2", "clock", "not json"))
CONVERSATION = (
    Message("system", "be brief"),
    Message("user", "hi"),
    Message("assistant", "let me look", tool_calls=CALLS),
    Message("tool", "found", tool_call_id="c1"),
    Message("tool", "no clock", tool_call_id="c2", is_error=True),
)


def test_an_id_is_echoed_only_as_bounded_text() -> None:
    assert text_id("call_1") == "call_1" and text_id(7) == "" and text_id(None) == ""
    assert len(text_id("x" * 10_000)) == MAX_ID_CHARS


def test_a_tool_without_a_schema_is_offered_as_taking_an_empty_object() -> None:
    t = ToolSpec("now")
    empty = {"type": "object", "properties": {}}
    assert chat_tools([t])[0]["function"]["parameters"] == empty
    assert responses_tools([t])[0]["parameters"] == empty and messages_tools([t])[0]["input_schema"] == empty


def test_chat_results_follow_the_assistant_message_that_called() -> None:
    msgs = chat_messages(CONVERSATION)
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool", "tool"]
    assert msgs[2]["content"] == "let me look" and [c["id"] for c in msgs[2]["tool_calls"]] == ["c1", "c2"]
    assert msgs[4] == {"role": "tool", "tool_call_id": "c2", "content": "Error: no clock"}


def test_responses_calls_and_outputs_are_items_under_one_call_id() -> None:
    items = responses_input(CONVERSATION)
    assert [i.get("type", i.get("role")) for i in items] == [
        "user",
        "assistant",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
    ]
    assert items[3] == {"type": "function_call", "call_id": "c2", "name": "clock", "arguments": "not json"}
    assert items[5] == {"type": "function_call_output", "call_id": "c2", "output": "Error: no clock"}


def test_anthropic_results_of_one_step_go_in_one_user_message() -> None:
    msgs = messages_messages(CONVERSATION)
    assert [m["role"] for m in msgs] == ["user", "assistant", "user"]
    text, use1, use2 = msgs[1]["content"]
    assert text == {"type": "text", "text": "let me look"}
    assert use1["input"] == {"q": "x"} and use2["input"] == {}  # unreadable arguments echo as {}
    assert [b["is_error"] for b in msgs[2]["content"]] == [False, True]
    assert msgs[2]["content"][1] == {
        "type": "tool_result",
        "tool_use_id": "c2",
        "content": "no clock",
        "is_error": True,
    }
