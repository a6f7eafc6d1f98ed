"""Every metric from hand-made event sequences with known timestamps."""

from __future__ import annotations

import pytest
from ttft.telemetry import events as ev
from ttft.telemetry.metrics import percentiles

from tests.support.turns import at, play, recorder, stream

approx = pytest.approx


def test_clean_stream_metrics() -> None:
    rec = play(stream(first_ms=200, gap_ms=10, visible=11))
    m = rec["metrics"]
    assert rec["status"] == "ok"
    assert m["ttft_ms"] == approx(200)
    assert m["ttfvt_ms"] == approx(200)
    assert m["tpot_ms"] == approx(10)  # 100 ms over 11 tokens -> 10 gaps
    assert m["e2e_ms"] == approx(300)
    assert m["total_ms"] == approx(301)
    assert m["itl_ms"]["p50"] == approx(10) and m["itl_ms"]["max"] == approx(10)
    assert m["reasoning_delay_ms"] is None
    assert m["phases_ms"] == {"waiting": approx(200), "reasoning": 0.0, "streaming": approx(100)}
    assert m["decode_tokens_per_s"] == approx(100)
    assert m["output_tokens_per_s"] == approx(11 / 0.3)
    assert rec["events_ms"] == {
        "sent": 0.0,
        "headers": approx(100),
        "first_token": approx(200),
        "first_visible": approx(200),
        "last_token": approx(300),
        "end": approx(301),
    }
    assert rec["tokens"] == {
        "input": 12,
        "cached_input": 4,
        "output": 11,
        "reasoning": 0,
        "source": "usage",
        "cache_write_input": None,  # the usage said nothing of cache writes
    }


def test_streamed_reasoning_delay_and_phases() -> None:
    rec = play(stream(first_ms=100, gap_ms=20, reasoning=5, visible=5))
    m = rec["metrics"]
    assert m["ttft_ms"] == approx(100)
    assert m["ttfvt_ms"] == approx(200)
    assert m["reasoning_delay_ms"] == approx(100)
    assert m["reasoning_delay_estimated"] is False
    assert m["phases_ms"]["reasoning"] == approx(100)
    assert m["phases_ms"]["streaming"] == approx(80)
    assert rec["reasoning"] == "rrrr" * 5


def test_hidden_reasoning_is_estimated_from_usage() -> None:
    # 40 thinking tokens never streamed; visible at 20 ms per token; first visible at 1000 ms.
    rec = play(stream(first_ms=1000, gap_ms=20, visible=11, hidden_reasoning_tokens=40))
    m = rec["metrics"]
    assert m["tpot_ms"] == approx(20)  # hidden tokens are outside the streaming window
    assert m["reasoning_delay_ms"] == approx(800)
    assert m["reasoning_delay_estimated"] is True
    assert rec["tokens"]["reasoning"] == 40
    assert rec["tokens"]["output"] == 51


def test_hidden_reasoning_estimate_never_exceeds_the_wait() -> None:
    rec = play(stream(first_ms=100, gap_ms=20, visible=5, hidden_reasoning_tokens=1000))
    assert rec["metrics"]["reasoning_delay_ms"] == approx(100)


def test_one_token() -> None:
    rec = play(stream(first_ms=150, visible=1))
    m = rec["metrics"]
    assert m["ttft_ms"] == approx(150)
    assert m["e2e_ms"] == approx(150)
    assert m["tpot_ms"] is None
    assert m["itl_ms"]["p50"] is None
    assert m["phases_ms"]["streaming"] == 0.0


def test_no_tokens() -> None:
    rec = play([ev.AttemptSent(at(0)), ev.HeadersReceived(at(50)), ev.Finished(at(400), "length")])
    m = rec["metrics"]
    assert m["ttft_ms"] is None and m["e2e_ms"] is None and m["tpot_ms"] is None
    assert m["total_ms"] == approx(400)
    assert m["phases_ms"] == {"waiting": approx(400), "reasoning": 0.0, "streaming": 0.0}
    assert "without a single token" in rec["diagnosis"]


def test_error_before_first_token() -> None:
    rec = play(
        [
            ev.AttemptSent(at(0)),
            ev.HeadersReceived(at(30), 1, 401),
            ev.Failed(at(31), "authentication", "Incorrect API key", 401, "Check OPENAI_API_KEY."),
        ]
    )
    assert rec["status"] == "error"
    assert rec["error"] == {
        "type": "authentication",
        "message": "Incorrect API key",
        "status_code": 401,
        "hint": "Check OPENAI_API_KEY.",
    }
    assert rec["metrics"]["ttft_ms"] is None
    assert rec["answer"] == ""
    assert "HTTP 401" in rec["diagnosis"] and "Check OPENAI_API_KEY." in rec["diagnosis"]


