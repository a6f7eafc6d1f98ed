"""A tool-using turn joined into one record: steps in order on the turn's clock, the split, the diagnosis,
and the JSON that reads back (a turn without tools keeps its old form)."""

from __future__ import annotations

import json

from ttft.telemetry import events as ev
from ttft.telemetry.agent.steps import ToolStep, diagnose, join_turn, split
from ttft.telemetry.record import TurnRecord
from ttft.telemetry.steps import AgentSummary, ApprovalStepRecord, ModelStepRecord, ToolStepRecord

from tests.support.turns import at, recorder


def _model(sent: float, first: float, end: float, *, text: str = "", call: str = "") -> TurnRecord:
    r = recorder()
    r.feed(ev.AttemptSent(at(sent)))
    r.feed(ev.HeadersReceived(at(sent + 1)))
    if call:
        r.feed(ev.ToolCallDelta(at(first), call, "{}", index=0, call_id="c1"))
    if text:
        r.feed(ev.TextDelta(at(first), text))
    r.feed(ev.Finished(at(end), "tool_calls" if call else "stop"))
    return r.finish()


def _turn() -> TurnRecord:
    models = [_model(0, 150, 160, call="search"), _model(420, 520, 530, text="noon")]
    tools = [ToolStep("search", "web", at(165), at(415), "ok", 1200, False, "c1")]
    return join_turn(models, tools, stopped="answer", max_steps=10)


def test_steps_in_order_on_the_turns_clock_with_their_own_figures() -> None:
    rec = _turn()
    kinds = [(s.kind, s.start_ms, s.end_ms) for s in rec.steps]
    assert kinds == [("model", 0.0, 160.0), ("tool", 165.0, 415.0), ("model", 420.0, 530.0)]
    first, tool, second = rec.steps
    assert isinstance(first, ModelStepRecord) and isinstance(second, ModelStepRecord)
    assert first.ttft_ms == 150.0 and second.ttft_ms == 100.0 and first.tool_calls == 1
    assert isinstance(tool, ToolStepRecord)
    assert tool.to_dict() == {
        "kind": "tool",
        "start_ms": 165.0,
        "end_ms": 415.0,
        "name": "search",
        "server": "web",
        "call_id": "c1",
        "duration_ms": 250.0,
        "status": "ok",
        "result_bytes": 1200,
        "truncated": False,
    }
    # top-level figures keep their meaning: TTFT the first step's, E2E to the final answer
    assert rec.metrics.ttft_ms == 150.0 and rec.metrics.e2e_ms == 520.0 and rec.metrics.total_ms == 530.0
    assert rec.metrics.ttfvt_ms == 150.0 and rec.answer == "noon" and rec.tool_calls[0]["name"] == "search"
    assert rec.agent is not None and rec.agent.to_dict() == {
        "time_in_model_ms": 270.0,
        "time_in_tools_ms": 250.0,
        "time_in_ttft_ms": 10.0,
        "step_count": 3,
        "model_steps": 2,
        "tool_steps": 1,
        "max_steps": 10,
        "stopped": "answer",
    }
    assert rec.diagnosis.startswith("270 ms of 530 ms went to the model's own steps")


def test_the_diagnosis_names_the_dominant_tool_and_its_server() -> None:
    models = [_model(0, 300, 400, call="search"), _model(3300, 3900, 4100, text="x")]
    tools = [ToolStep("search", "web", at(400), at(3300), "ok")]
    in_model, in_tools, own, _ = split(models, tools)
    agent = AgentSummary(
        time_in_model_ms=in_model, time_in_tools_ms=in_tools, time_in_ttft_ms=own, step_count=3, max_steps=10
    )
    text = diagnose(agent, tools, 4100.0)
    assert text == "2.9 of 4.1 s went to the tool `search` on server `web`; the model's own steps took 1.2 s."


def test_parallel_tools_count_once_and_the_gaps_are_ttfts_own() -> None:
    models = [_model(0, 10, 20, call="a"), _model(130, 140, 150, text="x")]
    tools = [ToolStep("a", "", at(25), at(125), "ok"), ToolStep("b", "", at(30), at(120), "ok")]
    assert split(models, tools) == (40.0, 100.0, 10.0, None)


