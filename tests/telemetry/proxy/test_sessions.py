"""The app's sessions rebuilt from the proxy's calls: conversations found by the growing message list, the
session header, tool results and Responses chains; the app's step between calls; retries as calls of one
step; one line of where the time went; and records the exports and the timeline read as the chat's."""

from __future__ import annotations

import dataclasses
import json
import time

from hypothesis import given
from hypothesis import strategies as st
from ttft.telemetry import events as ev
from ttft.telemetry.diagnosis import diagnose_turn
from ttft.telemetry.export import step_table
from ttft.telemetry.export.genai_points import turn_points
from ttft.telemetry.export.genai_spans import agent_span
from ttft.telemetry.export.table import row, unlisted
from ttft.telemetry.proxy.sessions import ProxySession, rebuild
from ttft.telemetry.proxy.shape import CallShape
from ttft.telemetry.record import TurnRecord
from ttft.telemetry.view.timeline import turn_timeline

from tests.support.turns import MS, at, reads_back, recorder

CLIENT = "claude-cli/2.0.14"


def call(
    i: int,
    start: float,
    end: float,
    digests: tuple[str, ...],
    *,
    ttft: float = 100.0,
    status: int | None = 200,
    system: str = "sys",
    hint: str | None = None,
    retry: int = 0,
    asks: tuple[tuple[str, str], ...] = (),
    results: tuple[str, ...] = (),
    tokens: tuple[int, int] = (1000, 0),
    api: str = "messages",
    response_id: str | None = None,
    previous: str | None = None,
) -> tuple[TurnRecord, CallShape]:
    """One call as the proxy records it (times in ms on the proxy's clock): its turn record and its shape."""
    r = recorder()
    r.feed(ev.AttemptSent(at(start)))
    if status is not None:
        r.feed(ev.HeadersReceived(at(start + min(ttft, end - start) / 2), 1, status))
    if status == 200:
        for n, (cid, name) in enumerate(asks):
            r.feed(ev.ToolCallDelta(at(start + ttft), name, "{}", index=n, call_id=cid))
        if not asks:
            r.feed(ev.TextDelta(at(start + ttft), "ok", 1))
        r.feed(ev.Usage(at(end - 1), input=tokens[0], cached_input=tokens[1], output=10))
        r.feed(ev.Finished(at(end), "tool_use" if asks else "end_turn"))
    else:
        kind = "rate_limited" if status == 429 else "network"
        r.feed(ev.Failed(at(end), kind, "the server said no", status_code=status))
    rec = dataclasses.replace(r.finish(), turn_index=i, api=api, source="proxy", client=CLIENT)
    shape = CallShape(
        call_index=i,
        start_ns=at(start) - MS // 2,  # the proxy read the request just before it sent it on
        end_ns=at(end) + MS // 2,
        api=api,
        model="m",
        client=CLIENT,
        status=status,
        session_hint=hint,
        retry_count=retry,
        system_digest=system,
        message_digests=digests,
        tool_results=results,
        tool_calls=asks,
        response_id=response_id,
        previous_response_id=previous,
    )
    return rec, shape


def _kinds(s: ProxySession) -> list[tuple[str, float, float]]:
    return [(st.kind, st.start_ms, st.end_ms) for st in s.record.steps]


def _split_total(s: ProxySession) -> float:
    a = s.record.agent
    assert a is not None and a.time_in_app_ms is not None
    return a.time_in_model_ms + a.time_in_tools_ms + a.time_in_ttft_ms + a.time_in_app_ms


def _loop() -> list[tuple[TurnRecord, CallShape]]:
    """Model asks for Bash (0-1000 ms), Bash runs until 3500, the model answers (3500-4200)."""
    return [
        call(0, 0, 1000, ("u1",), asks=(("toolu_1", "Bash"),), tokens=(12_000, 0)),
        call(1, 3500, 4200, ("u1", "a1", "r1"), results=("toolu_1",), tokens=(12_400, 12_000)),
    ]


