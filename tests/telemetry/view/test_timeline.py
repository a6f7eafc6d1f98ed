"""telemetry.view.timeline (phases and marks for drawing) and telemetry.view.render (render lag)."""

from __future__ import annotations

from ttft.telemetry import events as ev
from ttft.telemetry.recorder import TurnRecorder
from ttft.telemetry.settings import TurnSettings
from ttft.telemetry.view.render import RenderLag
from ttft.telemetry.view.timeline import live_timeline, stalls, turn_timeline

MS = 1_000_000
T0 = 10_000 * MS


def recorder() -> TurnRecorder:
    return TurnRecorder("s", 0, "fake", "chat.completions", "m", None, TurnSettings(), "p")


def test_stalls_are_gaps_far_above_the_median() -> None:
    times = [0, 10, 20, 30, 1030, 1040, 1050]
    marks = stalls(times)
    assert [(m.at_ms, m.label) for m in marks] == [(30, "stall 1000 ms")]
    # 10x the median but below what a person sees: jitter, not a stall
    assert stalls([0, 0.5, 1.0, 6.0, 6.5]) == []
    assert stalls([0, 10]) == []


def test_turn_timeline_phases_retries_and_stall() -> None:
    r = recorder()
    r.feed(ev.AttemptSent(T0, 1))
    r.feed(ev.HeadersReceived(T0 + 50 * MS, 1, 429, 0.2))
    r.feed(ev.AttemptSent(T0 + 300 * MS, 2))
    r.feed(ev.HeadersReceived(T0 + 350 * MS, 2, 200))
    t = T0 + 400 * MS
    for i in range(5):
        r.feed(ev.ReasoningDelta(t + i * 10 * MS, "think "))
    t += 50 * MS
    for i in range(5):
        r.feed(ev.TextDelta(t + i * 10 * MS, "word "))
    t += 40 * MS + 2000 * MS  # a 2 s silence before the last token
    r.feed(ev.TextDelta(t, "end"))
    r.feed(ev.Finished(t + 5 * MS))
    tl = turn_timeline(r.finish())
    assert [(s.phase, round(s.start_ms), round(s.end_ms)) for s in tl.segments] == [
        ("waiting", 0, 400),
        ("reasoning", 400, 450),
        ("streaming", 450, 2490),
    ]
    kinds = [(m.kind, round(m.at_ms), m.label) for m in tl.markers]
    assert ("retry", 300, "attempt 2 after 429") in kinds
    assert ("stall", 490, "stall 2000 ms") in kinds
    assert tl.status == "ok" and round(tl.end_ms) == 2495


def test_failed_before_any_token_is_all_waiting() -> None:
    r = recorder()
    r.feed(ev.AttemptSent(T0, 1))
    r.feed(ev.Failed(T0 + 120 * MS, "APIError", "boom", 500))
    tl = turn_timeline(r.finish())
    assert [(s.phase, s.end_ms) for s in tl.segments] == [("waiting", 120.0)]
    assert tl.status == "error" and tl.end_ms == 120.0


def test_live_timeline_follows_the_snapshot() -> None:
    r = recorder()
    r.feed(ev.ModelLoadStarted(T0 - 500 * MS, "gguf"))
    r.feed(ev.ModelLoadFinished(T0 - 100 * MS))
    r.feed(ev.AttemptSent(T0, 1))
    r.feed(ev.ReasoningDelta(T0 + 200 * MS, "hmm "))
    tl = live_timeline(r.snapshot(T0 + 300 * MS), r.attempts)
    assert [(s.phase, round(s.start_ms), round(s.end_ms)) for s in tl.segments] == [
        ("loading", -400, 0),
        ("waiting", 0, 200),
        ("reasoning", 200, 300),
    ]
    assert tl.status == "reasoning" and tl.start_ms == -400


def test_render_lag_summary_and_growth() -> None:
    lag = RenderLag()
    for i in range(10):
        lag.add(arrived_ns=i * 100 * MS, painted_ns=i * 100 * MS + (10 + 10 * i) * MS, backlog_chunks=i)
    s = lag.summary()
    assert s["paints"] == 10 and s["p50_ms"] == 55.0 and s["max_ms"] == 100.0
    assert s["backlog_max"] == 9 and s["backlog_last"] == 9
    assert s["lag_growth"] > 2  # painting fell behind as the turn went on
    assert RenderLag().summary()["p95_ms"] is None
    assert lag.add(5 * MS, 4 * MS) == 0.0  # a paint stamped before arrival (clock skew) is not negative


def test_phase_spans_lay_the_phases_end_to_end_from_the_send() -> None:
    from ttft.telemetry.metrics import TurnMetrics
    from ttft.telemetry.view.timeline import phase_spans

    spans = phase_spans(TurnMetrics(phases_ms={"streaming": 30.0, "waiting": 100.0, "reasoning": 0.0}))
    assert [(s.phase, s.start_ms, s.end_ms) for s in spans] == [("waiting", 0.0, 100.0), ("streaming", 100.0, 130.0)]
    assert phase_spans(TurnMetrics()) == []


def test_a_tool_using_turn_draws_each_step_and_ttfts_own_time_between() -> None:
    from ttft.telemetry.steps import steps_from_json
    from ttft.telemetry.view.timeline import step_segments

    steps = steps_from_json(
        [
            {"kind": "model", "start_ms": 0.0, "end_ms": 160.0, "ttft_ms": 150.0, "ttfvt_ms": None},
            {"kind": "approval", "start_ms": 162.0, "end_ms": 900.0},
            {"kind": "tool", "start_ms": 905.0, "end_ms": 1155.0},
            {"kind": "model", "start_ms": 1160.0, "end_ms": 1270.0, "ttft_ms": 100.0, "ttfvt_ms": 100.0},
            {"kind": "tool", "start_ms": "bad", "end_ms": None},  # a hand-edited line: left out
        ]
    )
    got = [(s.phase, s.start_ms, s.end_ms) for s in step_segments(steps)]
    assert got == [
        ("waiting", 0.0, 150.0),
        ("reasoning", 150.0, 160.0),
        ("approval", 162.0, 900.0),
        ("tool", 905.0, 1155.0),
        ("waiting", 1160.0, 1260.0),
        ("streaming", 1260.0, 1270.0),
        ("ttft", 160.0, 162.0),
        ("ttft", 900.0, 905.0),
        ("ttft", 1155.0, 1160.0),
    ]
