"""The official SDKs through the proxy against the loopback fake: each call answered as directly, and recorded.

Every format, streamed and not: the SDK gets the fake's answer; the call's record has the fake's
schedule (TTFT ~ first_token_ms, TPOT ~ token_ms, the usage's tokens), ``source`` "proxy", the client,
the model, the API; and its shape the request's messages and the answer's tool calls.
"""

from __future__ import annotations

import anthropic
import openai
import pytest
from ttft.backends.proxy.server import ProxyConfig

from tests.backends.proxy.conftest import Proxied, proxy_for
from tests.fakes.schedule import Schedule
from tests.fakes.server import FakeServer

KEY = "sk-proxy-test-0123456789abcdefghij"
MESSAGES = [{"role": "user", "content": "hello"}]


def _check_timing(proxied: Proxied, *, stream: bool, tokens: int = 8) -> None:
    assert len(proxied.wait_calls(1)) == 1
    rec = proxied.calls[0].record
    assert rec.status == "ok", rec.error
    assert rec.source == "proxy"
    assert rec.model == "fake-model"
    m = rec.metrics
    assert m.ttft_ms is not None and 40 <= m.ttft_ms < 40 + 1500  # first_token_ms=40: generous bounds, never tight
    if stream:
        assert m.tpot_ms is not None and 5 <= m.tpot_ms < 500  # token_ms=10
    assert rec.tokens.output == tokens and rec.tokens.input is not None and rec.tokens.source == "usage"
    assert rec.metrics.wait_ms is not None  # the upstream hop's wait split
    assert rec.answer == "" and rec.prompt == ""  # content is not kept by default
    d = rec.to_dict()
    assert d["source"] == "proxy" and KEY not in str(d)


@pytest.mark.parametrize("stream", [True, False])
async def test_chat_completions(proxied: Proxied, stream: bool) -> None:
    client = openai.AsyncOpenAI(base_url=proxied.server.env()["OPENAI_BASE_URL"], api_key=KEY, max_retries=0)
    async with client:
        if stream:
            chunks = await client.chat.completions.create(
                model="fake-model", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
            )
            text = "".join([c.choices[0].delta.content or "" async for c in chunks if c.choices])
        else:
            done = await client.chat.completions.create(model="fake-model", messages=MESSAGES)
            text = done.choices[0].message.content or ""
    assert text.startswith("w00 ")
    _check_timing(proxied, stream=stream)
    rec, shape = proxied.calls[0].record, proxied.calls[0].shape
    assert rec.api == "chat.completions" and rec.client.startswith("AsyncOpenAI/Python")
    assert shape.api == "chat.completions" and len(shape.message_digests) == 1 and shape.status == 200
    assert shape.client == rec.client and shape.retry_count == 0


@pytest.mark.parametrize("stream", [True, False])
async def test_responses(proxied: Proxied, stream: bool) -> None:
    client = openai.AsyncOpenAI(base_url=proxied.server.env()["OPENAI_BASE_URL"], api_key=KEY, max_retries=0)
    async with client:
        if stream:
            events = await client.responses.create(model="fake-model", input="hello", stream=True)
            rid = None
            async for e in events:
                if e.type == "response.completed":
                    rid = e.response.id
        else:
            rid = (await client.responses.create(model="fake-model", input="hello")).id
    _check_timing(proxied, stream=stream)
    shape = proxied.calls[0].shape
    assert proxied.calls[0].record.api == "responses"
    assert shape.response_id == rid and rid


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("beta", [False, True])
async def test_messages(proxied: Proxied, fake: FakeServer, stream: bool, beta: bool) -> None:
    client = anthropic.AsyncAnthropic(base_url=proxied.server.env()["ANTHROPIC_BASE_URL"], api_key=KEY, max_retries=0)
    async with client:
        api = client.beta.messages if beta else client.messages
        kw = {"betas": ["fake-beta-2026"]} if beta else {}
        if stream:
            events = await api.create(  # type: ignore[call-overload]
                model="fake-model", max_tokens=64, messages=MESSAGES, system="be brief", stream=True, **kw
            )
            async for _ in events:
                pass
        else:
            await api.create(model="fake-model", max_tokens=64, messages=MESSAGES, system="be brief", **kw)  # type: ignore[call-overload]
    _check_timing(proxied, stream=stream)
    sent = fake.generation_requests()[-1]
    # the client's key goes upstream as it came (this SDK sends it as a bearer token)
    assert KEY in (sent.headers.get("x-api-key"), sent.headers.get("authorization", "").removeprefix("Bearer "))
    if beta:
        assert sent.headers["anthropic-beta"] == "fake-beta-2026"
    shape = proxied.calls[0].shape
    assert proxied.calls[0].record.api == "messages" and shape.system_digest and len(shape.message_digests) == 1


async def test_tool_calls_and_results_are_in_the_shape(proxied: Proxied, fake: FakeServer) -> None:
    fake.schedule = Schedule(first_token_ms=5, token_ms=1, tool_calls=(("Bash", '{"command": "sleep 1"}'),))
    client = anthropic.AsyncAnthropic(base_url=proxied.server.base_url, api_key=KEY, max_retries=0)
    async with client:
        msg = await client.messages.create(model="fake-model", max_tokens=64, messages=MESSAGES)  # type: ignore[arg-type]
        use = next(b for b in msg.content if b.type == "tool_use")
        follow = [
            *MESSAGES,
            {"role": "assistant", "content": [b.model_dump() for b in msg.content]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "done"}]},
        ]
        await client.messages.create(model="fake-model", max_tokens=64, messages=follow)  # type: ignore[arg-type]
    first, second = proxied.wait_calls(2)
    assert first.shape.tool_calls == ((use.id, "Bash"),)
    assert first.record.tool_calls == ({"name": "Bash", "arguments": ""},)  # names, never arguments, by default
    assert second.shape.tool_results == (use.id,)
    assert second.shape.message_digests[0] == first.shape.message_digests[0] and len(second.shape.message_digests) == 3


async def test_keep_content_keeps_the_text_masked(fake: FakeServer) -> None:
    p = proxy_for(ProxyConfig(port=0, upstream=fake.url, keep_content=True))
    try:
        client = openai.AsyncOpenAI(base_url=p.server.env()["OPENAI_BASE_URL"], api_key=KEY, max_retries=0)
        async with client:
            await client.chat.completions.create(
                model="fake-model", messages=[{"role": "user", "content": f"my key is {KEY}"}]
            )
    finally:
        p.stop()
    rec = p.calls[0].record
    assert rec.answer.startswith("w00 ") and rec.prompt.startswith("my key is ") and KEY not in rec.prompt


async def test_retry_count_and_session_header_are_in_the_shape(proxied: Proxied, fake: FakeServer) -> None:
    fake.schedule = Schedule(first_token_ms=5, token_ms=1, fail_status=529, fail_times=1)
    client = anthropic.AsyncAnthropic(
        base_url=proxied.server.base_url,
        api_key=KEY,
        max_retries=1,
        default_headers={"X-Claude-Code-Session-Id": "sess-1 two"},
    )
    async with client:
        await client.messages.with_raw_response.create(model="fake-model", max_tokens=64, messages=MESSAGES)  # type: ignore[arg-type]
    failed, ok = proxied.wait_calls(2)
    assert failed.record.status == "error" and failed.record.error is not None
    assert failed.record.error.status_code == 529 and failed.shape.status == 529 and failed.shape.retry_count == 0
    assert ok.record.status == "ok" and ok.shape.retry_count == 1
    assert ok.shape.session_hint == "sess-1two"  # printable, no spaces: nothing of a header reaches a terminal raw
