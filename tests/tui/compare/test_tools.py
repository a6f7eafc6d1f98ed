"""Pilot tests of the compare screen with tools: both panes' models (real ``openai`` wire, against the
loopback model of tests/fakes/agent_server.py) are offered the same host; each call of each pane is
asked about with the chat's dialog, an "always" holds in every pane, ``--allow-tools`` asks nothing,
and each pane draws its calls' results (outside text shown, never run) and ends with the steps' figures."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import pytest
from rich.console import Console
from ttft.backends.agent.consent import Consent
from ttft.backends.providers.registry import create_backend
from ttft.tui.compare.app import CompareApp
from ttft.tui.compare.pane import PaneView
from ttft.tui.screens.approve import ApproveScreen
from ttft.tui.tool_servers import ToolServers
from ttft.tui.widgets.tool_steps import ToolRun

from tests.fakes.agent_server import AgentServer
from tests.support.tool_host import SEARCH_THEN_ANSWER, FakeHost, FakeTool, servers_holding
from tests.support.tui_support import wait_until

SIZE = (160, 48)
WAIT_S = 60  # a loaded 2-core machine: generous


pytestmark = pytest.mark.usefixtures("fresh_dirs")


@pytest.fixture
def srv() -> Iterator[AgentServer]:
    with AgentServer(list(SEARCH_THEN_ANSWER)) as server:
        yield server


def _app(srv: AgentServer, host: FakeHost, **kw: Any) -> CompareApp:
    backends = [create_backend(f"compat:{m}", base_url=srv.base_url, lean=True) for m in ("a", "b")]

    def factory(spec: str, base_url: str | None) -> Any:
        return create_backend(spec, base_url=base_url, lean=True)

    return CompareApp(backends, factory=factory, tools=servers_holding(host), session_id="s1", **kw)


async def _send(pilot: Any, app: CompareApp) -> None:
    app.query_one("#prompt").value = "what time is it?"  # type: ignore[attr-defined]
    await pilot.press("enter")


async def _dialog(pilot: Any, app: CompareApp) -> ApproveScreen:
    await wait_until(pilot, lambda: isinstance(app.screen, ApproveScreen), timeout=WAIT_S)
    assert isinstance(app.screen, ApproveScreen)
    return app.screen


async def _done(pilot: Any, app: CompareApp) -> None:
    await wait_until(pilot, lambda: bool(app.results) and not app.in_flight, timeout=WAIT_S)
    await pilot.pause(0.1)


def _records(app: CompareApp) -> dict[str, Any]:
    result, _ = app.results[-1]
    return {p.label: recs[-1] for p, recs in zip(app.runner.panes, result.records, strict=True)}


async def test_each_panes_call_is_asked_about_on_its_own(srv: AgentServer) -> None:
    host = FakeHost(FakeTool("search", "found: it is noon\x1b[31m", server="web"))
    app = _app(srv, host)
    async with app.run_test(size=SIZE) as pilot:
        await _send(pilot, app)
        first = await _dialog(pilot, app)
        allowed = first.approval.pane
        assert allowed in ("A", "B") and first.approval.tool == "search"
        await pilot.press("a")  # allow once: this pane's call only
        second = await _dialog(pilot, app)
        denied = second.approval.pane
        assert {allowed, denied} == {"A", "B"}
        await pilot.press("d")
        await _done(pilot, app)
        recs = _records(app)
        assert host.calls == [("search", {"q": "noon"})]  # the allowed pane's call, and that one only
        for label, status in ((allowed, "ok"), (denied, "denied")):
            rec = recs[label]
            assert rec.status == "ok" and rec.agent.step_count == 3
            assert [s.kind for s in rec.steps if s.kind != "approval"] == ["model", "tool", "model"]
            assert next(s for s in rec.steps if s.kind == "tool").status == status
            assert [s.answer for s in rec.steps if s.kind == "approval"] == ["once" if status == "ok" else "deny"]
        # each pane drew its call's result, the tool's text shown and never run
        runs = {label: list(app.query_one(f"#pane-{label}", PaneView).query(ToolRun)) for label in ("A", "B")}
        assert len(runs["A"]) == len(runs["B"]) == 1
        console = Console(width=200, file=io.StringIO(), record=True)
        console.print(runs[allowed][0].content)
        shown = console.export_text()
        assert "it is noon" in shown and "\x1b" not in shown
        # the summary covers the steps
        _, c = app.results[-1]
        assert "steps" in [m.key for m in c.metrics]
        assert c.stats["A"].metrics["steps"].median == 3.0


async def test_always_in_one_pane_holds_in_every_pane(srv: AgentServer) -> None:
    host = FakeHost(FakeTool("search", "noon"))
    app = _app(srv, host)
    async with app.run_test(size=SIZE) as pilot:
        await _send(pilot, app)
        await _dialog(pilot, app)
        await pilot.press("s")  # always allow search: for the rest of the comparison, in every pane
        await _done(pilot, app)
        assert not isinstance(app.screen, ApproveScreen)
        assert len(host.calls) == 2
        assert all(r.status == "ok" and r.agent.step_count == 3 for r in _records(app).values())


async def test_allow_tools_from_the_command_line_asks_nothing(srv: AgentServer) -> None:
    host = FakeHost(FakeTool("search", "noon"))
    app = _app(srv, host, consent=Consent.from_flags(True, ()))
    async with app.run_test(size=SIZE) as pilot:
        await _send(pilot, app)
        await _done(pilot, app)
        assert len(host.calls) == 2
        for rec in _records(app).values():
            assert rec.status == "ok" and not any(s.kind == "approval" for s in rec.steps)


async def test_the_prompt_given_on_the_command_line_waits_for_theservers_holding(srv: AgentServer) -> None:
    host = FakeHost(FakeTool("search", "noon"))
    tools = ToolServers([])
    tools.servers = [object()]  # type: ignore[list-item]  # "configured": the host lands a moment later
    backends = [create_backend(f"compat:{m}", base_url=srv.base_url, lean=True) for m in ("a", "b")]
    app = CompareApp(backends, tools=tools, initial_prompt="what time is it?", consent=Consent.from_flags(True, ()))
    app.compare.tools.begin = lambda screen, runner: None  # type: ignore[method-assign]  # nothing to spawn
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.3)
        assert not app.results and not host.calls
        tools.host = host  # type: ignore[assignment]
        await _done(pilot, app)
        assert len(host.calls) == 2
