"""A proxied call's session log line read back by another process (``ttft proxy --watch``): its record
and shape on the wall clock, so the sessions rebuilt from the log are the proxy's own; an older line
without the shape, another source's line and hostile field types are each handled."""

from __future__ import annotations

import dataclasses
from datetime import datetime

import pytest
from ttft.telemetry.log.json_line import encode_line
from ttft.telemetry.log.turns import parse_line
from ttft.telemetry.proxy.logged import LOG_KEY, ended_at, read_call, shape_fields
from ttft.telemetry.proxy.sessions import rebuild
from ttft.telemetry.proxy.shape import CallShape
from ttft.telemetry.record import TurnRecord
from ttft.telemetry.steps import ModelStepRecord, of_kind

from tests.telemetry.proxy.test_sessions import call


def logged(rec: TurnRecord, shape: CallShape, *, with_shape: bool = True) -> dict:
    """The call as its log line reads back (the proxy puts the shape in ``extra``, the log writes JSON)."""
    extra = {**rec.extra, LOG_KEY: shape_fields(shape, rec.wall_offset_ns)} if with_shape else rec.extra
    line = parse_line(encode_line(dataclasses.replace(rec, extra=extra).to_dict()))
    assert isinstance(line, dict) and line
    return line


# One process's wall clock less its monotonic one, for every call: each record reads its own when it begins,
# and a VM's slewed wall clock moves that by 0.5 ms steps, which is the watch's tolerance, not this test's.
WALL_OFFSET_NS = 1_765_000_000 * 10**9


def agent_run() -> list[tuple[TurnRecord, CallShape]]:
    """An agent's calls: a tool asked for and its result carried 2 s later, a sub-agent beside it, a retry."""
    calls = [
        call(0, 0, 300, ("u1",), asks=(("t1", "Bash"),), hint="S"),
        call(1, 100, 400, ("v1",), system="sub", hint="S"),
        call(2, 2300, 2600, ("u1", "a1", "r1"), results=("t1",), hint="S", status=429),
        call(3, 2700, 3000, ("u1", "a1", "r1"), results=("t1",), hint="S", retry=1),
        call(4, 3100, 3400, ("u1", "a1", "r1", "a2", "u2"), hint="S", tokens=(4000, 3000)),
    ]
    return [(dataclasses.replace(rec, wall_offset_ns=WALL_OFFSET_NS), shape) for rec, shape in calls]


def test_the_sessions_rebuilt_from_the_log_are_the_proxys_own() -> None:
    calls = agent_run()
    back = [read_call(logged(rec, shape)) for rec, shape in calls]
    assert all(b is not None and b[2] for b in back)
    mine, theirs = rebuild(calls), rebuild([(b[0], b[1]) for b in back if b is not None])
    assert [(s.key, s.call_indices) for s in theirs] == [(s.key, s.call_indices) for s in mine]
    assert [s.summary for s in theirs] == [s.summary for s in mine]
    for a, b in zip(mine, theirs, strict=True):
        assert a.record.agent is not None and b.record.agent is not None
        for k in ("time_in_model_ms", "time_in_tools_ms", "time_in_app_ms"):  # µs in the log: to the µs
            assert getattr(b.record.agent, k) == pytest.approx(getattr(a.record.agent, k), abs=0.002), k
        assert [st.kind for st in b.record.steps] == [st.kind for st in a.record.steps]
    assert [st.retry for st in of_kind(theirs[0].record.steps, ModelStepRecord)] == [False, False, True, False]


def test_a_call_read_back_keeps_its_figures_and_shape() -> None:
    rec, shape = call(0, 0, 300, ("u1", "a1"), asks=(("t9", "Read"),), hint="S", response_id="r-1")
    got = read_call(logged(rec, shape))
    assert got is not None
    back, s, had = got
    assert had and back.metrics.ttft_ms == pytest.approx(rec.metrics.ttft_ms)
    assert (s.call_index, s.api, s.client, s.status, s.session_hint) == (0, "messages", rec.client, 200, "S")
    assert s.message_digests == ("u1", "a1") and s.tool_calls == (("t9", "Read"),) and s.response_id == "r-1"
    # on the wall clock: the record's send and the shape's start as the proxy had them, a few µs at most apart
    assert rec.wall_offset_ns is not None and back.timestamps.sent is not None
    assert abs(back.timestamps.sent - (rec.timestamps.sent or 0) - rec.wall_offset_ns) < 2_000
    assert abs(s.start_ns - (shape.start_ns + rec.wall_offset_ns)) < 2_000
    assert back.timestamps.sent - s.start_ns == pytest.approx(500_000, abs=2_000)  # read 0.5 ms before the send
    assert abs((ended_at(s) - datetime.fromtimestamp((shape.end_ns + rec.wall_offset_ns) / 1e9)).total_seconds()) < 1e-3


def test_an_older_line_without_the_shape_is_still_a_call_of_its_own() -> None:
    rec, shape = call(0, 0, 300, ("u1",))
    got = read_call(logged(rec, shape, with_shape=False))
    assert got is not None
    back, s, had = got
    assert not had and s.message_digests == () and s.status == 200
    assert s.start_ns == back.timestamps.sent and s.end_ns == back.timestamps.end


def test_a_line_of_another_source_is_no_call() -> None:
    rec, shape = call(0, 0, 300, ("u1",))
    line = logged(rec, shape)
    line.pop("source")
    assert read_call(line) is None


@pytest.mark.parametrize(
    "hostile",
    [
        {"message_digests": "abc", "tool_calls": [["a"], [1, 2], "x"], "retry_count": -3, "status": "200"},
        {"start_us": "soon", "end_us": True, "session_hint": 7, "tool_results": [None, 3]},
        {"message_digests": ["x" * 10_000] * 3, "response_id": ["r"]},
    ],
)
def test_fields_of_the_wrong_type_read_as_absent(hostile: dict) -> None:
    rec, shape = call(0, 0, 300, ("u1",))
    line = logged(rec, shape)
    line["extra"][LOG_KEY].update(hostile)
    got = read_call(line)
    assert got is not None
    _, s, _ = got
    assert s.retry_count >= 0 and s.status in (None, 200)
    assert all(isinstance(d, str) and len(d) <= 256 for d in s.message_digests + s.tool_results)
    assert all(len(p) == 2 for p in s.tool_calls) and s.end_ns >= s.start_ns
    rebuild([(got[0], s)])  # and the rebuild takes it


def test_a_calls_trace_is_read_back_from_its_record() -> None:
    """The traceparent's ids ride in the record's own ``extra`` (``--otlp``'s join), not in the shape's: a
    watch reads them there, so its sessions list the same traces; anything not hex of the right length is
    no trace."""
    trace, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    rec, shape = call(0, 0, 300, ("u1",), hint="S")
    rec = dataclasses.replace(rec, extra={**rec.extra, "trace_id": trace, "parent_span_id": parent})
    shape = dataclasses.replace(shape, trace_id=trace, parent_span_id=parent)
    got = read_call(logged(rec, shape))
    assert got is not None
    _, s, _ = got
    assert (s.trace_id, s.parent_span_id) == (trace, parent)
    assert [x.trace_ids for x in rebuild([(got[0], s)])] == [x.trace_ids for x in rebuild([(rec, shape)])] == [(trace,)]
    for bad in ("4BF92F3577B34DA6A3CE929D0E0E4736", trace[:-1], 7, ["x"], "g" * 32):
        line = logged(rec, shape)
        line["extra"]["trace_id"] = bad
        again = read_call(line)
        assert again is not None and again[1].trace_id == ""