def test_a_tool_loop_is_two_model_steps_and_the_apps_step_covers_the_gap() -> None:
    [s] = rebuild(_loop())
    assert s.call_indices == (0, 1) and s.client == CLIENT and s.key == "call-0"
    assert _kinds(s) == [("model", 0.0, 1000.0), ("tool", 1000.0, 3500.0), ("model", 3500.0, 4200.0)]
    tool = s.record.steps[1]
    assert (tool.name, tool.server, tool.call_id, tool.duration_ms) == ("Bash", CLIENT, "toolu_1", 2500.0)
    assert [getattr(st, "call_index", None) for st in s.record.steps] == [0, None, 1]
    agent = s.record.agent
    assert agent is not None
    assert agent.time_in_model_ms == 1700.0 and agent.time_in_tools_ms == 2500.0
    assert agent.time_in_app_ms == 0.0 and agent.time_in_ttft_ms == 0.0
    assert (agent.model_steps, agent.tool_steps, agent.stopped) == (2, 1, "answer")
    assert s.record.metrics.ttft_ms == 100.0 and s.record.tokens.input == 24_400
    assert "went to the tool `Bash`" in s.record.diagnosis


def test_time_without_tool_results_is_the_apps_own_not_the_tools() -> None:
    calls = [
        call(0, 0, 1000, ("u1",)),
        call(1, 5000, 5600, ("u1", "a1", "u2")),  # the person typed for 4 s: no tool result carried
    ]
    [s] = rebuild(calls)
    assert [k for k, _, _ in _kinds(s)] == ["model", "model"]
    assert s.record.agent is not None and s.record.agent.time_in_app_ms == 4000.0
    assert s.record.agent.time_in_tools_ms == 0.0
    assert s.summary == (
        "Of 5.6 s: 1.6 s in 2 model calls (TTFT p50 100 ms, 1.0k input tokens each; 0% of input read from cache),"
        " 4.0 s in the app between calls."
    )
    assert "The app's own time between calls took 4.0 s." in s.record.diagnosis
    assert "ttft's own" not in s.record.diagnosis


def test_interleaved_sub_agents_are_kept_apart() -> None:
    calls = [
        call(0, 0, 1000, ("m1",), asks=(("t1", "Task"),)),
        # the sub-agent: another system prompt, running while the main agent waits for its Task result
        call(1, 1100, 1500, ("s1",), system="sub", asks=(("t2", "Read"),)),
        call(2, 1600, 2000, ("s1", "sa1", "sr1"), system="sub", results=("t2",), asks=(("t3", "Grep"),)),
        call(3, 2100, 2400, ("s1", "sa1", "sr1", "sa2", "sr2"), system="sub", results=("t3",)),
        call(4, 2500, 3000, ("m1", "ma1", "mr1"), results=("t1",)),
    ]
    main, sub = rebuild(calls)
    assert main.call_indices == (0, 4) and sub.call_indices == (1, 2, 3)
    assert [st.name for st in main.record.steps if st.kind == "tool"] == ["Task"]
    assert [st.name for st in sub.record.steps if st.kind == "tool"] == ["Read", "Grep"]
    assert _kinds(main)[1] == ("tool", 1000.0, 2500.0)


def test_two_sub_agents_with_the_same_prompt_running_at_once_stay_apart() -> None:
    calls = [
        call(0, 0, 1000, ("p",), system="sub"),
        call(1, 10, 900, ("p",), system="sub"),  # began while call 0 ran: not its next step
        call(2, 950, 1400, ("p", "a", "u"), system="sub"),  # extends call 1, which had ended
        call(3, 1100, 1600, ("p", "b", "v"), system="sub"),  # extends call 0
    ]
    assert [s.call_indices for s in rebuild(calls)] == [(0, 3), (1, 2)]