def test_error_mid_stream_keeps_partial_answer() -> None:
    events = stream(first_ms=100, gap_ms=10, visible=4, usage=False)[:-1]
    events.append(ev.Failed(at(200), "overloaded", "Overloaded", None))
    rec = play(events)
    assert rec["status"] == "error"
    assert rec["answer"] == "wwww" * 4
    assert rec["metrics"]["ttft_ms"] == approx(100)
    assert rec["tokens"]["source"] == "estimated"


def test_cancel_mid_reasoning() -> None:
    events = stream(first_ms=100, gap_ms=10, reasoning=5, visible=0, usage=False)[:-1]
    events.append(ev.Cancelled(at(300)))
    rec = play(events)
    m = rec["metrics"]
    assert rec["status"] == "cancelled"
    assert m["ttfvt_ms"] is None
    assert m["phases_ms"] == {"waiting": approx(100), "reasoning": approx(40), "streaming": 0.0}
    assert sum(m["phases_ms"].values()) == approx(m["e2e_ms"])
    assert rec["reasoning"] == "rrrr" * 5


def test_multi_token_chunks_divide_by_tokens_not_chunks() -> None:
    # 5 chunks of 4 tokens, 40 ms apart: 20 tokens over 160 ms -> TPOT 160/19, ITL 40 per chunk.
    rec = play(stream(first_ms=100, gap_ms=40, visible=5, tokens_per_chunk=4))
    m = rec["metrics"]
    assert m["tpot_ms"] == approx(160 / 19)
    assert m["itl_ms"]["p50"] == approx(40)
    assert rec["chunks"][0] == {"t_ms": 100.0, "kind": "text", "tokens": 4}


def test_usage_missing_estimates_and_says_so() -> None:
    rec = play(stream(first_ms=100, gap_ms=10, visible=6, usage=False))
    tok = rec["tokens"]
    assert tok["source"] == "estimated"
    assert tok["output"] == 6
    assert tok["input"] is not None
    assert rec["metrics"]["tpot_ms"] == approx(10)


def test_retries_are_attempts_in_the_wait_not_hidden() -> None:
    events: list[ev.Event] = [
        ev.AttemptSent(at(0), 1),
        ev.HeadersReceived(at(20), 1, 429, retry_after_s=1.0),
        ev.AttemptSent(at(1020), 2),
        ev.HeadersReceived(at(1100), 2, 200),
        ev.TextDelta(at(1200), "ok"),
        ev.TextDelta(at(1210), "!"),
        ev.Finished(at(1211)),
    ]
    rec = play(events)
    m = rec["metrics"]
    assert rec["attempts"] == 2
    assert [a["status"] for a in rec["attempt_log"]] == [429, 200]
    assert m["retry_ms"] == approx(1020)
    assert m["ttft_ms"] == approx(1200)  # from the first send: the user waited all of it
    assert m["phases_ms"]["waiting"] == approx(1200)
    assert rec["events_ms"]["headers"] == approx(1100)
    assert "retr" in rec["diagnosis"]


def test_live_snapshot_ticks_before_anything_arrives() -> None:
    r = recorder()
    r.feed(ev.AttemptSent(at(0)))
    s1 = r.snapshot(at(500))
    s2 = r.snapshot(at(1800))
    assert s1.phase == s2.phase == "waiting"
    assert s1.elapsed_ms == approx(500) and s2.elapsed_ms == approx(1800)
    assert s2.ttft_ms is None
    r.feed(ev.ReasoningDelta(at(2000), "hmm"))
    s3 = r.snapshot(at(2500))
    assert s3.phase == "reasoning" and s3.phase_elapsed_ms == approx(500) and s3.reasoning_tokens == 1
    for i in range(5):
        r.feed(ev.TextDelta(at(3000 + 20 * i), "tok"))
    s4 = r.snapshot(at(3090))
    assert s4.phase == "streaming"
    assert s4.ttft_ms == approx(2000) and s4.ttfvt_ms == approx(3000)
    assert s4.visible_tokens == 5
    assert s4.tokens_per_s == approx(50)
    assert s4.recent_gaps_ms[-1] == approx(20)
    r.feed(ev.Finished(at(3100)))
    assert r.snapshot(at(99_999)).phase == "ok"
    assert r.snapshot(at(99_999)).elapsed_ms == approx(3100)  # frozen at the end


def test_snapshot_shows_retry_and_load_phases() -> None:
    r = recorder()
    r.feed(ev.ModelLoadStarted(at(-900), "gemma"))
    assert r.snapshot(at(-400)).phase == "loading"
    r.feed(ev.ModelLoadFinished(at(-100)))
    r.feed(ev.AttemptSent(at(0), 1))
    r.feed(ev.HeadersReceived(at(10), 1, 429))
    r.feed(ev.AttemptSent(at(1000), 2))
    s = r.snapshot(at(1500))
    assert s.phase == "waiting" and s.attempt == 2 and s.retry_ms == approx(1000)
    assert s.phase_elapsed_ms == approx(500)
    assert s.load_ms == approx(800)
    r.feed(ev.TextDelta(at(1600), "x"))
    r.feed(ev.Finished(at(1601)))
    rec = r.finish().to_dict()
    assert rec["metrics"]["load_ms"] == approx(800)
    assert rec["metrics"]["ttft_ms"] == approx(1600)  # load is never inside TTFT


