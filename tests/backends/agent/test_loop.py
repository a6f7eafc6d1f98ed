"""The agent loop against a loopback model: parallel calls, error results, the step limit, consent,
cancellation (every step that arrived is kept), and capped results."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable

import pytest
from ttft.backends.agent.consent import Consent
from ttft.backends.agent.host import ToolResult, cap
from ttft.backends.agent.loop import AgentListener, AgentSettings, AgentTurn, supports_tools
from ttft.backends.base import build_request
from ttft.backends.providers.registry import create_backend
from ttft.telemetry.record import TurnRecord

from tests.fakes.agent_server import AgentServer, Call, Step
from tests.support.tool_host import FakeHost, FakeTool


def _run(
    script: list[Step],
    host: FakeHost,
    *,
    consent: Consent | None = None,
    max_steps: int = 10,
    during: Callable[[AgentTurn, asyncio.Task[TurnRecord]], object] | None = None,
) -> tuple[AgentTurn, AgentServer]:
    with AgentServer(script) as srv:
        backend = create_backend("compat:m", base_url=srv.base_url, lean=True)
        agent = AgentTurn(
            backend,
            build_request("go"),
            host,
            consent or Consent(allow_all=True),
            session_id="s",
            turn_index=0,
            settings=AgentSettings(max_steps=max_steps),
        )

        async def go() -> None:
            task = asyncio.ensure_future(agent.run())
            try:
                if during is not None:
                    await during(agent, task)  # type: ignore[misc]
                await task
            except asyncio.CancelledError:
                pass
            finally:
                await backend.aclose()

        asyncio.run(go())
        return agent, srv


def test_parallel_calls_run_at_once_and_count_once_in_the_split() -> None:
    # 1 s each: the diagnosis names the tools only when they outweigh the model's steps, and the suite's first
    # turn spent 400 ms in its model steps on a loaded machine (cold imports), more than 0.3 s tools took
    host = FakeHost(FakeTool("a", delay_s=1.0), FakeTool("b", delay_s=1.0))
    agent, _ = _run([Step(calls=(Call("a"), Call("b"))), Step(text="done")], host)
    rec = agent.result.record
    assert rec is not None and rec.status == "ok"
    assert host.max_in_flight == 2
    tools = [s for s in rec.steps if s.kind == "tool"]
    assert len(tools) == 2 and all(s.duration_ms >= 250 for s in tools)
    split = rec.agent
    assert split is not None and split.step_count == 4 and split.stopped == "answer"
    assert 250 <= split.time_in_tools_ms < sum(s.duration_ms for s in tools)  # overlap counted once
    total = rec.metrics.total_ms
    assert total is not None
    in_parts = split.time_in_model_ms + split.time_in_tools_ms + split.time_in_ttft_ms
    assert in_parts == pytest.approx(total, abs=1.0)
    assert "tool `a` on server `fake`" in rec.diagnosis or "tool `b` on server `fake`" in rec.diagnosis


def test_a_tools_failure_goes_back_as_an_error_result_and_the_model_answers() -> None:
    host = FakeHost(FakeTool("boom", raises=True), FakeTool("fine", "42"))
    script = [
        Step(calls=(Call("boom"), Call("nope"), Call("fine", raw='{"q": '), Call("fine", {"q": "x"}))),
        Step(text="sorry"),
    ]
    agent, srv = _run(script, host)
    rec = agent.result.record
    assert rec is not None and rec.status == "ok" and rec.answer.strip() == "sorry"
    results = [m for m in srv.requests[1]["messages"] if m["role"] == "tool"]
    assert [r["content"].startswith("Error:") for r in results] == [True, True, True, False]
    assert "RuntimeError" in results[0]["content"] and "no tool named 'nope'" in results[1]["content"]
    assert "not valid JSON" in results[2]["content"] and results[3]["content"] == "42"
    assert host.calls == [("boom", {}), ("fine", {"q": "x"})]  # malformed arguments never reach the tool
    assert sorted(s.status for s in rec.steps if s.kind == "tool") == ["error", "error", "error", "ok"]


def test_the_step_limit_stops_the_loop_and_says_so() -> None:
    host = FakeHost(FakeTool("again"))
    agent, srv = _run([Step(calls=(Call("again"),))], host, max_steps=3)
    rec = agent.result.record
    assert rec is not None and len(srv.requests) == 3 and len(host.calls) == 2
    assert rec.agent is not None and rec.agent.stopped == "max_steps" and rec.agent.model_steps == 3
    assert "max_steps" in rec.notices and "--max-steps (3)" in rec.diagnosis


def test_without_consent_no_tool_runs_and_the_turn_stops() -> None:
    host = FakeHost(FakeTool("a"), FakeTool("b"))
    agent, srv = _run(
        [Step(calls=(Call("a"), Call("b"))), Step(text="x")], host, consent=Consent.from_flags(False, ["a"])
    )
    rec = agent.result.record
    assert rec is not None and host.calls == [] and len(srv.requests) == 1
    assert rec.status == "error" and rec.error is not None and rec.error.type == "tool_not_allowed"
    assert [(s.name, s.status) for s in rec.steps if s.kind == "tool"] == [("b", "denied")]
    assert "--allow-tool" in rec.diagnosis


def test_cancelling_during_a_tool_keeps_every_step_that_arrived(sunk: list[TurnRecord]) -> None:
    host = FakeHost(FakeTool("slow", delay_s=30))

    async def cancel_in_the_tool(agent: AgentTurn, task: asyncio.Task[TurnRecord]) -> None:
        for _ in range(3000):
            if host.in_flight:
                break
            await asyncio.sleep(0.01)
        task.cancel()

    agent, _ = _run([Step(calls=(Call("slow"),)), Step(text="never")], host, during=cancel_in_the_tool)
    rec = agent.result.record
    assert rec is not None and rec.status == "cancelled"
    assert [(s.kind, s.status) for s in rec.steps] == [("model", "ok"), ("tool", "cancelled")]
    assert rec.tool_calls[0]["name"] == "slow" and rec.metrics.ttft_ms is not None
    assert sunk[-1] is rec  # delivered (logged and sunk) although cancelled


def test_results_are_capped_before_the_model_and_a_cut_is_said() -> None:
    notices: list[str] = []
    host = FakeHost(FakeTool("big", "é" * 100_000), max_result_bytes=10**9)  # a host that does not cut
    with AgentServer([Step(calls=(Call("big"),)), Step(text="ok")]) as srv:
        backend = create_backend("compat:m", base_url=srv.base_url, lean=True)
        agent = AgentTurn(
            backend,
            build_request("go"),
            host,
            Consent(allow_all=True),
            session_id="s",
            turn_index=0,
            settings=AgentSettings(max_result_bytes=1001),
            listener=AgentListener(on_notice=notices.append),
        )

        async def go() -> TurnRecord:
            try:
                return await agent.run()
            finally:
                await backend.aclose()

        rec = asyncio.run(go())
        sent = next(m for m in srv.requests[1]["messages"] if m["role"] == "tool")["content"]
    assert len(sent.encode()) <= 1001 and sent == "é" * 500  # cut on a character boundary
    step = next(s for s in rec.steps if s.kind == "tool")
    assert step.truncated is True and step.result_bytes == 200_000
    assert notices and "cut to 1000 of 200000 bytes" in notices[0]


def test_cap_keeps_a_hosts_own_figures() -> None:
    r = cap(ToolResult("abc", size_bytes=9000, truncated=True), 10)
    assert (r.text, r.size_bytes, r.truncated) == ("abc", 9000, True)
    assert json.dumps(cap(ToolResult("x" * 20), 5).text) == '"xxxxx"'


def test_the_local_engine_says_it_has_no_tools() -> None:
    class Local:
        api = "llama.cpp"

    assert not supports_tools(Local())  # type: ignore[arg-type]


def _asking(answers: list[str], asked: list[tuple[str, int, int]]) -> Callable[..., object]:
    async def ask(call: object, spec: object, index: int, count: int) -> str:
        asked.append((getattr(call, "name", ""), index, count))
        return answers.pop(0)

    return ask


def test_with_someone_to_ask_each_call_is_asked_about_and_a_denial_goes_back_to_the_model() -> None:
    host = FakeHost(FakeTool("a", "A!"), FakeTool("b", "B!"))
    asked: list[tuple[str, int, int]] = []
    consent = Consent(ask=True)
    with AgentServer([Step(calls=(Call("a"), Call("b"), Call("a"))), Step(text="done")]) as srv:
        backend = create_backend("compat:m", base_url=srv.base_url, lean=True)
        listener = AgentListener(ask=_asking(["always", "deny"], asked))  # type: ignore[arg-type]
        agent = AgentTurn(backend, build_request("go"), host, consent, session_id="s", turn_index=0, listener=listener)

        async def go() -> None:
            try:
                await agent.run()
            finally:
                await backend.aclose()

        asyncio.run(go())
        sent = srv.requests[-1]["messages"]
    rec = agent.result.record
    assert rec is not None and rec.status == "ok" and rec.answer.strip() == "done"
    assert asked == [("a", 0, 3), ("b", 1, 3)]  # the second call of `a` was allowed by "always"
    assert [c for c, _ in host.calls] == ["a", "a"]
    results = [m["content"] for m in sent if m.get("role") == "tool"]
    assert results == ["A!", "Error: The user did not allow this call of b: it did not run.", "A!"]  # no error flag
    kinds = [(s.kind, getattr(s, "status", None) or getattr(s, "answer", None)) for s in rec.steps]
    assert kinds[:3] == [("model", "ok"), ("approval", "always"), ("approval", "deny")]
    assert sorted(k for k in kinds[3:6]) == [("tool", "denied"), ("tool", "ok"), ("tool", "ok")]
    assert rec.agent is not None and rec.agent.stopped == "answer" and rec.agent.approval_steps == 2
    assert "b" not in consent.denied  # a denial is for that call only


def test_cancelling_while_asked_keeps_the_wait_as_an_unanswered_approval() -> None:
    host = FakeHost(FakeTool("a"))

    async def never(*_: object) -> str:
        await asyncio.Event().wait()
        return "once"

    async def cancel_while_asked(agent: AgentTurn, task: asyncio.Task[TurnRecord]) -> None:
        while agent.live_steps(0) == () or agent._asking is None:
            await asyncio.sleep(0.01)
        task.cancel()

    with AgentServer([Step(calls=(Call("a"),)), Step(text="never")]) as srv:
        backend = create_backend("compat:m", base_url=srv.base_url, lean=True)
        agent = AgentTurn(
            backend,
            build_request("go"),
            host,
            Consent(ask=True),
            session_id="s",
            turn_index=0,
            listener=AgentListener(ask=never),  # type: ignore[arg-type]
        )

        async def go() -> None:
            task = asyncio.ensure_future(agent.run())
            await cancel_while_asked(agent, task)
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await backend.aclose()

        asyncio.run(go())
    rec = agent.result.record
    assert rec is not None and rec.status == "cancelled" and host.calls == []
    assert [(s.kind, getattr(s, "answer", None)) for s in rec.steps] == [("model", None), ("approval", "cancelled")]