def test_the_session_header_groups_and_still_keeps_sub_agents_apart() -> None:
    calls = [
        call(0, 0, 500, ("u1",), hint="sess-A"),
        call(1, 0, 400, ("u1",), hint="sess-B"),  # another session: never joined to A's, same words or not
        call(2, 600, 900, ("u1", "a", "u2"), hint="sess-A"),
        call(3, 650, 800, ("t",), hint="sess-A", system="title"),  # a title call under A's id: its own
        # an unreadable body: A's id decides, and the conversation whose answer came last before it
        call(4, 1000, 1200, (), hint="sess-A"),
        call(5, 1000, 1300, ("u1", "a", "u2"), hint="sess-B"),  # B's next step, though A sent the same list
    ]
    got = {s.key: s.call_indices for s in rebuild(calls)}
    assert got == {"sess-A": (0, 2, 4), "sess-B": (1, 5), "sess-A#2": (3,)}


def test_a_429_then_its_retry_are_two_calls_of_one_step() -> None:
    calls = [
        call(0, 0, 900, ("u1",), asks=(("c1", "Bash"),)),
        call(1, 2000, 2050, ("u1", "a1", "r1"), results=("c1",), status=429),
        call(2, 3050, 3800, ("u1", "a1", "r1"), results=("c1",), retry=1),
    ]
    [s] = rebuild(calls)
    models = [st for st in s.record.steps if st.kind == "model"]
    assert [(m.call_index, m.status, m.retry) for m in models] == [
        (0, "ok", False),
        (1, "error", False),
        (2, "ok", True),
    ]
    # the tool ran until the first attempt carried its result; the back-off after the 429 is the app's own
    assert _kinds(s)[1] == ("tool", 900.0, 2000.0)
    agent = s.record.agent
    assert agent is not None and agent.time_in_tools_ms == 1100.0 and agent.time_in_app_ms == 1000.0
    assert s.record.status == "ok" and agent.stopped == "answer"
    assert "(TTFT p50 100 ms, 1.0k input tokens each; 0% of input read from cache; 1 failed; 1 retry)" in s.summary


def test_the_same_list_after_a_failure_is_a_retry_without_the_header() -> None:
    calls = [call(0, 0, 30, ("u1",), status=529), call(1, 1000, 1500, ("u1",))]
    [s] = rebuild(calls)
    assert [st.retry for st in s.record.steps] == [False, True]


def test_a_call_that_got_no_answer_is_still_a_step() -> None:
    calls = [call(0, 0, 30000, ("u1",), status=None)]
    [s] = rebuild(calls)
    assert s.record.status == "error" and s.record.steps[0].status == "error"
    assert s.summary == "Of 30 s: 30 s in 1 model call (1 failed)."


def test_a_responses_chain_follows_previous_response_id() -> None:
    calls = [
        call(0, 0, 800, ("in1",), api="responses", response_id="resp_1", asks=(("fc_1", "shell"),)),
        call(1, 100, 300, ("other",), api="responses", response_id="resp_x"),  # unrelated, interleaved
        # stateful: only the new input items are sent, so the message list does not repeat the first
        call(2, 1800, 2300, ("out1",), api="responses", previous="resp_1", results=("fc_1",), response_id="resp_2"),
        call(3, 2400, 2600, ("in3",), api="responses", previous="resp_2"),
    ]
    chain, other = rebuild(calls)
    assert chain.call_indices == (0, 2, 3) and other.call_indices == (1,)
    assert _kinds(chain)[1] == ("tool", 800.0, 1800.0)


