"""backends.compare.runner with tools: each pane's turn is the agent loop on one shared host under one
consent (real ``openai`` wire against the loopback model of tests/fakes/agent_server.py), each logged
once with its pane's tags, a pane cancelled mid-tool alone, and a backend without tools a plain turn."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from ttft.backends.agent.consent import Consent
from ttft.backends.compare.runner import ComparePane, CompareRunner, PaneTools
from ttft.backends.providers.registry import create_backend
from ttft.telemetry.log.turns import SessionLog

from tests.fakes.agent_server import AgentServer, Call, Step
from tests.support.compare_fakes import ScheduledBackend
from tests.support.tool_host import FakeHost, FakeTool

WAIT_S = 60.0


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path))
    return tmp_path


@pytest.fixture
def srv() -> Iterator[AgentServer]:
    script = [Step(calls=(Call("search", {"q": "noon"}),), first_ms=10), Step(text="It is noon.", first_ms=10)]
    with AgentServer(script) as server:
        yield server


def _pane(srv: AgentServer, label: str) -> ComparePane:
    return ComparePane(create_backend(f"compat:{label.lower()}", base_url=srv.base_url, lean=True), label)


async def test_every_pane_runs_the_loop_on_the_shared_host_and_is_logged_once(srv: AgentServer) -> None:
    host = FakeHost(FakeTool("search", "noon"))
    steps: list[int] = []
    log = SessionLog("s1")
    tools = PaneTools(host, Consent.from_flags(True, ()), on_step=lambda pane, rec: steps.append(pane))
    runner = CompareRunner([_pane(srv, "A"), _pane(srv, "B")], log=log, comparison_id="cmp-t", tools=tools)
    res = await asyncio.wait_for(runner.run_prompt("what time is it?"), WAIT_S)
    assert len(host.calls) == 2 and sorted(steps) == [0, 0, 1, 1]
    for recs in res.records:
        (rec,) = recs
        assert rec.status == "ok" and rec.agent is not None and rec.agent.step_count == 3
    logged = log.records()
    assert len(logged) == 2
    assert sorted(r["extra"]["pane"] for r in logged) == [0, 1]
    assert all(r["extra"]["comparison_id"] == "cmp-t" and r["agent"]["step_count"] == 3 for r in logged)
    assert runner.panes[0].history[-1].content.strip() == "It is noon."  # the final answer joins the history


async def test_a_pane_cancelled_during_its_tool_stops_alone_and_is_logged_once(srv: AgentServer) -> None:
    host = FakeHost(FakeTool("search", "late", delay_s=WAIT_S))
    log = SessionLog("s1")
    runner = CompareRunner(
        [_pane(srv, "A"), _pane(srv, "B")], log=log, tools=PaneTools(host, Consent.from_flags(True, ()))
    )
    task = asyncio.create_task(runner.run_prompt("what time is it?"))
    deadline = asyncio.get_running_loop().time() + WAIT_S
    while host.in_flight < 2:
        assert asyncio.get_running_loop().time() < deadline, "the tools did not start"
        await asyncio.sleep(0.01)
    runner.cancel()
    res = await asyncio.wait_for(task, WAIT_S)
    assert [r[0].status for r in res.records] == ["cancelled", "cancelled"]
    logged = log.records()
    assert len(logged) == 2 and all(r["agent"]["stopped"] == "cancelled" for r in logged)


async def test_a_backend_without_tools_runs_a_plain_turn(srv: AgentServer) -> None:
    host = FakeHost(FakeTool("search", "noon"))
    plain = ComparePane(ScheduledBackend("engine", api="local", ttft_s=0.005, gap_s=0.001, tokens=3), "B")
    runner = CompareRunner([_pane(srv, "A"), plain], tools=PaneTools(host, Consent.from_flags(True, ())))
    res = await asyncio.wait_for(runner.run_prompt("what time is it?"), WAIT_S)
    assert res.records[0][0].agent is not None and res.records[1][0].agent is None
    assert res.records[1][0].status == "ok" and len(host.calls) == 1
