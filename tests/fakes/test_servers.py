"""The fake servers speak the wire formats the real SDKs expect, and inject failures on demand."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.request

import anthropic
import httpx2
import openai
import pytest

from tests.fakes import FakeServer, Schedule, fake_server_fixture  # noqa: F401
from tests.support.paths import ROOT

MSG = [{"role": "user", "content": "hi"}]


def test_chat_stream_usage_and_reasoning(fake_server: FakeServer) -> None:
    fake_server.schedule = Schedule(reasoning_tokens=2, visible_tokens=3, reasoning="reasoning")
    c = openai.OpenAI(base_url=fake_server.openai_base_url, api_key="sk-test", max_retries=0)
    chunks = list(
        c.chat.completions.create(model="m", messages=MSG, stream=True, stream_options={"include_usage": True})
    )
    reasoning = "".join((ch.choices[0].delta.model_extra or {}).get("reasoning") or "" for ch in chunks if ch.choices)
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert reasoning == "r00 r01 " and text == "w00 w01 w02 "
    assert chunks[-1].usage.completion_tokens == 5
    assert chunks[-1].usage.completion_tokens_details.reasoning_tokens == 2
    req = fake_server.requests[-1]
    assert req.body["stream_options"] == {"include_usage": True}
    # The client can read the last byte before the server's handler marks the request done.
    assert fake_server.wait_for(lambda r: r is req and r.completed) is req
    assert req.headers["authorization"] == "Bearer sk-test"


def test_think_tags_split_across_chunks(fake_server: FakeServer) -> None:
    fake_server.schedule = Schedule(reasoning_tokens=2, visible_tokens=2, reasoning="think", think_tag_split=True)
    c = openai.OpenAI(base_url=fake_server.openai_base_url, api_key="x")
    content = [ch.choices[0].delta.content for ch in c.chat.completions.create(model="m", messages=MSG, stream=True)]
    assert "".join(x or "" for x in content) == "<think>r00 r01 </think>w00 w01 "
    assert "r01 </thi" in content


def test_http_error_then_retry(fake_server: FakeServer) -> None:
    fake_server.schedule = Schedule(fail_status=429, fail_times=1, retry_after=0)
    c = openai.OpenAI(base_url=fake_server.openai_base_url, api_key="x", max_retries=2)
    r = c.chat.completions.create(model="m", messages=MSG)
    assert r.choices[0].message.content == Schedule().visible_text()
    assert [q.status for q in fake_server.requests] == [429, 200]
    fake_server.schedule = Schedule(fail_status=401, fail_message="bad key")
    with pytest.raises(openai.AuthenticationError, match="bad key"):
        c.chat.completions.create(model="m", messages=MSG)


def test_reject_stream_options(fake_server: FakeServer) -> None:
    fake_server.schedule = Schedule(reject_stream_options=True)
    c = openai.OpenAI(base_url=fake_server.openai_base_url, api_key="x", max_retries=0)
    with pytest.raises(openai.BadRequestError, match="stream_options"):
        c.chat.completions.create(model="m", messages=MSG, stream=True, stream_options={"include_usage": True})


def test_drop_and_disconnect_detected(fake_server: FakeServer) -> None:
    fake_server.schedule = Schedule(drop_after=2)
    c = openai.OpenAI(base_url=fake_server.openai_base_url, api_key="x", max_retries=0)
    with pytest.raises((httpx2.RemoteProtocolError, openai.APIError)):
        list(c.chat.completions.create(model="m", messages=MSG, stream=True))
    fake_server.schedule = Schedule(visible_tokens=500, token_ms=10)
    s = c.chat.completions.create(model="m", messages=MSG, stream=True)
    next(iter(s))
    s.close()
    assert fake_server.wait_for(lambda r: r.disconnected, timeout=3) is not None


def test_responses_and_anthropic_shapes(fake_server: FakeServer) -> None:
    fake_server.schedule = Schedule(reasoning_tokens=2, visible_tokens=2)
    c = openai.OpenAI(base_url=fake_server.openai_base_url, api_key="x")
    with c.responses.stream(model="m", input="hi", reasoning={"summary": "auto"}) as s:
        types = [e.type for e in s]
        final = s.get_final_response()
    assert types.count("response.reasoning_summary_text.delta") == 2 and types[-1] == "response.completed"
    assert final.usage.output_tokens_details.reasoning_tokens == 2
    a = anthropic.Anthropic(base_url=fake_server.url, api_key="k")
    thinking = {"type": "enabled", "budget_tokens": 1024, "display": "omitted"}
    with a.messages.stream(model="m", max_tokens=2048, messages=MSG, thinking=thinking) as s:  # type: ignore[arg-type]
        kinds = [e.delta.type for e in s if e.type == "content_block_delta"]
        msg = s.get_final_message()
    assert kinds == ["signature_delta", "text_delta", "text_delta"]
    assert msg.usage.output_tokens == 4 and msg.usage.output_tokens_details.thinking_tokens == 2
    fake_server.schedule = Schedule(error_after=1)
    with (
        pytest.raises(anthropic.APIStatusError, match="error while processing"),
        a.messages.stream(model="m", max_tokens=10, messages=MSG) as s,
    ):
        list(s)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_python_m_tests_fakes_runs_one_by_hand_on_a_chosen_port() -> None:
    # `python -m tests.fakes --port N`, as the fakes' docstring says
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes", "--port", str(port), "--first-token-ms", "5"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert f"http://127.0.0.1:{port}/v1" in line, (line, proc.stderr.read() if proc.poll() is not None else "")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=10) as resp:
            assert json.loads(resp.read())["data"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
