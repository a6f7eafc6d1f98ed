"""A request body's shape: the model, streaming, one digest per message, the system's, the tool results."""

from __future__ import annotations

import json

from ttft.backends.proxy.request_shape import digest, read_request


def _body(**fields: object) -> bytes:
    return json.dumps(fields).encode()


def test_chat_messages_system_and_tool_results() -> None:
    msgs = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "run it"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "function": {"name": "Bash"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
    ]
    shape = read_request(_body(model="m", stream=True, messages=msgs), "chat.completions")
    assert shape.model == "m" and shape.stream and shape.unread is None
    assert shape.system_digest and len(shape.message_digests) == 3 and shape.tool_results == ("call_1",)
    assert shape.prompt == "run it"
    longer = read_request(_body(model="m", messages=[*msgs, {"role": "user", "content": "next"}]), "chat.completions")
    assert longer.message_digests[:3] == shape.message_digests  # a growing list keeps its prefix's digests
    other = read_request(_body(model="m", messages=[{**msgs[0], "content": "other"}, *msgs[1:]]), "chat.completions")
    assert other.system_digest != shape.system_digest and other.message_digests == shape.message_digests


def test_messages_tool_results_and_system() -> None:
    msgs = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"}, "junk"]},
    ]
    shape = read_request(_body(model="claude", system=[{"type": "text", "text": "sys"}], messages=msgs), "messages")
    assert shape.tool_results == ("toolu_1",) and shape.system_digest == digest(
        "system", [{"type": "text", "text": "sys"}]
    )
    assert len(shape.message_digests) == 3


def test_responses_items_previous_id_and_instructions() -> None:
    items = [
        {"role": "user", "content": "hi"},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "42"},
    ]
    shape = read_request(
        _body(model="gpt", input=items, instructions="sys", previous_response_id="resp_9"), "responses"
    )
    assert shape.tool_results == ("c1",) and shape.previous_response_id == "resp_9" and shape.system_digest
    assert len(shape.message_digests) == 3
    plain = read_request(_body(model="gpt", input="hello"), "responses")
    assert plain.prompt == "hello" and len(plain.message_digests) == 1


def test_hostile_bodies_are_read_as_far_as_they_go() -> None:
    assert read_request(b"", "messages").unread is not None
    assert read_request(b"[" * 100_000, "messages").unread is not None  # too deep: refused by the guard
    assert read_request(b"\xff\xfe", "messages").unread is not None
    assert read_request(b"[1, 2]", "messages").unread == "the request body is not a JSON object"
    odd = read_request(_body(model=5, messages="no", stream="yes"), "chat.completions")
    assert odd.model == "" and not odd.stream and odd.message_digests == ()
    weird = read_request(
        _body(model="m", messages=[{"role": "tool", "tool_call_id": "a\x1b[2Jb" + "x" * 500}]), "chat.completions"
    )
    assert weird.tool_results == ("a[2Jb" + "x" * 122,)  # printable only, bounded


def test_a_cache_breakpoint_moved_between_calls_keeps_each_messages_digest() -> None:
    """Claude Code marks the last message of each request with ``cache_control``, so the same message
    comes once with the mark and once without; a string and its one text block say the same too."""
    system = [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}]
    first = [{"role": "user", "content": [{"type": "text", "text": "go", "cache_control": {"type": "ephemeral"}}]}]
    second = [
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
        {"role": "user", "content": [{"type": "text", "text": "next", "cache_control": {"type": "ephemeral"}}]},
    ]
    a = read_request(_body(model="claude", system=system, messages=first), "messages")
    b = read_request(_body(model="claude", system=[{"type": "text", "text": "sys"}], messages=second), "messages")
    assert b.message_digests[:1] == a.message_digests and b.system_digest == a.system_digest
    assert digest("user", "go") == digest("user", [{"type": "text", "text": "go"}])
    assert digest("user", "go") != digest("user", "stop")
