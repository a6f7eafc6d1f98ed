"""A 200 whose body is the API's error object, not a stream: the server's own message, type and code are
kept in the error record, on every path (each SDK, each lean reader: Chat Completions on each of its
HTTP clients, Responses, Messages), streamed or not.

Before, every path read it as "The stream ended without [DONE]" (or an "ok" turn with no answer,
non-streamed on Responses and the lean reader), and the server's message was lost.
"""

from __future__ import annotations

import pytest
from ttft.backends.providers.answers.error_body import error_answer
from ttft.backends.providers.lean.chat import LeanChatBackend
from ttft.backends.transport.http import BODY_HEAD_MAX, Probe

from tests.fakes import FakeServer, Schedule, fake_server_fixture  # noqa: F401
from tests.support.backend_util import backend_for, one_turn

MESSAGE = "The model `fake-model` does not exist or you do not have access to it."
ANSWERED = f"The server answered with an error instead of an answer (HTTP 200, invalid_request_error: {MESSAGE})."


def _backend(path: str, srv: FakeServer):  # type: ignore[no-untyped-def]
    if path == "lean":
        return LeanChatBackend("fake-model", provider="openai", base_url=srv.openai_base_url, api_key="sk-test")
    if path == "lean-aiohttp":
        b = LeanChatBackend("fake-model", provider="openai", base_url=srv.openai_base_url, api_key="sk-test")
        b.use_aiohttp()
        return b
    if path == "lean-proto":
        b = LeanChatBackend("fake-model", provider="openai", base_url=srv.openai_base_url, api_key="sk-test")
        b.use_aiohttp("proto")
        return b
    return backend_for(path, srv)


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "not-streamed"])
@pytest.mark.parametrize(
    "path",
    [
        "chat",
        "compat",
        "responses",
        "anthropic",
        "lean",
        "lean-aiohttp",
        "lean-proto",
        "lean-responses",
        "lean-messages",
    ],
)
async def test_a_200_error_body_is_the_servers_own_error(fake_server: FakeServer, path: str, stream: bool) -> None:
    fake_server.schedule = Schedule(error_as_200=True, fail_message=MESSAGE, fail_type="invalid_request_error")
    b = _backend(path, fake_server)
    d = await one_turn(b, stream=stream, max_retries=0)
    await b.aclose()
    assert fake_server.requests[-1].status == 200 and fake_server.requests[-1].body["stream"] is stream
    err = d["error"]
    assert d["status"] == "error" and err is not None, d
    assert err["type"] == "api_error" and err["status_code"] == 200
    assert err["message"] == ANSWERED, err["message"]  # one wording of the server's words, whatever the path
    assert "[DONE]" not in err["message"] and "ended" not in err["message"]
    assert err["hint"] and "server's own message" in err["hint"]
    assert d["attempts"] == 1  # a stated error is not retried as a dropped stream


def test_error_answer_reads_each_shape_and_nothing_else() -> None:
    openai = b'{"error": {"message": "bad model", "type": "invalid_request_error", "code": "model_not_found"}}'
    got = error_answer(openai)
    assert got is not None and str(got) == "bad model"
    assert (got.error_type, got.code) == ("invalid_request_error", "model_not_found")
    anthropic = b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"r"}'
    got = error_answer(anthropic)
    assert got is not None and str(got) == "Overloaded" and got.error_type == "overloaded_error" and got.code is None
    vllm = b'{"object": "error", "message": "max_tokens too large", "type": "BadRequestError", "code": 400}'
    got = error_answer(vllm)
    assert got is not None and str(got) == "max_tokens too large" and got.code == "400"
    got = error_answer(b'  {"error": "quota exceeded"}\n')
    assert got is not None and str(got) == "quota exceeded"
    for not_one in (
        b'data: {"error": {"message": "x"}}\n\n',  # an SSE event: the stream's own reader says it
        b'{"id": "c", "choices": []}',
        b'{"error": null}',
        b"[1, 2]",
        b'{"error": {"message": "cut',
        b"",
    ):
        assert error_answer(not_one) is None, not_one


def test_the_probe_keeps_a_bodys_head_only_while_it_may_be_one_json_object() -> None:
    p = Probe()
    p.begin_attempt()
    for piece in (b'  {"error": ', b'{"message": "x"}}'):
        p._chunk(piece)
    assert p.body_head == b'  {"error": {"message": "x"}}'
    p.begin_attempt()  # a new attempt starts a new head
    assert p.body_head == b""
    p._chunk(b'data: {"choices": []}\n\n')
    p._chunk(b'{"a": 1}')
    assert p.body_head == b""  # a stream closed it at its first byte
    p.begin_attempt()
    p._chunk(b"{" + b" " * BODY_HEAD_MAX)
    assert p.body_head == b""  # too long to be an error object: dropped
