"""The chat offers the MCP servers' tools and runs the agent loop (issue 31, the chat's side): each call
asked about in a dialog (allow once, always, deny: the model then gets a denial), Esc mid-loop keeps
every step, each call and result in the transcript, the steps in the pane and the timeline, and a
reopened session shows them again. The model is a loopback server playing tool calls on the real
wire (tests/fakes/agent_server.py); the tools are an in-process host, or the real MCP server over stdio."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from textual.widgets import Static
from ttft.backends.providers.registry import create_backend
from ttft.telemetry.log.turns import read_records
from ttft.telemetry.steps import ToolStepRecord
from ttft.tui.chat.app import ChatApp
from ttft.tui.screens.approve import ApproveScreen
from ttft.tui.tool_servers import ToolServers
from ttft.tui.widgets.tool_steps import ToolRun

from tests.backends.mcp.servers import stdio
from tests.fakes.agent_server import AgentServer, Call, Step
from tests.support.tool_host import SEARCH_THEN_ANSWER, FakeHost, FakeTool, servers_holding
from tests.support.tui_support import TimedBackend, factory_for, said, wait_until

SIZE = (160, 60)
WAIT_S = 60  # a loaded 2-core machine: generous


pytestmark = pytest.mark.usefixtures("fresh_dirs")


@pytest.fixture
def search_then_answer() -> Iterator[AgentServer]:
    with AgentServer(list(SEARCH_THEN_ANSWER)) as srv:
        yield srv


def _app(srv: AgentServer, tools: ToolServers, **kw: Any) -> ChatApp:
    backend = create_backend("compat:m", base_url=srv.base_url, lean=True)
    return ChatApp("compat:m", factory=factory_for(backend), tools=tools, **kw)


def _shown(app: Any) -> str:
    console = Console(width=200, file=io.StringIO(), record=True)
    for w in app.screen.query(Static):
        console.print(w.content)
    return console.export_text()


async def _send(pilot: Any, text: str) -> None:
    await pilot.press(*text)
    await pilot.press("enter")


async def _answer(pilot: Any, app: ChatApp, key: str) -> None:
    await wait_until(pilot, lambda: isinstance(app.screen, ApproveScreen), timeout=WAIT_S)
    await pilot.press(key)
    await wait_until(pilot, lambda: not isinstance(app.screen, ApproveScreen))


async def _finished(pilot: Any, app: ChatApp, n: int = 1) -> None:
    await wait_until(pilot, lambda: len(app.chat.session.records) >= n and not app.chat.busy, timeout=WAIT_S)


def _tool_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body["messages"] if m.get("role") == "tool"]


async def test_allow_once_runs_the_call_and_the_model_reads_its_result(search_then_answer: AgentServer) -> None:
    host = FakeHost(FakeTool("search", "found: it is noon\x1b[31m", server="web"))
    app = _app(search_then_answer, servers_holding(host))
    async with app.run_test(size=SIZE) as pilot:
        await _send(pilot, "what time is it?")
        await wait_until(pilot, lambda: isinstance(app.screen, ApproveScreen), timeout=WAIT_S)
        dialog = _shown(app)
        assert "search" in dialog and "web" in dialog and '"q": "noon"' in dialog
        await pilot.press("a")
        await _finished(pilot, app)
        rec = app.chat.session.records[-1]
        assert rec.status == "ok" and rec.answer.strip() == "It is noon."
        assert [s.kind for s in rec.steps] == ["model", "approval", "tool", "model"]
        assert rec.steps[1].answer == "once" and rec.steps[2].status == "ok"
        assert rec.agent is not None and rec.agent.approval_steps == 1 and rec.agent.time_in_approval_ms > 0
        assert host.calls == [("search", {"q": "noon"})]
        (result,) = _tool_messages(search_then_answer.requests[-1])
        assert result["content"].startswith("found: it is noon")
        text = _shown(app)
        assert "↳ search · web · ok" in text and "found: it is noon" in text and "\x1b" not in text
        assert "It is noon." in text
        # the pane draws the record's split and its steps
        assert "steps" in text and "tools " in text and "your approval" in text
        assert re.search(r"\d tool\s+search · .* · ok", text) and re.search(r"\D asked\s+search · .* · once", text)
        # numbered as the record's step_count counts (the approval is an unnumbered row): 1 model, 2 tool, 3 model
        assert (
            re.search(r"3 model\s", text)
            and not re.search(r"4 model\s", text)
            and re.search(r"steps\s+3 · model", text)
        )
        # the timeline draws each step as its own segment
        phases = [seg.phase for seg in app.chat.drawn.timelines[-1][1].segments]
        assert "tool" in phases and "approval" in phases and "streaming" in phases
        assert phases.index("approval") < phases.index("tool")
        # the turn is one logged line, with its steps
        (logged,) = read_records(app.chat.session.log.path)
        assert [s["kind"] for s in logged["steps"]] == ["model", "approval", "tool", "model"]


async def test_always_allow_holds_for_the_chat_and_a_new_turn_is_not_asked(search_then_answer: AgentServer) -> None:
    host = FakeHost(FakeTool("search", "noon"))
    app = _app(search_then_answer, servers_holding(host))
    async with app.run_test(size=SIZE) as pilot:
        await _send(pilot, "first")
        await _answer(pilot, app, "A")
        await _finished(pilot, app)
        await _send(pilot, "second")
        await _finished(pilot, app, 2)
        first, second = app.chat.session.records
        assert [s.kind for s in first.steps] == ["model", "approval", "tool", "model"]
        assert first.steps[1].answer == "always"
        assert [s.kind for s in second.steps] == ["model", "tool", "model"]  # nobody asked
        assert second.agent is not None and second.agent.approval_steps is None
        assert len(host.calls) == 2


async def test_deny_tells_the_model_the_call_did_not_run_and_the_loop_goes_on(
    search_then_answer: AgentServer,
) -> None:
    host = FakeHost(FakeTool("search", "noon"))
    app = _app(search_then_answer, servers_holding(host))
    async with app.run_test(size=SIZE) as pilot:
        await _send(pilot, "what time is it?")
        await _answer(pilot, app, "d")
        await _finished(pilot, app)
        rec = app.chat.session.records[-1]
        assert rec.status == "ok" and host.calls == []
        tool = next(s for s in rec.steps if s.kind == "tool")
        assert tool.status == "denied"
        (result,) = _tool_messages(search_then_answer.requests[-1])
        assert "did not allow" in result["content"]
        assert "↳ search · fake · denied" in _shown(app)


async def test_escape_in_the_dialog_denies_and_a_regenerate_asks_again(search_then_answer: AgentServer) -> None:
    host = FakeHost(FakeTool("search", "noon"))
    app = _app(search_then_answer, servers_holding(host))
    async with app.run_test(size=SIZE) as pilot:
        await _send(pilot, "what time is it?")
        await _answer(pilot, app, "escape")
        await _finished(pilot, app)
        assert next(s for s in app.chat.session.records[-1].steps if s.kind == "tool").status == "denied"
        await pilot.press("f5")  # regenerate: the loop again, with its tools, and the call asked about again
        await _answer(pilot, app, "a")
        await _finished(pilot, app, 2)
        again = app.chat.session.records[-1]
        assert again.branch_of == 0 and host.calls == [("search", {"q": "noon"})]
        assert [s.kind for s in again.steps] == ["model", "approval", "tool", "model"]


async def test_esc_during_a_slow_tool_stops_the_loop_and_keeps_every_step(search_then_answer: AgentServer) -> None:
    host = FakeHost(FakeTool("search", "late", delay_s=60))
    app = _app(search_then_answer, servers_holding(host))
    async with app.run_test(size=SIZE) as pilot:
        await _send(pilot, "what time is it?")
        await _answer(pilot, app, "a")
        await wait_until(pilot, lambda: host.in_flight == 1, timeout=WAIT_S)
        # the pane says where the loop is (it repaints at 10 fps: waited for, on a loaded machine)
        await wait_until(pilot, lambda: "STEP 2" in (t := _shown(app)) and "running tool search" in t, timeout=WAIT_S)
        await pilot.press("escape")
        await _finished(pilot, app)
        rec = app.chat.session.records[-1]
        assert rec.status == "cancelled"
        assert [s.kind for s in rec.steps] == ["model", "approval", "tool"]
        assert rec.steps[-1].status == "cancelled" and rec.agent is not None
        assert rec.agent.stopped == "cancelled"
        (logged,) = read_records(app.chat.session.log.path)
        assert logged["status"] == "cancelled" and len(logged["steps"]) == 3
        assert len(search_then_answer.requests) == 1  # the model was not asked again
        assert "cancelled" in _shown(app)
        # the turn ends with the call Esc stopped, not with the model step before it: no part outweighs the whole
        assert rec.metrics.total_ms is not None and rec.metrics.total_ms >= rec.steps[-1].end_ms - 0.01
        assert "the 2 steps that arrived are kept" in _shown(app) and "nothing had arrived" not in _shown(app)


async def test_x_in_the_dialog_stops_the_turn_while_it_waits_for_an_answer(search_then_answer: AgentServer) -> None:
    host = FakeHost(FakeTool("search", "noon"))
    app = _app(search_then_answer, servers_holding(host))
    async with app.run_test(size=SIZE) as pilot:
        await _send(pilot, "what time is it?")
        await _answer(pilot, app, "x")
        await _finished(pilot, app)
        rec = app.chat.session.records[-1]
        assert rec.status == "cancelled" and host.calls == []
        assert [s.kind for s in rec.steps] == ["model", "approval"]
        assert rec.steps[1].answer == "cancelled"


async def test_a_resumed_session_shows_each_call_and_how_it_ended(search_then_answer: AgentServer) -> None:
    host = FakeHost(FakeTool("search", "found: noon", server="web"))
    app = _app(search_then_answer, servers_holding(host))
    async with app.run_test(size=SIZE) as pilot:
        await _send(pilot, "what time is it?")
        await _answer(pilot, app, "a")
        await _finished(pilot, app)
        path = app.chat.session.log.path
    again = ChatApp("fake:timed", factory=factory_for(TimedBackend(first_ms=5, token_ms=1, visible=3)), resume=path)
    async with again.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: "resumed session" in _shown(again), timeout=WAIT_S)
        text = _shown(again)
        assert "⚙ tool call" in text and "search" in text and '"q": "noon"' in text
        assert "↳ search · web · ok" in text and "you allowed once" in text
        assert "It is noon." in text
        assert "found: noon" not in text  # a log keeps a result's size, never its text
        phases = [seg.phase for seg in again.chat.drawn.timelines[-1][1].segments]
        assert "tool" in phases and "approval" in phases
        assert re.search(r"\d tool\s+search · ", text)  # the pane's steps


async def test_the_real_mcp_server_over_stdio_answers_the_models_call(tmp_path: Path) -> None:
    script = [Step(calls=(Call("echo", {"text": "hi \x1b[2J there"}),)), Step(text="done")]
    tools = ToolServers([stdio("fake")], start_timeout_s=90)
    with AgentServer(script) as srv:
        app = _app(srv, tools)
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: tools.host is not None, timeout=90)
            await _send(pilot, "echo it")
            await _answer(pilot, app, "a")
            await _finished(pilot, app)
            rec = app.chat.session.records[-1]
            tool = next(s for s in rec.steps if s.kind == "tool")
            assert tool.status == "ok" and tool.server == "fake" and rec.answer.strip() == "done"
            (result,) = _tool_messages(srv.requests[-1])
            assert result["content"] == "hi \x1b[2J there"  # the model gets the result as the tool gave it
            text = _shown(app)
            assert "↳ echo · fake · ok" in text and "hi" in text and "\x1b" not in text  # never run on screen
            offered = [t["function"]["name"] for t in srv.requests[0]["tools"]]
            assert "echo" in offered and "slow" in offered


async def test_the_local_engine_says_once_that_it_takes_no_tools() -> None:
    class Local(TimedBackend):
        api = "local"

    backend = Local(first_ms=5, token_ms=1, visible=3)
    app = ChatApp("local", factory=factory_for(backend), tools=servers_holding(FakeHost(FakeTool("search"))))
    async with app.run_test(size=SIZE) as pilot:
        await _send(pilot, "one")
        await _finished(pilot, app)
        await _send(pilot, "two")
        await _finished(pilot, app, 2)
        assert said(app, "The MCP tools are not offered: the local engine has no tool support")
        assert sum("not offered" in t for t in app.__dict__.get("_ttft_heard", [])) == 1
        assert all(not r.steps for r in app.chat.session.records)
        assert all(not req.tools for req in backend.requests)


def test_tool_results_in_the_transcript_fold_when_long() -> None:
    step = ToolStepRecord(name="big", server="s", status="ok", result_bytes=50_000, duration_ms=3.0)
    run = ToolRun(step, "\n".join(f"line {i}" for i in range(100)))
    console = Console(width=120, file=io.StringIO(), record=True)
    console.print(run.content)
    text = console.export_text()
    assert "line 7" in text and "line 8" not in text and "92 more lines" in text
    assert "↳ big · s · ok · 50 KB · 3 ms" in text  # the step's own figures head it


async def test_an_older_tool_using_turn_is_compacted_with_its_calls_and_results(
    search_then_answer: AgentServer,
) -> None:
    from ttft.tui.widgets.transcript import CompactTurn

    host = FakeHost(FakeTool("search", "found: noon", server="web"))
    app = _app(search_then_answer, servers_holding(host))
    async with app.run_test(size=SIZE) as pilot:
        await _send(pilot, "first")
        await _answer(pilot, app, "s")  # always: the later turns run without a dialog
        await _finished(pilot, app)
        for n, prompt in ((2, "second"), (3, "third"), (4, "fourth")):  # the last two turns stay full
            await _send(pilot, prompt)
            await _finished(pilot, app, n)
        await wait_until(pilot, lambda: bool(app.chat.transcript.query(CompactTurn)), timeout=WAIT_S)
        compact = app.chat.transcript.query(CompactTurn).first()
        assert compact.record.turn_index == 0 and compact.record.steps
        console = Console(width=150, file=io.StringIO(), record=True)
        console.print(compact.content)
        text = console.export_text()
        assert "⚙ tool call: search" in text and "↳ search · web · ok" in text and "you always allowed" in text
        assert "It is noon." in text
        # turns 2-4 stay full (their results are widgets); the first's are drawn by its compact widget
        assert len(app.chat.transcript.query(CompactTurn)) == 1 and len(app.chat.transcript.query(ToolRun)) == 3


async def test_each_steps_answer_numbers_its_code_blocks_after_the_last_steps() -> None:
    from ttft.tui.widgets.transcript import AssistantMessage

    first = "Let me look:\n\n```python\nprint(1)\n```\n"
    script = [Step(text=first, calls=(Call("search", {"q": "x"}),)), Step(text="Here:\n\n```python\nprint(2)\n```\n")]
    with AgentServer(script) as srv:
        app = _app(srv, servers_holding(FakeHost(FakeTool("search", "ok"))))
        async with app.run_test(size=SIZE) as pilot:
            await _send(pilot, "code please")
            await _answer(pilot, app, "a")
            await _finished(pilot, app)
            answers = list(app.chat.transcript.query(AssistantMessage))
            assert [a.first_block for a in answers] == [1, 2]
            assert [n for n, _ in app.chat.blocks.titles()] == [1, 2]


async def test_arguments_nested_past_the_guard_are_refused_without_asking_and_the_step_is_kept() -> None:
    # the red team's case (issue 39): the step vanished and the turn read "OK"; now it is a refused step
    deep = "[" * 3000 + "]" * 3000
    host = FakeHost(FakeTool("search", "never"))
    script = [Step(calls=(Call("search", raw=deep),), first_ms=20), Step(text="I could not search.", first_ms=20)]
    with AgentServer(script) as srv:
        app = _app(srv, servers_holding(host))
        async with app.run_test(size=SIZE) as pilot:
            await _send(pilot, "what time is it?")
            await _finished(pilot, app)
            assert not isinstance(app.screen, ApproveScreen)  # nothing that cannot run is put to the person
            rec = app.chat.session.records[-1]
            assert rec.status == "ok" and rec.answer.strip() == "I could not search." and host.calls == []
            assert [(s.kind, getattr(s, "status", None)) for s in rec.steps] == [
                ("model", "ok"),
                ("tool", "refused"),
                ("model", "ok"),
            ]
            assert any(k.startswith("tool_arguments_refused:") for k in rec.notices)
            (result,) = _tool_messages(srv.requests[-1])
            assert "nested more than 128 levels" in result["content"]
            await wait_until(pilot, lambda: "↳ search · fake · refused" in _shown(app), timeout=WAIT_S)
            assert "past ttft's limits" in _shown(app)