def test_the_summary_line_has_the_figures() -> None:
    calls = [
        call(0, 0, 2000, ("u",), ttft=1500, asks=(("a", "Bash"),), tokens=(12_000, 0)),
        call(
            1,
            13_000,
            15_000,
            ("u", "1", "2"),
            ttft=2500,
            results=("a",),
            asks=(("b", "Read"), ("c", "Bash")),
            tokens=(40_000, 30_000),
        ),
        call(2, 16_000, 18_000, ("u", "1", "2", "3", "4"), ttft=1900, results=("b", "c"), tokens=(96_000, 70_000)),
        call(3, 21_000, 22_000, ("u", "1", "2", "3", "4", "5", "6"), ttft=1000, tokens=(96_500, 96_000)),
    ]
    [s] = rebuild(calls)
    # model 7 s; tools 11 s (2-13) + 1 s (15-16), Read and Bash ran together in the second gap; the app 3 s
    assert s.summary == (
        "Of 22 s: 7.0 s in 4 model calls (TTFT p50 1.7 s, rising with the context from 12k to 96k input tokens;"
        " 80% of input read from cache), 12 s in tools (Bash 12 s, Read 1.0 s), 3.0 s in the app between calls."
    )
    assert _split_total(s) == 22_000.0
    bash = [st for st in s.record.steps if st.kind == "tool" and st.name == "Bash"]
    assert [(b.start_ms, b.end_ms, b.call_id) for b in bash] == [
        (2000.0, 13_000.0, "a"),
        (15_000.0, 16_000.0, "c"),
    ]


def test_count_tokens_calls_are_no_steps() -> None:
    rec, shape = call(0, 0, 50, ("u1",))
    counted = dataclasses.replace(rec, extra={"model_step": False, "count_tokens": 1000})  # as the proxy marks it
    calls = [(counted, shape), call(1, 100, 900, ("u1",))]
    [s] = rebuild(calls)
    assert s.call_indices == (1,)


def test_nothing_in_nothing_out() -> None:
    assert rebuild([]) == []


def test_the_exports_and_the_timeline_read_a_session_as_a_chat_turn() -> None:
    calls = [*_loop(), call(2, 6000, 6500, ("u1", "a1", "r1", "a2", "u2"))]
    [s] = rebuild(calls)
    d = reads_back(s.record.to_dict())
    assert TurnRecord.from_dict(d).steps == s.record.steps
    rows = list(step_table.rows(d))
    assert [(r["kind"], r["name"], r["start_ms"], r["duration_ms"]) for r in rows] == [
        ("model", None, 0.0, 1000.0),
        ("tool", "Bash", 1000.0, 2500.0),
        ("model", None, 3500.0, 700.0),
        ("model", None, 6000.0, 500.0),
    ]
    flat = row(d)
    assert flat["agent.time_in_app_ms"] == 1800.0 and flat["agent.time_in_tools_ms"] == 2500.0
    assert flat["source"] == "proxy" and [st["kind"] for st in json.loads(flat["steps"])][1] == "tool"
    assert unlisted(d) == []
    tl = turn_timeline(TurnRecord.from_dict(d))
    phases = [(g.phase, g.start_ms, g.end_ms) for g in tl.segments]
    assert ("tool", 1000.0, 3500.0) in phases and ("app", 4200.0, 6000.0) in phases
    assert not any(g.phase == "ttft" for g in tl.segments)  # the proxy does no work between the app's calls
    span = agent_span(s.record)
    assert span is not None and span.name == "invoke_agent"
    assert [c.name for c in span.children] == ["chat m", "execute_tool Bash", "chat m", "chat m"]
    assert span.attributes["ttft.agent.time_in_app"] == 1.8 and span.attributes["ttft.agent.time_in_ttft"] == 0.0
    points = turn_points(s.record)
    assert points and all(p.value >= 0 for p in points)
    assert diagnose_turn(s.record)
    out = s.to_dict()
    assert (out["key"], out["call_indices"], out["summary"]) == ("call-0", [0, 1, 2], s.summary)
    assert s.record.agent is not None and out["agent"] == s.record.agent.to_dict()
    assert out["steps"] == [st.to_dict() for st in s.record.steps]
    json.dumps(out)


