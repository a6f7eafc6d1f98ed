"""Measured latencies match the fake server's schedule, for every API, with the real SDKs."""

from __future__ import annotations

import pytest

from tests.backend_util import backend_for, one_turn
from tests.fakes import FakeServer, Schedule, fake_server_fixture  # noqa: F401

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
    assert 145 <= m["ttft_ms"] <= 150 + 80, (d["attempt_log"], d["events_ms"])
    assert s.expected_ttfvt_ms() - 5 <= m["ttfvt_ms"] <= s.expected_ttfvt_ms() + 80
    assert 100 - 10 <= m["reasoning_delay_ms"] <= 100 + 40
    assert 15 <= m["tpot_ms"] <= 28
    assert d["tokens"] == {"input": 12, "cached_input": 0, "output": 15, "reasoning": 5, "source": "usage"}
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
    assert d["reasoning"] == "" and all(kind == "text" for _, kind, _ in d["chunks"])
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


@pytest.mark.parametrize("api", ["chat", "compat"])
async def test_non_streaming_ttft_equals_e2e(fake_server: FakeServer, api: str) -> None:
    s = Schedule(first_token_ms=80, token_ms=10, reasoning_tokens=2, visible_tokens=5)
    fake_server.schedule = s
    b = backend_for(api, fake_server)
    d = await one_turn(b, stream=False)
    await b.aclose()
    m = d["metrics"]
    assert fake_server.requests[-1].body["stream"] is False
    assert d["settings"]["stream"] is False and d["status"] == "ok"
    assert m["ttft_ms"] == pytest.approx(m["e2e_ms"]) and m["ttft_ms"] >= s.end_ms() - 5
    assert d["answer"] == s.visible_text() and d["tokens"]["source"] == "usage"


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
    assert d2["attempts"] == 1  # learned: not asked again
    fake_server.schedule = Schedule(timings="ollama")
    b = backend_for("compat", fake_server)
    d = await one_turn(b)
    await b.aclose()
    assert d["server"]["ollama"]["eval_count"] == 8


async def test_compat_sends_no_key(fake_server: FakeServer, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak-123")
    b = backend_for("compat", fake_server)
    await one_turn(b)
    await b.aclose()
    assert "authorization" not in fake_server.requests[-1].headers