def test_the_json_reads_back_and_a_turn_without_tools_keeps_its_form() -> None:
    rec = _turn()
    d = rec.to_dict()
    assert d["steps"] == [s.to_dict() for s in rec.steps] and d["agent"]["step_count"] == 3
    assert [s["kind"] for s in d["steps"]] == ["model", "tool", "model"] and "call_index" not in d["steps"][0]
    again = TurnRecord.from_dict(d)
    assert again.steps == rec.steps and again.agent == rec.agent
    assert again.to_dict() == d
    plain = _model(0, 10, 20, text="hi").to_dict()
    assert "steps" not in plain and "agent" not in plain
    assert TurnRecord.from_dict(plain).agent is None  # an old line reads as before


def test_the_flat_table_has_the_split_and_the_steps() -> None:
    from ttft.telemetry.export.table import row, unlisted

    d = _turn().to_dict()
    r = row(d)
    assert r["agent.time_in_tools_ms"] == 250.0 and r["agent.step_count"] == 3 and r["agent.stopped"] == "answer"
    assert [s["kind"] for s in json.loads(r["steps"])] == ["model", "tool", "model"]
    assert unlisted(d) == []
    plain = row(_model(0, 10, 20, text="hi").to_dict())
    assert plain["agent.step_count"] is None and plain["steps"] is None


def test_a_wait_for_an_answer_is_an_approval_step_and_not_ttfts_own_time() -> None:
    from ttft.telemetry.agent.steps import ApprovalStep

    models = [_model(0, 150, 160, call="search"), _model(2420, 2520, 2530, text="noon")]
    asked = [ApprovalStep("search", "web", at(162), at(2162), "once", "c1")]
    tools = [ToolStep("search", "web", at(2165), at(2415), "ok", 1200, False, "c1")]
    rec = join_turn(models, tools, stopped="answer", max_steps=10, approvals=asked)
    assert [s.kind for s in rec.steps] == ["model", "approval", "tool", "model"]
    assert rec.steps[1].to_dict() == {
        "kind": "approval",
        "start_ms": 162.0,
        "end_ms": 2162.0,
        "name": "search",
        "server": "web",
        "call_id": "c1",
        "duration_ms": 2000.0,
        "answer": "once",
    }
    assert rec.steps[0].duration_ms == 160.0  # a model step's own span
    agent = rec.agent
    assert agent is not None
    assert agent.time_in_approval_ms == 2000.0 and agent.approval_steps == 1
    assert agent.time_in_ttft_ms == 10.0 and agent.step_count == 3  # approvals are not steps of the loop
    assert "Waiting for your approval took 2.0 s." in rec.diagnosis
    from ttft.telemetry.export.table import row, unlisted

    d = rec.to_dict()
    assert unlisted(d) == [] and row(d)["agent.approval_steps"] == 1


def test_the_steps_of_a_turn_in_flight_end_now() -> None:
    from ttft.telemetry.agent.steps import ApprovalStep, live_steps

    r = recorder()
    r.feed(ev.AttemptSent(at(0)))
    r.feed(ev.ToolCallDelta(at(100), "search", "{}", index=0, call_id="c1"))
    r.feed(ev.Finished(at(110), "tool_calls"))
    waiting = recorder()
    assert live_steps([waiting], [], [], [], at(5)) == ()  # nothing sent yet
    running = ToolStep("search", "web", at(300), at(300), "ok", call_id="c1")
    asked = ApprovalStep("search", "web", at(120), at(290), "once", "c1")
    steps = live_steps([r], [], [asked], [running], at(500))
    assert [(s.kind, s.start_ms, s.end_ms) for s in steps] == [
        ("model", 0.0, 110.0),
        ("approval", 120.0, 290.0),
        ("tool", 300.0, 500.0),
    ]
    model, _, tool = steps
    assert isinstance(model, ModelStepRecord) and model.ttft_ms == 100.0
    assert isinstance(tool, ToolStepRecord) and tool.status == "running"
    pending = live_steps([r], [], [], [], at(400), ApprovalStep("search", "web", at(120), at(120), "cancelled"))
    assert isinstance(pending[-1], ApprovalStepRecord) and pending[-1].answer is None and pending[-1].end_ms == 400.0
