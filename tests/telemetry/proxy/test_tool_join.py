"""The app's step split by its own telemetry: tool spans joined to the rebuilt tool steps by call id, then by
trace, then by time and name; the step runs for the span's time inside its gap and the rest is the app's;
the records still read as the chat's agent turns; and a traceparent header read as W3C says."""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st
from ttft.telemetry.agent.steps import ToolStep
from ttft.telemetry.export import step_table
from ttft.telemetry.export.genai_spans import agent_span
from ttft.telemetry.export.table import row, unlisted
from ttft.telemetry.proxy.app_spans import AppToolSpan, SpanSource, clean, read_traceparent
from ttft.telemetry.proxy.sessions import ProxySession, rebuild
from ttft.telemetry.proxy.shape import CallShape
from ttft.telemetry.proxy.tool_join import SLACK_NS, Gaps, join
from ttft.telemetry.record import TurnRecord

from tests.support.turns import at, reads_back
from tests.telemetry.proxy.test_sessions import call

TRACE_A, TRACE_B = "a" * 32, "b" * 32


def span(
    start: float,
    end: float,
    *,
    name: str = "Bash",
    call_id: str = "",
    trace: str = "",
    source: SpanSource = "execute_tool",
    ok: bool | None = None,
) -> AppToolSpan:
    """A tool span as the receiver hands it over, times in ms on the proxy's clock (as ``call``'s)."""
    return AppToolSpan(name, call_id, at(start), at(end), source, trace_id=trace, ok=ok)


def traced(c: tuple[TurnRecord, CallShape], trace: str) -> tuple[TurnRecord, CallShape]:
    return c[0], dataclasses.replace(c[1], trace_id=trace, parent_span_id="1" * 16)


def loop(cid: str = "toolu_1", name: str = "Bash", *, hint: str | None = None, base: float = 0.0) -> list:
    """The model asks for one tool (0-1000 ms), the app's step runs until 3500, the model answers (3500-4200)."""
    return [
        call(0, base, base + 1000, ("u1",), asks=((cid, name),), hint=hint),
        call(1, base + 3500, base + 4200, ("u1", "a1", "r1"), results=(cid,), hint=hint),
    ]


def tools(s: ProxySession) -> list[dict]:
    return [st for st in s.record.steps if st.kind == "tool"]


def parts(s: ProxySession) -> tuple[float, float, float]:
    a = s.record.agent or {}
    return a.time_in_model_ms, a.time_in_tools_ms, a.time_in_app_ms


def test_a_span_with_the_steps_call_id_splits_the_apps_step_into_tool_and_app_time() -> None:
    [s] = rebuild(loop(), [span(1500, 3000, call_id="toolu_1")])
    [bash] = tools(s)
    assert (bash.start_ms, bash.end_ms, bash.duration_ms) == (1500.0, 3000.0, 1500.0)
    assert (bash.timing, bash.span_source, bash.matched_by, bash.gap_ms) == (
        "span",
        "execute_tool",
        "call_id",
        2500.0,
    )
    assert parts(s) == (1700.0, 1500.0, 1000.0)  # the gap's other 1000 ms are the app's own
    assert sum(parts(s)) == 4200.0  # the session's span, still
    assert "1.5 s in tools (Bash 1.5 s; 1 of 1 timed by the app's own telemetry)" in s.summary
    assert "1.0 s in the app between calls" in s.summary


def test_without_spans_a_tool_step_spans_its_gap_and_says_so() -> None:
    [s] = rebuild(loop())
    [bash] = tools(s)
    assert (bash.duration_ms, bash.timing, bash.gap_ms) == (2500.0, "gap", 2500.0)
    assert bash.span_source is None and "timed by the app" not in s.summary
    assert parts(s) == (1700.0, 2500.0, 0.0)


def test_a_span_off_by_a_skewed_clock_keeps_its_duration_inside_the_gap() -> None:
    [s] = rebuild(loop(), [span(-300, 700, call_id="toolu_1")])  # "began" before the model asked for it
    [bash] = tools(s)
    assert (bash.start_ms, bash.end_ms) == (1000.0, 2000.0)
    [s] = rebuild(loop(), [span(0, 9000, call_id="toolu_1")])  # longer than the gap: the gap is the most it ran
    assert tools(s)[0].duration_ms == 2500.0 and parts(s)[2] == 0.0


