"""The proxy on the wire: bytes through unchanged both ways, headers as they came, routes, what passes unrecorded.

The byte checks replay a real answer of the fake server (every format, streamed and not) from a scripted
upstream that sends it in small pieces: the client reads exactly those bytes, directly and through the
proxy, whatever the chunk boundaries, and the call's record is read from them all the same.
"""

from __future__ import annotations

import gzip
import json

import aiohttp
import pytest
from ttft.backends.proxy import routing

from tests.backends.proxy.conftest import Proxied, Scripted
from tests.fakes.server import FakeServer

KEY = "sk-wire-test-abcdefghijklmnopqrstuvwxyz"
FORMATS = {
    "chat.completions": ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}),
    "responses": ("/v1/responses", {"input": "hi"}),
    "messages": ("/v1/messages", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 64}),
}


async def _post(url: str, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    async with (
        aiohttp.ClientSession(auto_decompress=False) as s,
        s.post(url, data=body, headers={"Content-Type": "application/json", **(headers or {})}) as r,
    ):
        return r.status, dict(r.headers), await r.read()


def _pieces(body: bytes, size: int = 97) -> list[bytes]:
    return [body[i : i + size] for i in range(0, len(body), size)]


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("api", list(FORMATS))
async def test_every_format_reaches_the_client_byte_for_byte(
    fake: FakeServer, scripted: Scripted, via_scripted: Proxied, api: str, stream: bool
) -> None:
    path, fields = FORMATS[api]
    body = json.dumps({"model": "fake-model", "stream": stream, **fields}).encode()
    extra = {"stream_options": {"include_usage": True}} if stream and api == "chat.completions" else {}
    body = json.dumps({**json.loads(body), **extra}).encode()
    status, headers, answer = await _post(fake.url + path, body)
    assert status == 200 and answer
    scripted.headers = {"Content-Type": headers["Content-Type"]}
    scripted.pieces = _pieces(answer)
    direct = await _post(scripted.url + path, body)
    through = await _post(via_scripted.server.base_url + path, body, {"x-api-key": KEY})
    assert direct[2] == answer and through[2] == answer  # 0 differing bytes
    assert through[0] == 200
    (call,) = via_scripted.wait_calls(1)
    rec = call.record
    assert rec.status == "ok", rec.error
    assert rec.api == api and rec.tokens.output == 8 and rec.tokens.source == "usage"
    assert rec.metrics.ttft_ms is not None and len(rec.chunks) >= 1
    assert scripted.seen[-1][3] == body  # the upstream got the request's bytes unchanged
    assert scripted.seen[-1][2].get("x-api-key") == KEY


async def test_a_gzip_answer_reaches_the_client_compressed_and_is_still_read(
    fake: FakeServer, scripted: Scripted, via_scripted: Proxied
) -> None:
    path, fields = FORMATS["messages"]
    body = json.dumps({"model": "fake-model", "stream": True, **fields}).encode()
    _, _, answer = await _post(fake.url + path, body)
    packed = gzip.compress(answer)
    scripted.headers = {"Content-Type": "text/event-stream", "Content-Encoding": "gzip"}
    scripted.pieces = _pieces(packed, 50)
    status, headers, got = await _post(via_scripted.server.base_url + path, body, {"Accept-Encoding": "gzip"})
    assert status == 200 and headers.get("Content-Encoding") == "gzip" and got == packed
    assert scripted.seen[-1][2].get("Accept-Encoding") == "gzip"  # the client's, not aiohttp's own
    rec = via_scripted.wait_calls(1)[0].record
    assert rec.status == "ok" and rec.tokens.output == 8 and "proxy" not in rec.notices


async def test_a_gzip_request_goes_upstream_as_sent_and_its_shape_is_still_read(
    scripted: Scripted, via_scripted: Proxied
) -> None:
    """A client that compresses its request: the upstream gets the compressed bytes it was told of (it
    inflates them itself), and the record reads the model from a decoded copy."""
    body = json.dumps({"model": "packed-model", "stream": False, **FORMATS["messages"][1]}).encode()
    packed = gzip.compress(body)
    scripted.headers = {"Content-Type": "application/json"}
    scripted.pieces = [b'{"type": "message", "content": []}']
    status, _, _ = await _post(via_scripted.server.base_url + "/v1/messages", packed, {"Content-Encoding": "gzip"})
    assert status == 200
    _, _, headers, got = scripted.seen[-1]
    assert headers.get("Content-Encoding") == "gzip" and int(headers["Content-Length"]) == len(packed)
    assert got == body  # what the upstream inflated from the bytes it got: the client's, unchanged
    rec = via_scripted.wait_calls(1)[0].record
    assert rec.model == "packed-model" and "proxy" not in rec.notices


async def test_an_encoding_it_cannot_read_passes_and_the_record_says_so(
    scripted: Scripted, via_scripted: Proxied
) -> None:
    scripted.headers = {"Content-Type": "text/event-stream", "Content-Encoding": "x-unknown"}
    scripted.pieces = [b"\x00\x01binary\xff"]
    status, _, got = await _post(via_scripted.server.base_url + "/v1/messages", b'{"model":"m","stream":true}')
    assert status == 200 and got == b"\x00\x01binary\xff"
    rec = via_scripted.wait_calls(1)[0].record
    assert "x-unknown" in rec.notices["proxy"] and rec.model == "m"


async def test_hop_by_hop_headers_stay_and_the_rest_go_as_they_came(scripted: Scripted, via_scripted: Proxied) -> None:
    scripted.headers = {"Content-Type": "application/json", "X-Upstream": "kept"}
    scripted.pieces = [b'{"input_tokens": 42}']
    sent = {
        "Authorization": f"Bearer {KEY}",
        "anthropic-version": "2023-06-01",
        "anthropic-beta": "b1",
        "X-Stainless-Retry-Count": "0",
        "User-Agent": "claude-cli/2.0.14 (external, cli)",
        "Connection": "keep-alive, X-Drop-Me",
        "X-Drop-Me": "1",
        "Proxy-Authorization": "Basic c2VjcmV0",
        "TE": "trailers",
    }
    status, headers, got = await _post(
        via_scripted.server.base_url + "/v1/messages/count_tokens?beta=true", b'{"model":"m"}', sent
    )
    assert status == 200 and got == b'{"input_tokens": 42}' and headers["X-Upstream"] == "kept"
    _, path_qs, up, _ = scripted.seen[-1]
    assert path_qs == "/v1/messages/count_tokens?beta=true"
    for name in ("Authorization", "anthropic-version", "anthropic-beta", "X-Stainless-Retry-Count", "User-Agent"):
        assert up[name] == sent[name]
    assert "X-Drop-Me" not in up and "Proxy-Authorization" not in up and "TE" not in up
    assert up["Host"] == f"127.0.0.1:{scripted.port}"
    (call,) = via_scripted.wait_calls(1)
    assert call.record.extra["model_step"] is False and call.record.extra["count_tokens"] == 42
    assert call.record.client == "claude-cli/2.0.14" and call.record.cost is None
    assert KEY not in json.dumps(call.record.to_dict())


async def test_other_paths_and_methods_pass_with_no_record(scripted: Scripted, via_scripted: Proxied) -> None:
    scripted.headers = {"Content-Type": "application/json"}
    scripted.pieces = [b'{"data": []}']
    base = via_scripted.server.base_url
    async with aiohttp.ClientSession() as s:
        async with s.get(base + "/v1/models?limit=5") as r:
            assert r.status == 200 and await r.read() == b'{"data": []}'
        async with s.head(base + "/") as r:
            assert r.status == 200
    assert [(m, p) for m, p, _, _ in scripted.seen] == [("GET", "/v1/models?limit=5"), ("HEAD", "/")]
    assert via_scripted.calls == []


async def test_a_redirect_is_passed_to_the_client_not_followed(scripted: Scripted, via_scripted: Proxied) -> None:
    scripted.status = 307
    scripted.headers = {"Location": "http://127.0.0.2:9/v1/messages", "Content-Type": "text/plain"}
    scripted.pieces = [b"moved"]
    async with (
        aiohttp.ClientSession() as s,
        s.post(via_scripted.server.base_url + "/v1/messages", data=b"{}", allow_redirects=False) as r,
    ):
        assert r.status == 307 and r.headers["Location"] == "http://127.0.0.2:9/v1/messages"
        assert await r.read() == b"moved"
    assert len(scripted.seen) == 1  # the proxy went nowhere else
    rec = via_scripted.wait_calls(1)[0].record
    assert rec.status == "error" and rec.error is not None and rec.error.status_code == 307


def test_default_routes() -> None:
    none: dict[str, str] = {}
    assert routing.target_url("/v1/messages?beta=true", none, None) == "https://api.anthropic.com/v1/messages?beta=true"
    assert routing.target_url("/v1/messages/count_tokens", none, None).startswith("https://api.anthropic.com/")
    assert routing.target_url("/v1/chat/completions", none, None) == "https://api.openai.com/v1/chat/completions"
    assert routing.target_url("/v1/responses", none, None) == "https://api.openai.com/v1/responses"
    assert routing.target_url("/v1/models", {"X-Api-Key": "k"}, None) == "https://api.anthropic.com/v1/models"
    assert routing.target_url("/v1/models", {"anthropic-version": "1"}, None).startswith("https://api.anthropic.com")
    assert routing.target_url("/v1/models", none, None) == "https://api.openai.com/v1/models"
    assert (
        routing.target_url("/v1/chat/completions", none, "http://h:8000/vllm/")
        == "http://h:8000/vllm/v1/chat/completions"
    )


def test_the_client_name_is_the_user_agents_first_product_neutralised() -> None:
    assert routing.client_name("claude-cli/2.0.14 (external, cli)") == "claude-cli/2.0.14"
    assert routing.client_name("AsyncOpenAI/Python 1.99.0") == "AsyncOpenAI/Python"
    assert routing.client_name("\x1b[31mevil") == ""
    assert routing.client_name(None) == "" and routing.client_name("x" * 500) == "x" * 64


def test_env_points_both_sdks_here() -> None:
    from ttft.backends.proxy.server import ProxyConfig, ProxyServer

    env = ProxyServer(ProxyConfig(port=4321), lambda c: None).env()
    assert env == {"ANTHROPIC_BASE_URL": "http://127.0.0.1:4321", "OPENAI_BASE_URL": "http://127.0.0.1:4321/v1"}