def test_finish_without_terminal_event_is_cancelled() -> None:
    r = recorder()
    r.feed(ev.AttemptSent(at(0)))
    r.feed(ev.TextDelta(at(100), "partial"))
    rec = r.finish().to_dict()
    assert rec["status"] == "cancelled" and rec["answer"] == "partial"


def test_events_after_terminal_are_ignored() -> None:
    rec = play([ev.AttemptSent(at(0)), ev.TextDelta(at(10), "a"), ev.Finished(at(20)), ev.TextDelta(at(30), "b")])
    assert rec["answer"] == "a"


def test_empty_text_and_role_only_chunks_are_not_tokens() -> None:
    rec = play([ev.AttemptSent(at(0)), ev.TextDelta(at(10), ""), ev.TextDelta(at(50), "a"), ev.Finished(at(60))])
    assert rec["metrics"]["ttft_ms"] == approx(50)


def test_server_timings_kept_apart() -> None:
    events = stream(visible=3)
    events.insert(-1, ev.ServerTimings(at(999), "llama-server", {"prompt_n": 12, "predicted_ms": 30.5}))
    rec = play(events)
    assert rec["server"] == {"llama-server": {"prompt_n": 12, "predicted_ms": 30.5}}
    assert "prompt_n" not in rec["metrics"]


def test_percentiles_linear_interpolation() -> None:
    p = percentiles([1.0, 2.0, 3.0, 4.0])
    assert p.p50 == approx(2.5)
    assert p.p90 == approx(3.7)
    assert p.max == 4.0 and p.min == 1.0 and p.mean == approx(2.5)
    assert percentiles([]).p99 is None
    # the JSON form summaries write: these keys, in this order
    assert list(p.to_dict()) == ["p50", "p90", "p95", "p99", "mean", "min", "max"]
    assert p.to_dict()["p90"] == p.p90


def test_single_chunk_answer_has_no_tpot() -> None:
    """A non-streamed reply arrives in one piece: TTFT equals E2E and decode speed is unknown, not infinite."""
    rec = play([ev.AttemptSent(at(0)), ev.TextDelta(at(900), "whole answer", 40), ev.Finished(at(901))])
    m = rec["metrics"]
    assert m["ttft_ms"] == m["e2e_ms"] == approx(900)
    assert m["tpot_ms"] is None and m["decode_tokens_per_s"] is None


def test_a_non_streamed_answer_with_reasoning_has_no_tpot() -> None:
    # `ttft ask --no-stream` against a reasoning model: the reasoning and the text come in one
    # response, two chunks with one stamp, so there is no decode window to divide (a 0.0 ms TPOT
    # would pull medians down).
    rec = play(
        [
            ev.AttemptSent(at(0), 1),
            ev.HeadersReceived(at(2600), 1, 200),
            ev.ReasoningDelta(at(2676), "r" * 80, 20),
            ev.TextDelta(at(2676), "w" * 240, 60),
            ev.Usage(at(2676), input=12, cached_input=0, output=80, reasoning=20),
            ev.Finished(at(2677), "stop"),
        ]
    )
    m = rec["metrics"]
    assert m["ttft_ms"] == m["e2e_ms"] == 2676.0
    assert m["tpot_ms"] is None and m["decode_tokens_per_s"] is None


def test_streamed_chunks_keep_their_tpot() -> None:
    rec = play(
        [
            ev.AttemptSent(at(0), 1),
            ev.HeadersReceived(at(50), 1, 200),
            *(ev.TextDelta(at(100 + 10 * k), "wwww", 1) for k in range(5)),
            ev.Finished(at(141), "stop"),
        ]
    )
    assert rec["metrics"]["tpot_ms"] == 10.0


def test_the_mcp_servers_start_is_its_own_figure_and_not_ttfts_own_delay() -> None:
    r = recorder()
    r.feed(ev.Submitted(at(-1000)))
    r.feed(ev.McpStarted(at(-100), start_ns=at(-980)))  # spawn, initialize, list tools: 880 ms
    assert r.snapshot(at(-50)).own_delay_ms == approx(70)  # live too: 1,000 ms since the submit, 880 the servers'
    rec = play(stream(), r)
    assert rec["metrics"]["mcp_start_ms"] == approx(880)
    assert rec["metrics"]["own_delay_ms"] == approx(120)
    assert rec["metrics"]["ttft_ms"] == approx(200)  # never inside TTFT either
    assert play(stream())["metrics"]["mcp_start_ms"] is None  # a turn without servers has no such figure
