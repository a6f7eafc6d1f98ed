"""Measured latencies match the fake server's schedule, for every API, with the real SDKs."""

from __future__ import annotations

import pytest

from tests.fakes import FakeServer, Schedule, fake_server_fixture  # noqa: F401
from tests.support.backend_util import backend_for, one_turn

APIS = ["chat", "compat", "responses", "anthropic"]


@pytest.fixture(autouse=True)
def _data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path))


@pytest.mark.parametrize("api", APIS)
async def test_ttft_ttfvt_tpot_reasoning_delay(fake_server: FakeServer, api: str) -> None:
    s = Schedule(first_token_ms=150, token_ms=20, reasoning_tokens=5, visible_tokens=10)
    fake_server.schedule = s
    b = backend_for(api, fake_server)
    try:
        d = await one_turn(b, thinking_budget=2048)
    finally:
        await b.aclose()
    m = d["metrics"]
    assert d["status"] == "ok", d["error"]
    # Truth: first token at 150 ms, visible at 250 ms (5 reasoning tokens of 20 ms), TPOT 20 ms. Wide
    # bounds, for loaded 2-core CI: a client that stamps its send late shortens every wait, a late read
    # lengthens it, and the server's absolute schedule lets a late token's successors catch up.
    assert 120 <= m["ttft_ms"] <= 150 + 300, (d["attempt_log"], d["events_ms"])
    assert s.expected_ttfvt_ms() - 30 <= m["ttfvt_ms"] <= s.expected_ttfvt_ms() + 300
    assert 50 <= m["reasoning_delay_ms"] <= 100 + 200
    assert 10 <= m["tpot_ms"] <= 60
    assert d["tokens"] == {
        "input": 12,
        "cached_input": 0,
        "output": 15,
        "reasoning": 5,
        "source": "usage",
        "cache_write_input": 0 if api == "anthropic" else None,  # only Anthropic says what it wrote to its cache
    }
    assert d["answer"] == s.visible_text() and d["reasoning"] == s.reasoning_text()
    assert d["attempts"] == 1 and d["attempt_log"][0]["status"] == 200


@pytest.mark.parametrize("mode", ["reasoning_content", "reasoning", "think"])
async def test_compat_reasoning_shapes(fake_server: FakeServer, mode: str) -> None:
    s = Schedule(
        first_token_ms=60,
        token_ms=10,
        reasoning_tokens=4,
        visible_tokens=4,
        reasoning=mode,
        think_tag_split=True,
        tokens_per_chunk=2,
    )
    fake_server.schedule = s
    b = backend_for("compat", fake_server)
    d = await one_turn(b)
    await b.aclose()
    assert d["reasoning"].strip() == s.reasoning_text().strip()
    assert d["answer"] == s.visible_text()
    assert "<think>" not in d["answer"] + d["reasoning"] and "thi" not in d["answer"]
    assert d["metrics"]["ttfvt_ms"] >= s.expected_ttfvt_ms() - 5


async def test_anthropic_omitted_thinking_is_not_a_token(fake_server: FakeServer) -> None:
    s = Schedule(first_token_ms=50, token_ms=20, reasoning_tokens=5, visible_tokens=6)
    fake_server.schedule = s
    b = backend_for("anthropic", fake_server)
    d = await one_turn(b, thinking_budget=2048, thinking_display="omitted")
    await b.aclose()
    body = fake_server.requests[-1].body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048, "display": "omitted"}
    assert d["reasoning"] == "" and all(c["kind"] == "text" for c in d["chunks"])
    # The first token is the first visible one: the signature-only block was not counted.
    assert d["metrics"]["ttft_ms"] >= s.expected_ttfvt_ms() - 5
    assert d["tokens"]["reasoning"] == 5 and d["metrics"]["reasoning_delay_estimated"] is True


async def test_anthropic_redacted_thinking_and_effort(fake_server: FakeServer) -> None:
    fake_server.schedule = Schedule(reasoning_tokens=3, visible_tokens=3, reasoning="redacted")
    b = backend_for("anthropic", fake_server)
    d = await one_turn(b, reasoning_effort="low", extra={"thinking": "adaptive"})
    await b.aclose()
    body = fake_server.requests[-1].body
    assert body["thinking"] == {"type": "adaptive"} and body["output_config"] == {"effort": "low"}
    assert d["status"] == "ok" and d["reasoning"] == "" and d["tokens"]["reasoning"] == 3


async def test_chat_request_fields(fake_server: FakeServer) -> None:
    b = backend_for("chat", fake_server)
    d = await one_turn(b, reasoning_effort="high", max_output_tokens=77, temperature=0.5)
    await b.aclose()
    body = fake_server.requests[-1].body
    assert body["stream_options"] == {"include_usage": True}
    assert body["reasoning_effort"] == "high" and body["max_completion_tokens"] == 77 and body["temperature"] == 0.5
    assert "max_tokens" not in body and d["status"] == "ok"
    assert "x-ttft-probe" not in fake_server.requests[-1].headers


