"""A tool-using turn in the OTel file export: an ``invoke_agent`` span whose children are a ``chat`` span per
model step and an ``execute_tool`` span per tool call, each at its step's own times, and the tool and agent
duration histograms; parsed with ``opentelemetry-proto`` as a collector would. The turns are made by the real
recorder and ``join_turn`` from events at known times."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ttft.telemetry import events as ev
from ttft.telemetry.agent.steps import ToolStep, join_turn
from ttft.telemetry.export import genai, genai_instruments, genai_values
from ttft.telemetry.export.formats import export
from ttft.telemetry.record import ErrorInfo, TurnRecord

from tests.fakes.otlp_receiver import attrs, parse_metrics_json, parse_traces_json
from tests.support.turns import at, play, recorder, stream

MS = 1_000_000


def _model(sent: float, first: float, end: float, *, texts: int = 0, calls: tuple[str, ...] = ()) -> TurnRecord:
    """One model step: sent at ``sent``, its first token at ``first``, then ``texts`` chunks 10 ms apart."""
    r = recorder()
    r.feed(ev.AttemptSent(at(sent), 1))
    r.feed(ev.HeadersReceived(at(sent + 1), 1, 200))
    for i, name in enumerate(calls):
        r.feed(ev.ToolCallDelta(at(first), name, "{}", index=i, call_id=f"call_{i}"))
    for k in range(texts):
        r.feed(ev.TextDelta(at(first + 10 * k), "word", 1))
    r.feed(ev.Usage(at(end - 1), input=100, cached_input=0, output=max(texts, 1), reasoning=0))
    r.feed(ev.Finished(at(end), "tool_calls" if calls else "stop"))
    return r.finish()


def _turn() -> dict[str, Any]:
    """Model 0-160 ms (two calls), search 165-415 ms (ok) beside boom 165-200 ms (error), model 420-560 ms."""
    models = [_model(0, 150, 160, calls=("search", "boom")), _model(420, 520, 560, texts=4)]
    tools = [
        ToolStep("search", "web", at(165), at(415), "ok", 1200, False, "call_0"),
        ToolStep("boom", "web", at(165), at(200), "error", 20, False, "call_1"),
    ]
    return join_turn(models, tools, stopped="answer", max_steps=10).to_dict()


def _denied() -> dict[str, Any]:
    models = [_model(0, 50, 60, calls=("rm",))]
    tools = [ToolStep("rm", "shell", at(61), at(61), "denied", call_id="call_0")]
    err = ErrorInfo("tool_not_allowed", "the model called rm, which is not allowed")
    return join_turn(models, tools, stopped="denied", max_steps=10, error=err).to_dict()


def _spans(records: list[dict[str, Any]], tmp_path: Path) -> list[Any]:
    out = tmp_path / "t.otel.json"
    assert export(records, "otel", out) == len(records)
    return list(parse_traces_json(out.read_text()).resource_spans[0].scope_spans[0].spans)


def _metrics(records: list[dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    out = tmp_path / "m.json"
    assert export(records, "otel-metrics", out) == len(records)
    (sm,) = parse_metrics_json(out.read_text()).resource_metrics[0].scope_metrics
    return {m.name: m for m in sm.metrics}


def _rel(span: Any, root: Any) -> tuple[float, float]:
    return (span.start_time_unix_nano - root.start_time_unix_nano) / MS, (
        span.end_time_unix_nano - root.start_time_unix_nano
    ) / MS


def test_a_tool_using_turn_is_an_agent_span_with_a_child_per_step(tmp_path: Path) -> None:
    rec = _turn()
    spans = _spans([rec], tmp_path)
    (root,) = [s for s in spans if not s.parent_span_id]
    assert root.name == "invoke_agent" and root.kind == root.SPAN_KIND_INTERNAL  # the loop runs in ttft
    assert root.start_time_unix_nano == genai_values.unix_ns(rec["sent_at"])
    assert _rel(root, root) == (0.0, rec["metrics"]["total_ms"]) == (0.0, 560.0)
    a = attrs(root.attributes)
    assert a["gen_ai.operation.name"] == "invoke_agent" and a["gen_ai.provider.name"] == "openai"
    assert a["gen_ai.request.model"] == "m" and a["openinference.span.kind"] == "AGENT"
    assert a["gen_ai.usage.input_tokens"] == 200 and a["gen_ai.usage.output_tokens"] == 5  # summed over the steps
    assert a["ttft.agent.time_in_tools"] == pytest.approx(0.25) and a["ttft.agent.step_count"] == 4
    assert a["ttft.agent.stopped"] == "answer" and a["ttft.diagnosis"] == rec["diagnosis"]
    assert "error.type" not in a and not root.status.code
    steps = [s for s in spans if s.parent_span_id == root.span_id]
    # one child per step, in the record's order, each at the step's own times
    assert [s.name for s in steps] == ["chat m", "execute_tool search", "execute_tool boom", "chat m"]
    assert [_rel(s, root) for s in steps] == [(st["start_ms"], st["end_ms"]) for st in rec["steps"]]
    assert [_rel(s, root) for s in steps] == [(0.0, 160.0), (165.0, 415.0), (165.0, 200.0), (420.0, 560.0)]
    assert all(s.trace_id == root.trace_id for s in spans) and len({s.span_id for s in spans}) == len(spans)
    first, search, boom, second = steps
    assert first.kind == second.kind == first.SPAN_KIND_CLIENT
    assert search.kind == boom.kind == search.SPAN_KIND_INTERNAL
    # a model step is a chat span of its own: its TTFT from its own send, its usage, its phases
    c = attrs(second.attributes)
    assert c["gen_ai.operation.name"] == "chat" and c["gen_ai.response.time_to_first_chunk"] == pytest.approx(0.1)
    assert c["gen_ai.usage.input_tokens"] == 100 and c["gen_ai.usage.output_tokens"] == 4
    assert c["gen_ai.response.finish_reasons"] == ["stop"] and c["ttft.step_index"] == 3
    assert attrs(first.attributes)["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert attrs(first.attributes)["ttft.step.tool_calls"] == 2
    events = {e.name: (e.time_unix_nano - root.start_time_unix_nano) / MS for e in second.events}
    assert events == {"gen_ai.first_token": 520.0, "gen_ai.first_visible_token": 520.0}
    phases = {s.name: _rel(s, root) for s in spans if s.parent_span_id == second.span_id}
    assert phases == {"wait server": (420.0, 421.0), "wait first_token": (421.0, 520.0), "streaming": (520.0, 550.0)}
    # a tool call: the conventions' names, its call id, and ttft's own figures
    t = attrs(search.attributes)
    assert t["gen_ai.operation.name"] == "execute_tool" and t["gen_ai.tool.name"] == "search"
    assert t["gen_ai.tool.call.id"] == "call_0" and t["ttft.tool.server"] == "web"
    assert t["ttft.tool.status"] == "ok" and t["ttft.tool.result_bytes"] == 1200 and t["ttft.tool.truncated"] is False
    assert "error.type" not in t and not search.status.code
    assert attrs(boom.attributes)["error.type"] == "tool_error"
    assert boom.status.code == boom.status.STATUS_CODE_ERROR and "tool failed" in boom.status.message


def test_a_denied_call_marks_the_tool_and_the_turn_failed(tmp_path: Path) -> None:
    rec = _denied()
    spans = _spans([rec], tmp_path)
    (root,) = [s for s in spans if not s.parent_span_id]
    (tool,) = [s for s in spans if s.name == "execute_tool rm"]
    assert tool.parent_span_id == root.span_id and tool.status.code == tool.status.STATUS_CODE_ERROR
    assert attrs(tool.attributes)["error.type"] == "tool_not_allowed" and "--allow-tool" in tool.status.message
    assert root.status.code == root.status.STATUS_CODE_ERROR and attrs(root.attributes)["error.type"] == (
        "tool_not_allowed"
    )
    (chat,) = [s for s in spans if s.name == "chat m"]
    assert not chat.status.code and "error.type" not in attrs(chat.attributes)  # the model step itself was fine


def test_the_tool_and_agent_histograms_and_each_model_step_as_an_inference(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(genai.OPT_IN_ENV, raising=False)
    metrics = _metrics([_turn(), _denied()], tmp_path, monkeypatch)
    tool = metrics["gen_ai.execute_tool.duration"]
    assert (tool.unit, tool.histogram.aggregation_temporality) == ("s", 2)
    by_tool = {attrs(p.attributes)["gen_ai.tool.name"]: p for p in tool.histogram.data_points}
    assert set(by_tool) == {"search", "boom", "rm"}
    search = by_tool["search"]
    assert attrs(search.attributes) == {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}
    assert (search.count, search.sum) == (1, pytest.approx(0.25))
    assert list(search.explicit_bounds) == list(genai_instruments.DURATION_BOUNDS)
    assert list(search.bucket_counts)[genai_instruments.DURATION_BOUNDS.index(0.32)] == 1  # 0.25 s: in (0.16, 0.32]
    assert attrs(by_tool["boom"].attributes)["error.type"] == "tool_error" and by_tool["boom"].sum == pytest.approx(
        0.035
    )
    assert attrs(by_tool["rm"].attributes)["error.type"] == "tool_not_allowed" and by_tool["rm"].sum == 0.0
    agent = {
        attrs(p.attributes).get("error.type"): p for p in metrics["gen_ai.invoke_agent.duration"].histogram.data_points
    }
    assert agent[None].count == 1 and agent[None].sum == pytest.approx(0.56)
    assert attrs(agent[None].attributes) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "m",
    }
    assert agent["tool_not_allowed"].sum == pytest.approx(0.061)  # the turn ends at its last step, the refusal
    assert list(agent[None].explicit_bounds) == list(genai_instruments.AGENT_DURATION_BOUNDS)
    # each model step is one inference: its own duration and TTFT, its chunk gaps (never the tool's gap)
    (dur,) = metrics["gen_ai.client.inference.duration"].histogram.data_points
    assert (dur.count, dur.sum) == (3, pytest.approx(0.16 + 0.14 + 0.06))
    (ttfc,) = metrics["gen_ai.client.inference.time_to_first_chunk"].histogram.data_points
    assert (ttfc.count, ttfc.sum) == (3, pytest.approx(0.15 + 0.1 + 0.05))
    (gaps,) = metrics["gen_ai.client.inference.time_per_output_chunk"].histogram.data_points
    # step 1's two call chunks (together), step 2's 4 text chunks 10 ms apart: never the 360 ms between steps
    assert (gaps.count, gaps.sum, gaps.max) == (4, pytest.approx(0.03), pytest.approx(0.01))
    (used,) = metrics["gen_ai.client.inference.usage.input_tokens"].sum.data_points
    assert used.as_int == 300
    (per_call,) = metrics["gen_ai.client.inference.operation.input_tokens"].histogram.data_points
    assert (per_call.count, per_call.sum) == (3, 300.0)


def test_the_1_44_names_count_each_model_step_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(genai.OPT_IN_ENV, "gen_ai/dup")
    metrics = _metrics([_turn()], tmp_path, monkeypatch)
    (old,) = metrics["gen_ai.client.operation.duration"].histogram.data_points
    assert (old.count, old.sum) == (2, pytest.approx(0.3))
    usage = {
        attrs(p.attributes)["gen_ai.token.type"]: p for p in metrics["gen_ai.client.token.usage"].histogram.data_points
    }
    assert (usage["input"].count, usage["input"].sum) == (2, 200.0)
    assert metrics["gen_ai.execute_tool.duration"].histogram.data_points  # one name in both versions


def test_message_text_goes_on_the_agent_span_only_when_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rec = _turn()
    spans = _spans([rec], tmp_path)
    assert not any("gen_ai.output.messages" in attrs(s.attributes) for s in spans)
    monkeypatch.setenv(genai.CAPTURE_CONTENT_ENV, "true")
    spans = _spans([rec], tmp_path)
    (root,) = [s for s in spans if not s.parent_span_id]
    out = json.loads(attrs(root.attributes)["gen_ai.output.messages"])
    assert out[0]["parts"][-1]["content"] == rec["answer"] == "wordwordwordword"


def test_a_turn_without_steps_keeps_its_single_chat_span_and_its_metrics(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(genai.OPT_IN_ENV, raising=False)
    plain = play(stream(first_ms=200, visible=3))
    assert "steps" not in plain and "agent" not in plain
    spans = _spans([plain], tmp_path)
    (root,) = [s for s in spans if not s.parent_span_id]
    assert root.name == "chat m" and root.kind == root.SPAN_KIND_CLIENT
    assert all(s.parent_span_id == root.span_id and s.kind == s.SPAN_KIND_INTERNAL for s in spans if s is not root)
    ids = [int(s.span_id.hex(), 16) - int(root.span_id.hex(), 16) for s in spans]
    assert ids == list(range(len(spans)))  # children numbered after the root, as ever (stored traces keep them)
    assert "ttft.step_index" not in attrs(root.attributes)
    names = set(_metrics([plain], tmp_path, monkeypatch))
    assert not names & {"gen_ai.execute_tool.duration", "gen_ai.invoke_agent.duration"}


def test_odd_steps_in_a_log_line_are_left_out_not_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rec = _turn()
    rec["steps"] = [
        {**rec["steps"][0], "start_ms": "soon", "end_ms": None},  # no time: no span, no inference
        {**rec["steps"][1], "name": "se\x1b[2Jarch", "status": "exploded", "duration_ms": float("nan")},
        {**rec["steps"][3], "start_ms": 1e30},  # past OTLP's range, and after its own end
        {"kind": "model", "tokens": "many", "start_ms": 420.0, "end_ms": 560.0, "ttft_ms": True},
    ]
    spans = _spans([rec], tmp_path)
    (root,) = [s for s in spans if not s.parent_span_id]
    children = [s for s in spans if s.parent_span_id == root.span_id]
    assert [s.name for s in children] == ["execute_tool se\ufffd[2Jarch", "chat m"]
    tool = attrs(children[0].attributes)
    assert "error.type" not in tool and tool["ttft.tool.status"] == "exploded" and not children[0].status.code
    chat = attrs(children[1].attributes)
    assert "gen_ai.usage.input_tokens" not in chat and "gen_ai.response.time_to_first_chunk" not in chat
    metrics = _metrics([rec], tmp_path, monkeypatch)
    assert "gen_ai.execute_tool.duration" not in metrics  # its duration is no number
    (dur,) = metrics["gen_ai.client.inference.duration"].histogram.data_points
    assert dur.count == 1  # the one model step whose times make a duration


def test_the_chats_wait_for_an_answer_has_no_span_but_its_time_is_on_the_agent_span(tmp_path: Path) -> None:
    from ttft.telemetry.agent.steps import ApprovalStep

    models = [_model(0, 50, 60, calls=("search",)), _model(600, 650, 700, texts=2)]
    tools = [ToolStep("search", "web", at(400), at(590), "ok", 10, False, "call_0")]
    asked = [ApprovalStep("search", "web", at(61), at(399), "once", "call_0")]
    rec = join_turn(models, tools, stopped="answer", max_steps=10, approvals=asked).to_dict()
    spans = _spans([rec], tmp_path)
    (root,) = [s for s in spans if not s.parent_span_id]
    assert [s.name for s in spans if s.parent_span_id == root.span_id] == ["chat m", "execute_tool search", "chat m"]
    a = attrs(root.attributes)
    assert a["ttft.agent.time_in_approval"] == pytest.approx(0.338) and a["ttft.agent.approval_steps"] == 1
    (plain,) = [s for s in _spans([_turn()], tmp_path) if not s.parent_span_id]  # ask's turn: nobody was asked
    assert plain.name == "invoke_agent" and "ttft.agent.time_in_approval" not in attrs(plain.attributes)
