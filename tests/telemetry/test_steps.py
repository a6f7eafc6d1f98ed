"""The typed steps and split of a tool-using turn: the JSON the log always held, read back and written the same,
and a damaged line loses only what is wrong in it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ttft.telemetry.record import TurnRecord
from ttft.telemetry.steps import (
    AgentSummary,
    ApprovalStepRecord,
    ModelStepRecord,
    ToolStepRecord,
    of_kind,
    step_count,
    step_from_dict,
    steps_from_json,
)
from ttft.telemetry.typed_read import RecordError
from ttft.telemetry.wire import WaitSplit

# A line as ttft proxy writes a session: a model step with the proxy's marks, a tool step timed by the app's span.
MODEL = {
    "kind": "model",
    "start_ms": 0.0,
    "end_ms": 160.0,
    "duration_ms": 160.0,
    "status": "ok",
    "stop_reason": "tool_calls",
    "attempts": 1,
    "ttft_ms": 150.0,
    "ttfvt_ms": None,
    "tpot_ms": None,
    "e2e_ms": 155.0,
    "wait_ms": WaitSplit(server=140.0, first_token=10.0).to_dict(),
    "server_queue_ms": None,
    "server_ttft_ms": None,
    "server_rest_ms": None,
    "server_timing_source": None,
    "tokens": {
        "input": 1200,
        "cached_input": 1000,
        "output": 12,
        "reasoning": None,
        "source": "usage",
        "cache_write_input": None,
    },
    "tool_calls": 1,
    "call_index": 3,
    "retry": False,
}
TOOL = {
    "kind": "tool",
    "start_ms": 160.0,
    "end_ms": 400.0,
    "name": "Bash",
    "server": "claude-cli",
    "call_id": "toolu_1",
    "duration_ms": 240.0,
    "status": "ok",
    "result_bytes": 0,
    "truncated": False,
    "timing": "span",
    "gap_ms": 260.0,
    "span_source": "claude_code.tool_result",
    "matched_by": "call_id",
}
WAIT = {
    "kind": "approval",
    "start_ms": 161.0,
    "end_ms": 170.0,
    "name": "Bash",
    "server": "",
    "call_id": "toolu_1",
    "duration_ms": 9.0,
    "answer": "once",
}
AGENT = {
    "time_in_model_ms": 160.0,
    "time_in_tools_ms": 240.0,
    "time_in_ttft_ms": 0.0,
    "step_count": 2,
    "model_steps": 1,
    "tool_steps": 1,
    "max_steps": 0,
    "stopped": "answer",
    "time_in_app_ms": 20.0,
}


def test_each_kind_reads_back_to_its_record_and_writes_the_same_json() -> None:
    steps = steps_from_json([MODEL, TOOL, WAIT])
    model, tool, wait = steps
    assert isinstance(model, ModelStepRecord) and isinstance(tool, ToolStepRecord)
    assert isinstance(wait, ApprovalStepRecord)
    assert model.tokens is not None and model.tokens.cached_input == 1000 and model.call_index == 3
    assert model.wait_ms is not None and model.wait_ms.server == 140.0
    assert tool.timing == "span" and tool.gap_ms == 260.0 and wait.answer == "once"
    assert [s.to_dict() for s in steps] == [MODEL, TOOL, WAIT]
    assert list(json.dumps(s.to_dict()) for s in steps) == [json.dumps(d) for d in (MODEL, TOOL, WAIT)]  # key order too
    assert of_kind(steps, ToolStepRecord) == [tool] and step_count(steps) == 2  # a wait is no step of the loop


def test_fields_only_the_proxy_fills_are_absent_from_the_chats_json() -> None:
    chat_model = {k: v for k, v in MODEL.items() if k not in ("call_index", "retry")}
    chat_tool = {k: v for k, v in TOOL.items() if k not in ("timing", "gap_ms", "span_source", "matched_by")}
    assert [s.to_dict() for s in steps_from_json([chat_model, chat_tool])] == [chat_model, chat_tool]
    chat_agent = {k: v for k, v in AGENT.items() if k != "time_in_app_ms"}
    summary = AgentSummary.from_dict(chat_agent)
    assert summary.to_dict() == chat_agent and summary.between_steps == ("ttft", 0.0)
    assert AgentSummary.from_dict(AGENT).between_steps == ("app", 20.0)


def test_a_damaged_step_keeps_what_is_right_and_an_unknown_one_is_left_out() -> None:
    odd = {**MODEL, "ttft_ms": "soon", "tokens": "many", "attempts": True}
    read = steps_from_json([odd, {"kind": "thought", "start_ms": 1.0}, "model", TOOL])
    assert [s.kind for s in read] == ["model", "tool"]
    model = read[0]
    assert isinstance(model, ModelStepRecord)
    assert model.ttft_ms is None and model.tokens is None and model.attempts == 1  # the wrong ones: defaults
    assert model.e2e_ms == 155.0 and model.call_index == 3  # the rest as written
    assert steps_from_json(None) == () and steps_from_json({"kind": "model"}) == ()
    with pytest.raises(RecordError, match=r"steps\[1\]\.kind is 'thought'"):
        step_from_dict({"kind": "thought"}, "steps[1]")
    assert AgentSummary.from_dict({**AGENT, "step_count": "two"}).step_count == 0
    with pytest.raises(RecordError):
        AgentSummary.from_dict(["not", "an", "object"])


def test_an_old_line_missing_fields_reads_with_their_defaults() -> None:
    old = {"kind": "tool", "start_ms": 1.0, "end_ms": 2.0, "name": "search", "duration_ms": 1.0, "status": "ok"}
    (tool,) = steps_from_json([old])
    assert isinstance(tool, ToolStepRecord) and tool.call_id == "" and tool.result_bytes == 0 and tool.timing is None


def _record(steps: list[dict[str, Any]], agent: dict[str, Any] | None) -> dict[str, Any]:
    from tests.telemetry.agent.test_steps import _turn

    d = _turn().to_dict()
    d["steps"], d["agent"] = steps, agent
    return d


def test_a_turn_record_carries_them_typed_and_its_line_is_unchanged() -> None:
    d = _record([MODEL, TOOL, WAIT], AGENT)
    rec = TurnRecord.from_dict(d)
    assert isinstance(rec.agent, AgentSummary) and rec.agent.time_in_app_ms == 20.0
    assert [type(s) for s in rec.steps] == [ModelStepRecord, ToolStepRecord, ApprovalStepRecord]
    assert rec.to_dict() == d
    no_agent = TurnRecord.from_dict(_record([MODEL], "not an object"))  # type: ignore[arg-type]
    assert no_agent.agent is None and "steps" not in no_agent.to_dict()


_num = st.none() | st.floats(min_value=0, max_value=1e9, allow_nan=False)
_text = st.text(max_size=12)


@given(
    start=_num,
    end=_num,
    status=st.sampled_from(["ok", "error", "cancelled"]),
    name=_text,
    call_index=st.none() | st.integers(0, 10**6),
    timing=st.none() | st.sampled_from(["gap", "span"]),
    answer=st.none() | st.sampled_from(["once", "always", "deny", "cancelled"]),
)
def test_any_steps_survive_a_trip_through_json(
    start: float | None,
    end: float | None,
    status: str,
    name: str,
    call_index: int | None,
    timing: Any,
    answer: Any,
) -> None:
    steps = (
        ModelStepRecord(start_ms=start, end_ms=end, status=status, call_index=call_index),
        ToolStepRecord(start_ms=start, end_ms=end, name=name, status=status, timing=timing),
        ApprovalStepRecord(start_ms=start, name=name, answer=answer),
    )
    line = json.loads(json.dumps([s.to_dict() for s in steps]))
    assert steps_from_json(line) == steps


def test_a_tool_using_turn_pickles_with_its_typed_steps() -> None:
    import pickle

    rec = TurnRecord.from_dict(_record([MODEL, TOOL, WAIT], AGENT))
    again = pickle.loads(pickle.dumps(rec))
    assert again == rec and isinstance(again.steps[1], ToolStepRecord) and again.agent == rec.agent