def test_ten_thousand_calls_rebuild_in_well_under_a_few_seconds() -> None:
    calls: list[tuple[TurnRecord, CallShape]] = []
    base = call(0, 0, 100, ("u",))
    for i in range(10_000):
        conv, step = i % 50, i // 50  # 50 conversations interleaved, 200 steps each, the list growing by 2
        digests = tuple(f"{conv}-{j}" for j in range(1 + 2 * step))
        shape = dataclasses.replace(
            base[1],
            call_index=i,
            start_ns=at(i * 10),
            end_ns=at(i * 10 + 5),
            message_digests=digests,
            system_digest=f"s{conv % 3}",
        )
        calls.append((base[0], shape))
    t0 = time.perf_counter()
    sessions = rebuild(calls)
    took = time.perf_counter() - t0
    assert len(sessions) == 50 and all(len(s.call_indices) == 200 for s in sessions)
    assert took < 10.0  # a sanity bound for a loaded 2-core CI machine; about 0.3 s here


_DIGEST = st.sampled_from(["a", "b", "c"])


@st.composite
def _traffic(draw: st.DrawFn) -> list[tuple[TurnRecord, CallShape]]:
    """Calls of a few conversations, interleaved, with failures, retries, hints, tools and unreadable bodies."""
    n = draw(st.integers(0, 12))
    out: list[tuple[TurnRecord, CallShape]] = []
    lists: list[tuple[str, ...]] = [()]
    t = 0.0
    for i in range(n):
        t += draw(st.floats(0, 500))
        took = draw(st.floats(1, 800))
        base = draw(st.sampled_from(lists))
        digests = base + tuple(draw(st.lists(_DIGEST, max_size=3)))
        lists.append(digests)
        asks = tuple((f"c{i}-{k}", draw(st.sampled_from(["Bash", "Read"]))) for k in range(draw(st.integers(0, 2))))
        earlier = [cid for _, sh in out for cid, _ in sh.tool_calls]
        results = tuple(draw(st.lists(st.sampled_from(earlier), max_size=2, unique=True))) if earlier else ()
        made = call(
            i,
            t,
            t + took,
            digests,
            ttft=min(took, draw(st.floats(0.5, 800))),
            status=draw(st.sampled_from([200, 200, 200, 429, 529, None])),
            system=draw(st.sampled_from(["sys", "sub"])),
            hint=draw(st.sampled_from([None, None, "h1", "h2"])),
            retry=draw(st.sampled_from([0, 0, 1])),
            asks=asks,
            results=results,
            tokens=(draw(st.integers(0, 200_000)), 0),
        )
        if draw(st.integers(0, 9)) == 0:  # failed before the proxy sent it on: a record with no stamps
            made = (recorder().finish(), made[1])
        out.append(made)
    return draw(st.permutations(out))  # the proxy may hand them over in any order


@given(_traffic())
def test_every_call_is_in_one_session_and_each_split_adds_up_to_its_span(
    calls: list[tuple[TurnRecord, CallShape]],
) -> None:
    sessions = rebuild(calls)
    assert [s.call_indices for s in rebuild(calls[::-1])] == [s.call_indices for s in sessions]  # any order
    seen = [i for s in sessions for i in s.call_indices]
    assert sorted(seen) == sorted(sh.call_index for _, sh in calls)
    for s in sessions:
        starts = [st.start_ms for st in s.record.steps]
        ends = [st.end_ms for st in s.record.steps]
        assert abs(_split_total(s) - (max(ends) - min(starts))) < 0.01
        assert s.record.agent is not None and s.record.agent.time_in_app_ms >= 0
        assert [st.call_index for st in s.record.steps if st.kind == "model"] == list(s.call_indices)
        assert s.summary.startswith("Of ") and s.summary.endswith(".")
        assert all(st.end_ms >= st.start_ms for st in s.record.steps)


def test_a_record_without_times_takes_the_shapes() -> None:
    bare = recorder().finish()  # a call that failed before the proxy could send it: no stamp at all
    shape = CallShape(call_index=7, start_ns=at(10), end_ns=at(40), api="chat.completions", status=None)
    [s] = rebuild([(bare, shape)])
    assert s.call_indices == (7,) and _kinds(s) == [("model", 0.0, 30.0)]
    assert s.record.agent is not None and s.record.agent.time_in_model_ms == 30.0