def test_a_span_and_an_event_of_one_run_time_it_once_the_span_first() -> None:
    event = span(1200, 2200, call_id="toolu_1", source="claude_code.tool_result")
    [s] = rebuild(loop(), [event, span(1500, 3000, call_id="toolu_1")])
    [bash] = tools(s)
    assert (bash.span_source, bash.duration_ms) == ("execute_tool", 1500.0)


def test_a_claude_code_event_and_a_failed_run() -> None:
    event = span(1100, 3300, call_id="toolu_1", source="claude_code.tool_result", ok=False)
    [s] = rebuild(loop(), [event])
    [bash] = tools(s)
    assert (bash.span_source, bash.status, bash.duration_ms) == ("claude_code.tool_result", "error", 2200.0)


def test_a_span_of_a_sessions_trace_joins_it_even_where_another_session_overlaps_it_more() -> None:
    a = [traced(c, TRACE_A) for c in loop("ta", hint="A")]
    b = [traced(c, TRACE_B) for c in loop("tb", hint="B", base=400)]  # its gap: 1400-3900
    calls = [a[0], b[0], a[1], b[1]]
    # no call id: by trace. The span (1000-1400) overlaps A's gap (1000-3500) and only B's by the slack...
    s_a, s_b = rebuild(calls, [span(1000, 1400, trace=TRACE_B)])
    assert tools(s_a)[0].timing == "gap"
    assert tools(s_b)[0].matched_by == "trace_id" and tools(s_b)[0].start_ms == 1000.0  # B's clock: 400 ms in
    assert s_b.trace_ids == (TRACE_B,) and s_b.to_dict()["trace_ids"] == [TRACE_B]
    # ...without the trace it goes by time: to the gap it overlaps most, A's
    s_a, s_b = rebuild(calls, [span(1000, 1400)])
    assert (tools(s_a)[0].matched_by, tools(s_b)[0].timing) == ("time", "gap")


def test_a_span_of_a_known_trace_never_joins_another_session() -> None:
    a = [traced(c, TRACE_A) for c in loop("ta", hint="A")]
    b = [traced(c, TRACE_B) for c in loop("tb", hint="B")]
    # B's gap is taken by its own span already; the second span of trace B finds no room in B, and A is not B
    s_a, s_b = rebuild([a[0], b[0], a[1], b[1]], [span(1200, 2000, trace=TRACE_B), span(2100, 3000, trace=TRACE_B)])
    assert tools(s_a)[0].timing == "gap" and tools(s_b)[0].duration_ms == 800.0


def test_by_time_a_span_needs_the_tools_name_and_to_overlap_the_gap() -> None:
    [s] = rebuild(loop(), [span(1500, 3000, name="Read")])
    assert tools(s)[0].timing == "gap"
    [s] = rebuild(loop(), [span(5000, 6000)])  # after the app's step
    assert tools(s)[0].timing == "gap"
    [s] = rebuild(loop(), [span(1500, 3000, name="")])  # a span that names no tool: any tool of the gap
    assert tools(s)[0].matched_by == "time"
    at_edge = 3500 + SLACK_NS / 1e6 / 2  # just past the gap's end, within the slack
    [s] = rebuild(loop(), [span(at_edge, at_edge + 10)])
    assert (tools(s)[0].start_ms, tools(s)[0].end_ms) == (3490.0, 3500.0)  # its time, moved into the gap


def test_an_unknown_call_id_falls_back_to_time_a_known_taken_one_does_not() -> None:
    [s] = rebuild(loop(), [span(1500, 3000, call_id="the-apps-own-id")])
    assert tools(s)[0].matched_by == "time"
    calls = [
        call(0, 0, 1000, ("u1",), asks=(("t1", "Bash"), ("t2", "Bash"))),
        call(1, 3500, 4200, ("u1", "a1", "r1", "r2"), results=("t1", "t2")),
    ]
    [s] = rebuild(calls, [span(1100, 1500, call_id="t1"), span(2000, 3000, call_id="t1")])  # t1 said twice
    assert {t.call_id: t.timing for t in tools(s)} == {"t1": "span", "t2": "gap"}


