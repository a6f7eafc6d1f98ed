"""The step table's rows: a tool-using turn's steps, a turn without tools as its one model step, and odd
log lines (a step of the wrong shape, values of the wrong type) as empty cells, never an exception."""

from __future__ import annotations

from ttft.telemetry import events as ev
from ttft.telemetry.agent.steps import ApprovalStep, ToolStep, join_turn
from ttft.telemetry.export import step_table

from tests.support.turns import at, play, recorder, stream


def _tool_turn() -> dict:
    r = recorder()
    for e in (ev.AttemptSent(at(0), 1), ev.ToolCallDelta(at(100), "search", "{}", index=0, call_id="c1")):
        r.feed(e)
    r.feed(ev.Finished(at(110), "tool_calls"))
    first = r.finish()
    r = recorder()
    for e in (ev.AttemptSent(at(300), 1), ev.TextDelta(at(350), "noon", 1), ev.Finished(at(360), "stop")):
        r.feed(e)
    tools = [ToolStep("search", "web", at(112), at(295), "ok", 42, True, "c1")]
    return join_turn([first, r.finish()], tools, stopped="answer", max_steps=5).to_dict()


def test_a_row_per_step_keyed_by_its_turn() -> None:
    rows = list(step_table.rows(_tool_turn()))
    assert [tuple(r) for r in rows] == [step_table.HEADER] * 3
    assert [(r["step_index"], r["kind"], r["start_ms"], r["end_ms"]) for r in rows] == [
        (0, "model", 0.0, 110.0),
        (1, "tool", 112.0, 295.0),
        (2, "model", 300.0, 360.0),
    ]
    model, tool, answer = rows
    assert (model["ttft_ms"], model["tool_calls"], model["duration_ms"], model["name"]) == (100.0, 1, 110.0, None)
    assert (tool["name"], tool["server"], tool["call_id"], tool["result_bytes"], tool["truncated"]) == (
        "search",
        "web",
        "c1",
        42,
        True,
    )
    assert tool["duration_ms"] == 183.0 and tool["ttft_ms"] is None and tool["tokens.output"] is None
    assert answer["ttft_ms"] == 50.0 and answer["stop_reason"] == "stop" and answer["tokens.source"] == "estimated"
    assert {(r["session_id"], r["turn_index"], r["model"], r["turn_status"], r["step_count"]) for r in rows} == {
        ("test", 0, "m", "ok", 3)
    }


def test_a_turn_without_tools_is_one_model_step() -> None:
    rec = play(stream(first_ms=200, visible=3))
    (row,) = step_table.rows(rec)
    assert (row["kind"], row["step_index"], row["step_count"], row["status"]) == ("model", 0, 1, "ok")
    assert (row["start_ms"], row["end_ms"], row["duration_ms"]) == (
        0.0,
        rec["events_ms"]["end"],
        rec["events_ms"]["end"],
    )
    assert row["ttft_ms"] == 200.0 and row["tokens.input"] == 12 and row["wait_ms.server"] == 100.0
    assert row["agent.stopped"] is None and row["tool_calls"] == 0
    never_sent = play([ev.Failed(at(0), "connect", "refused", None)])
    (row,) = step_table.rows(never_sent)
    assert row["status"] == "error" and row["ttft_ms"] is None


def test_odd_steps_become_empty_cells() -> None:
    rec = _tool_turn()
    rec["steps"] = ["not a step", {"kind": "tool", "start_ms": "x", "end_ms": 5, "result_bytes": 1e30, "truncated": 1}]
    rec["turn_index"] = "seven"
    odd, tool = step_table.rows(rec)
    assert odd["kind"] is None and odd["step_index"] == 0 and odd["turn_index"] is None
    assert (tool["start_ms"], tool["duration_ms"], tool["result_bytes"], tool["truncated"]) == (None, None, None, None)


def test_the_chats_wait_for_an_answer_is_a_row_of_its_own_with_the_answer() -> None:
    base = _tool_turn()
    r = recorder()
    for e in (ev.AttemptSent(at(0), 1), ev.ToolCallDelta(at(100), "search", "{}", index=0, call_id="c1")):
        r.feed(e)
    r.feed(ev.Finished(at(110), "tool_calls"))
    first = r.finish()
    r = recorder()
    for e in (ev.AttemptSent(at(600), 1), ev.TextDelta(at(650), "noon", 1), ev.Finished(at(660), "stop")):
        r.feed(e)
    tools = [ToolStep("search", "web", at(412), at(595), "ok", 42, False, "c1")]
    asked = [ApprovalStep("search", "web", at(111), at(411), "once", "c1")]
    rec = join_turn([first, r.finish()], tools, stopped="answer", max_steps=5, approvals=asked).to_dict()
    rows = list(step_table.rows(rec))
    assert [r["kind"] for r in rows] == ["model", "approval", "tool", "model"]
    approval = rows[1]
    assert (approval["answer"], approval["name"], approval["call_id"], approval["duration_ms"]) == (
        "once",
        "search",
        "c1",
        300.0,
    )
    assert all(r["answer"] is None for r in rows if r["kind"] != "approval") and len(list(step_table.rows(base))) == 3