async def test_responses_request_fields(fake_server: FakeServer) -> None:
    fake_server.schedule = Schedule(reasoning_tokens=2, visible_tokens=2)
    b = backend_for("responses", fake_server)
    d = await one_turn(b, reasoning_effort="low", reasoning_summary="detailed", max_output_tokens=300)
    await b.aclose()
    body = fake_server.requests[-1].body
    assert body["reasoning"] == {"effort": "low", "summary": "detailed"} and body["max_output_tokens"] == 300
    assert d["reasoning"] == "r00 r01 " and d["stop_reason"] == "completed"


@pytest.mark.parametrize("api", APIS)
async def test_non_streaming_ttft_equals_e2e(fake_server: FakeServer, api: str) -> None:
    s = Schedule(first_token_ms=80, token_ms=10, reasoning_tokens=2, visible_tokens=5, cached_tokens=3)
    fake_server.schedule = s
    b = backend_for(api, fake_server)
    d = await one_turn(b, stream=False, reasoning_summary="auto", thinking_budget=1024)
    await b.aclose()
    m = d["metrics"]
    assert fake_server.requests[-1].body["stream"] is False
    assert d["settings"]["stream"] is False and d["status"] == "ok", d["error"]
    assert abs(m["ttft_ms"] - m["e2e_ms"]) <= 1.0 and m["ttft_ms"] >= s.end_ms() - 5
    assert m["ttft_ms"] <= s.end_ms() + 500  # generous: the body is sent once the last token is due
    assert d["answer"] == s.visible_text()
    assert d["reasoning"] == s.reasoning_text()
    # Every count from the server's usage, the visible/reasoning split too.
    assert d["tokens"] == {
        "input": 12 + (3 if api == "anthropic" else 0),
        "cached_input": 3,
        "output": 7,
        "reasoning": 2,
        "source": "usage",
        "cache_write_input": 0 if api == "anthropic" else None,
    }
    assert sum(c["tokens"] for c in d["chunks"] if c["kind"] == "text") == 5
    assert d["attempts"] == 1 and d["attempt_log"][0]["status"] == 200


@pytest.mark.parametrize("api", ["responses", "anthropic"])
async def test_non_streaming_hidden_reasoning(fake_server: FakeServer, api: str) -> None:
    s = Schedule(first_token_ms=30, token_ms=5, reasoning_tokens=4, visible_tokens=3, reasoning="hidden")
    fake_server.schedule = s
    b = backend_for(api, fake_server)
    d = await one_turn(b, stream=False, thinking_budget=1024)
    await b.aclose()
    assert d["status"] == "ok" and d["reasoning"] == "" and d["answer"] == s.visible_text()
    assert d["tokens"]["reasoning"] == 4 and d["tokens"]["output"] == 7
    assert all(c["kind"] == "text" for c in d["chunks"])


async def test_server_timings_and_estimated_counts(fake_server: FakeServer) -> None:
    fake_server.schedule = Schedule(timings="llama", reject_stream_options=True, visible_tokens=6)
    b = backend_for("compat", fake_server)
    d = await one_turn(b)
    d2 = await one_turn(b)
    await b.aclose()
    assert d["status"] == "ok" and d["attempts"] == 2  # the rejected try is an attempt, not hidden
    assert [a["status"] for a in d["attempt_log"]] == [400, 200]
    assert "stream_options" not in fake_server.requests[-1].body
    assert d["tokens"]["source"] == "estimated" and d["tokens"]["output"] == 6
    assert d["server"]["llama-server"]["predicted_n"] == 6
    assert d["notices"]["stream_options"].startswith("rejected: the server answered HTTP 400")
    assert d2["attempts"] == 1  # learned: not asked again
    assert d2["notices"]["stream_options"].startswith("not sent:") and d2["tokens"]["source"] == "estimated"
    fake_server.schedule = Schedule(timings="ollama")
    b = backend_for("compat", fake_server)
    d = await one_turn(b)
    await b.aclose()
    assert d["server"]["ollama"]["eval_count"] == 8
    assert d["notices"] == {} and d["tokens"]["source"] == "usage"  # nothing dropped, nothing to explain


async def test_stream_options_notice_kept_when_the_retry_fails(fake_server: FakeServer) -> None:
    fake_server.schedule = Schedule(reject_stream_options=True)
    b = backend_for("compat", fake_server)
    d = await one_turn(b, stream=False)  # non-streamed: no stream_options asked, nothing to explain
    assert d["status"] == "ok" and d["notices"] == {} and d["attempts"] == 1
    await b.aclose()
    fake_server.schedule = Schedule(reject_stream_options=True, fail_status=503, fail_message="busy")
    b = backend_for("compat", fake_server)
    d = await one_turn(b, max_retries=0)
    await b.aclose()
    assert d["status"] == "error" and d["error"]["status_code"] == 503
    assert [a["status"] for a in d["attempt_log"]] == [400, 503]
    assert d["notices"]["stream_options"].startswith("rejected:")