def test_parallel_tools_of_one_step_count_their_overlap_once() -> None:
    calls = [
        call(0, 0, 1000, ("u1",), asks=(("t1", "Read"), ("t2", "Grep"))),
        call(1, 3500, 4200, ("u1", "a1", "r1", "r2"), results=("t1", "t2")),
    ]
    [s] = rebuild(calls, [span(1100, 2100, name="Read", call_id="t1"), span(1600, 2600, name="Grep", call_id="t2")])
    assert [t.duration_ms for t in tools(s)] == [1000.0, 1000.0]
    assert parts(s) == (1700.0, 1500.0, 1000.0)


def test_the_join_on_its_own_each_span_times_one_step_at_most() -> None:
    step = ToolStep("Bash", "app", at(1000), at(3500), "ok", call_id="x")
    twice = [Gaps(frozenset(), [step]), Gaps(frozenset({TRACE_A}), [step])]
    got = join(twice, [span(1500, 2000, call_id="x", trace=TRACE_A)])
    assert got[0] == [None] and got[1][0] is not None and got[1][0].matched_by == "call_id"
    assert join([], [span(0, 1)]) == [] and join(twice, []) == [[None], [None]]


def test_a_session_split_by_spans_still_reads_as_a_chat_agent_turn() -> None:
    [s] = rebuild(loop(), [span(1500, 3000, call_id="toolu_1")])
    d = reads_back(s.record.to_dict())
    assert TurnRecord.from_dict(d).steps == s.record.steps
    assert unlisted(d) == []
    flat = row(d)
    assert flat["agent.time_in_tools_ms"] == 1500.0 and flat["agent.time_in_app_ms"] == 1000.0
    rows = [(r["kind"], r["start_ms"], r["duration_ms"]) for r in step_table.rows(d)]
    assert rows == [("model", 0.0, 1000.0), ("tool", 1500.0, 1500.0), ("model", 3500.0, 700.0)]
    otel = agent_span(s.record)
    assert otel is not None and [c.name for c in otel.children] == ["chat m", "execute_tool Bash", "chat m"]


_spans = st.lists(
    st.tuples(
        st.floats(-1000, 5000),
        st.floats(0, 4000),
        st.sampled_from(["Bash", "Read", ""]),
        st.sampled_from(["", "toolu_1", "t2"]),
    ),
    max_size=6,
)


@given(_spans)
def test_whatever_spans_come_the_parts_add_up_and_each_step_stays_in_its_gap(got: list) -> None:
    calls = [
        call(0, 0, 1000, ("u1",), asks=(("toolu_1", "Bash"), ("t2", "Read"))),
        call(1, 3500, 4200, ("u1", "a1", "r1", "r2"), results=("toolu_1", "t2")),
    ]
    [s] = rebuild(calls, [span(a, a + d, name=n, call_id=c) for a, d, n, c in got])
    assert abs(sum(parts(s)) - 4200.0) < 0.01
    for t in tools(s):
        assert 1000.0 <= t.start_ms <= t.end_ms <= 3500.0 and t.gap_ms == 2500.0


def test_traceparent_is_read_as_w3c_trace_context_says() -> None:
    good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    assert read_traceparent(good) == ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7")
    assert read_traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-later") is not None
    for bad in (
        None,
        "",
        "garbage",
        good + "-x",  # version 00 has exactly four fields
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-" + "0" * 32 + "-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-" + "0" * 16 + "-01",
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  # upper case is not the format
        good + "\x1b[2J",
        "0" * 10_000,
    ):
        assert read_traceparent(bad) is None, bad


def test_names_and_ids_from_outside_are_kept_short_and_printable() -> None:
    assert clean("Bash\x1b]0;pwned\x07") == "Bash]0;pwned"
    assert clean("x" * 10_000) == "x" * 128 and clean("a b") == "ab"
