"""Hostile JSON from a server (issue 28): an error body or a stream event nested 100,000 deep, or
megabytes long, through the real SDKs and the lean readers against the loopback fake server.

Before, a 200 whose body nested that deep was "a bug in ttft" (``RecursionError``) on every
non-streamed path and an "incomplete stream" on every streamed one; a 4xx lost the server's
message (the SDKs) or was a bug too (the lean readers). Now every path ends the turn with the
kind its status says and the server's own message, read through ``telemetry.json_guard``.
"""

from __future__ import annotations

from typing import Any

import pytest
from ttft.backends.providers.answers.error_body import MESSAGE_MAX
from ttft.backends.providers.lean.chat import LeanChatBackend
from ttft.telemetry.json_guard import MAX_DEPTH

from tests.fakes import FakeServer, Schedule, fake_server_fixture  # noqa: F401
from tests.support.backend_util import backend_for, one_turn

MESSAGE = "quota exceeded for fake-model"
DEEP = "[" * 100_000 + "]" * 100_000
PATHS = ["chat", "responses", "anthropic", "lean-chat", "lean-responses", "lean-messages"]


def _backend(path: str, srv: FakeServer) -> Any:
    if path == "lean-chat":
        return LeanChatBackend("fake-model", provider="openai", base_url=srv.openai_base_url, api_key="sk-test")
    return backend_for(path, srv)


def _body(path: str, detail: str) -> str:
    """The API's error body, with a hostile ``detail`` after the message, as its own server shapes it."""
    if path in ("anthropic", "lean-messages"):
        return f'{{"type":"error","error":{{"type":"rate_limit_error","message":"{MESSAGE}","detail":{detail}}}}}'
    return f'{{"error":{{"message":"{MESSAGE}","type":"rate_limit_error","detail":{detail}}}}}'


HOSTILE = {
    "nested-100000": DEEP,
    "3-MB": '"' + "x" * 3_000_000 + '"',
}


@pytest.mark.parametrize("hostile", list(HOSTILE))
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "not-streamed"])
@pytest.mark.parametrize("status", [200, 429])
@pytest.mark.parametrize("path", PATHS)
async def test_the_servers_message_survives_a_hostile_error_body(
    fake_server: FakeServer, path: str, status: int, stream: bool, hostile: str
) -> None:
    body = _body(path, HOSTILE[hostile])
    fake_server.schedule = Schedule(
        fail_status=None if status == 200 else status, error_as_200=status == 200, fail_body=body
    )
    b = _backend(path, fake_server)
    d = await one_turn(b, stream=stream, max_retries=0)
    await b.aclose()
    err = d["error"]
    assert d["status"] == "error" and err is not None, d
    assert err["type"] == ("api_error" if status == 200 else "rate_limited"), err
    assert err["status_code"] == status
    assert MESSAGE in err["message"], err["message"][:300]
    assert "Recursion" not in err["message"] and "bug" not in (err["hint"] or "")
    assert len(err["message"]) < MESSAGE_MAX  # the hostile part is never copied into the record


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "not-streamed"])
@pytest.mark.parametrize("path", PATHS)
async def test_a_200_of_nothing_but_nesting_is_a_malformed_answer_said_in_words(
    fake_server: FakeServer, path: str, stream: bool
) -> None:
    fake_server.schedule = Schedule(error_as_200=True, fail_body=DEEP)
    b = _backend(path, fake_server)
    d = await one_turn(b, stream=stream, max_retries=0)
    await b.aclose()
    err = d["error"]
    assert err is not None and err["status_code"] in (None, 200), d
    if stream:  # a stream reader finds no event in it: the stream's end is what it can say
        assert err["type"] in ("incomplete_stream", "malformed_stream"), err
    else:
        assert err["type"] == "malformed_stream", err
        assert "nested" in err["message"] and "bug" not in (err["hint"] or ""), err


_CHAT_HI = (
    'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
    '"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}\n\n'
)
_RESPONSES_HI = (
    'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","item_id":"i",'
    '"output_index":0,"content_index":0,"delta":"Hi","sequence_number":1}\n\n'
)
_MESSAGES_HI = (
    'event: message_start\ndata: {"type":"message_start","message":{"id":"m","type":"message","role":"assistant",'
    '"model":"m","content":[],"stop_reason":null,"usage":{"input_tokens":1,"output_tokens":0}}}\n\n'
    'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
    '"content_block":{"type":"text","text":""}}\n\n'
    'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    '"delta":{"type":"text_delta","text":"Hi"}}\n\n'
)
# One text delta ("Hi"), then an event nested 100,000 deep, named as the API names a text delta.
STREAMS = {
    "chat": _CHAT_HI + f"data: {DEEP}\n\n",
    "lean-chat": _CHAT_HI + f"data: {DEEP}\n\n",
    "responses": _RESPONSES_HI + f"event: response.output_text.delta\ndata: {DEEP}\n\n",
    "lean-responses": _RESPONSES_HI + f"event: response.output_text.delta\ndata: {DEEP}\n\n",
    "anthropic": _MESSAGES_HI + f"event: content_block_delta\ndata: {DEEP}\n\n",
    "lean-messages": _MESSAGES_HI + f"event: content_block_delta\ndata: {DEEP}\n\n",
}


@pytest.mark.parametrize("path", PATHS)
async def test_a_stream_event_nested_100000_deep_keeps_the_partial_answer(fake_server: FakeServer, path: str) -> None:
    """A text delta, then an event nested past every parser's limit: the answer so far is kept, and
    the turn ends as a malformed stream, in words; the lean readers refuse it at the guard's depth."""
    fake_server.schedule = Schedule(raw_sse=STREAMS[path])
    b = _backend(path, fake_server)
    d = await one_turn(b, stream=True, max_retries=0)
    await b.aclose()
    err = d["error"]
    assert d["answer"] == "Hi", d
    assert err is not None and err["type"] == "malformed_stream", err
    assert "nested" in err["message"] and "bug" not in (err["hint"] or "")
    if path.startswith("lean"):
        assert f"more than {MAX_DEPTH} levels deep" in err["message"]
