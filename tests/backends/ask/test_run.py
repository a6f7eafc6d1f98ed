"""run_ask, the one turn core, against the loopback fakes: a plain turn heard by its listener and logged, a
target that did not resolve (recorded, or raised), tools with and without consent, a person who denies a
call, a cancelled turn's record, servers that cannot start, and the plan's own checks."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from ttft.backends.agent.consent import Answer
from ttft.backends.agent.loop import AgentListener
from ttft.backends.ask.plan import AskPlan, ToolPlan, Unresolved, read_attachments
from ttft.backends.ask.run import AskTurn, ToolsNotStarted, run_ask
from ttft.backends.base import ToolCall, ToolSpec, build_request
from ttft.backends.providers.registry import ProviderError, resolve
from ttft.telemetry import events as ev
from ttft.telemetry.recorder import TurnRecorder
from ttft.telemetry.values.checked import BadValue

from tests.fakes.agent_server import AgentServer
from tests.fakes.schedule import Schedule
from tests.fakes.server import FakeServer
from tests.support.tool_host import SEARCH_THEN_ANSWER, FakeHost, FakeTool


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    conf = tmp_path / "conf"
    conf.mkdir()
    for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "TTFT_MODEL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("TTFT_CONFIG_DIR", str(conf))
    return tmp_path / "data"


@pytest.fixture(scope="module")
def agent_srv():
    with AgentServer(list(SEARCH_THEN_ANSWER)) as s:
        yield s


def _logged(data: Path) -> list[dict]:
    return [
        json.loads(line) for f in sorted((data / "sessions").glob("*.jsonl")) for line in f.read_text().splitlines()
    ]


def _plan(base_url: str, prompt: str = "hi", **kw: object) -> AskPlan:
    return AskPlan(target=resolve("compat:m", base_url=base_url), request=build_request(prompt), **kw)  # type: ignore[arg-type]


def test_a_plain_turn_is_heard_by_its_listener_and_logged(env: Path) -> None:
    heard: list[ev.Event] = []
    steps: list[TurnRecorder] = []
    with FakeServer(Schedule(first_token_ms=5, token_ms=1, visible_tokens=4)) as srv:
        plan = _plan(srv.openai_base_url, session="core-1")
        result = asyncio.run(run_ask(plan, AgentListener(on_event=heard.append, on_step=steps.append)))
    record = result.record
    assert record.status == "ok" and result.agent is None and result.log_errors == ()
    assert "".join(e.text for e in heard if isinstance(e, ev.TextDelta)) == record.answer
    assert len(steps) == 1 and steps[0].session_id == "core-1"
    assert [(r["session_id"], r["turn_index"]) for r in _logged(env)] == [("core-1", 0)]


def test_a_spec_that_did_not_resolve_is_a_recorded_turn_or_raised(env: Path) -> None:
    try:
        resolve("nosuch:model")
    except ProviderError as err:
        unresolved = Unresolved("nosuch:model", None, err)
    recorded = asyncio.run(run_ask(AskPlan(unresolved, build_request("hi"), session="core-2")))
    assert recorded.record.status == "error" and recorded.record.provider == "nosuch"
    assert "Unknown provider" in recorded.record.error.message  # type: ignore[union-attr]
    assert len(_logged(env)) == 1
    with pytest.raises(ProviderError):
        asyncio.run(run_ask(AskPlan(unresolved, build_request("hi"), start_failure="raise")))
    assert len(_logged(env)) == 1  # raised: nothing logged


def test_tools_allowed_run_through_the_agent_loop_and_the_callers_host_stays_open(
    env: Path, agent_srv: AgentServer
) -> None:
    host = FakeHost(FakeTool("search", "noon", server="web"))
    tools: list[str] = []
    plan = _plan(agent_srv.base_url, tools=ToolPlan(host=host, allow_all=True), log=False)
    result = asyncio.run(run_ask(plan, AgentListener(on_tool=lambda step, _: tools.append(step.name))))
    record = result.record
    assert record.status == "ok" and record.answer.strip() == "It is noon."
    assert [s.kind for s in record.steps] == ["model", "tool", "model"]
    assert result.agent is not None and len(result.agent.models) == 2
    assert tools == ["search"] and host.calls == [("search", {"q": "noon"})]
    assert not host.closed  # the caller's: never closed by the turn


def test_without_consent_no_tool_runs_and_the_turn_stops(env: Path, agent_srv: AgentServer) -> None:
    host = FakeHost(FakeTool("search", "noon"))
    result = asyncio.run(run_ask(_plan(agent_srv.base_url, tools=ToolPlan(host=host), log=False)))
    assert result.record.status == "error" and result.record.error.type == "tool_not_allowed"  # type: ignore[union-attr]
    assert host.calls == []


def test_a_denial_goes_back_to_the_model_and_the_turn_goes_on(env: Path, agent_srv: AgentServer) -> None:
    host = FakeHost(FakeTool("search", "noon"))
    asked: list[tuple[str, int, int]] = []

    async def ask(call: ToolCall, spec: ToolSpec | None, i: int, n: int) -> Answer:
        asked.append((call.name, i, n))
        return "deny"

    result = asyncio.run(
        run_ask(_plan(agent_srv.base_url, tools=ToolPlan(host=host), log=False), AgentListener(ask=ask))
    )
    record = result.record
    assert record.status == "ok" and asked == [("search", 0, 1)] and host.calls == []
    said = [(s.kind, getattr(s, "status", None) or getattr(s, "answer", None)) for s in record.steps]
    assert said == [("model", "ok"), ("approval", "deny"), ("tool", "denied"), ("model", "ok")]
    assert "did not allow" in json.dumps(agent_srv.requests[-1])  # the model read why


def test_a_cancelled_turn_leaves_its_record_and_the_cancellation_goes_on(env: Path) -> None:
    with FakeServer(Schedule(first_token_ms=5, token_ms=50, visible_tokens=200)) as srv:
        turn = AskTurn(_plan(srv.openai_base_url, session="core-3"))

        async def main() -> None:
            task = asyncio.create_task(turn.run())
            await asyncio.sleep(0.3)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(main())
    cut = turn.ended()
    assert cut is not None and cut.record.status == "cancelled" and cut.record.answer
    assert [r["status"] for r in _logged(env)] == ["cancelled"]


def test_servers_that_cannot_start_are_said_in_one_error(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ttft.backends.mcp.host
    from ttft.backends.mcp.config import McpServerConfig

    async def broken(*_: object, **__: object) -> None:
        raise RuntimeError("no event loop for the servers")

    monkeypatch.setattr(ttft.backends.mcp.host, "start_host", broken)
    plan = _plan("http://127.0.0.1:9/v1", tools=ToolPlan(servers=(McpServerConfig("x", command="x"),)), log=False)
    turn = AskTurn(plan)
    with pytest.raises(ToolsNotStarted, match="did not start: no event loop"):
        asyncio.run(turn.run())
    assert turn.ended() is None  # no turn began


def test_the_plan_refuses_tools_for_the_local_engine_and_servers_beside_a_host() -> None:
    with pytest.raises(BadValue, match="no tool support"):
        AskPlan(resolve("local"), build_request("hi"), ToolPlan(host=FakeHost()))
    from ttft.backends.mcp.config import McpServerConfig

    with pytest.raises(BadValue, match="not both"):
        ToolPlan(servers=(McpServerConfig("x", command="x"),), host=FakeHost())


def test_attachments_are_read_then_checked_against_the_target(tmp_path: Path) -> None:
    note = tmp_path / "note.txt"
    note.write_text("remember the milk")
    files = read_attachments([note], resolve("compat:m", base_url="http://127.0.0.1:9/v1"))
    assert isinstance(files, tuple) and files[0].name == "note.txt"
    missing = read_attachments([tmp_path / "nope.png"], resolve("compat:m", base_url="http://127.0.0.1:9/v1"))
    assert not isinstance(missing, tuple) and "nope.png" in missing.sentence


def test_turn_core_runs_the_loop_only_where_tools_are_offered_and_the_backend_takes_them(
    env: Path, agent_srv: AgentServer
) -> None:
    from ttft.backends.agent.consent import Consent
    from ttft.backends.ask.core import Offered, TurnCore
    from ttft.backends.providers.registry import create_backend
    from ttft.backends.turn import new_recorder

    backend = create_backend(resolve("compat:m", base_url=agent_srv.base_url), lean=True)
    request = build_request("go")
    host = FakeHost(FakeTool("search", "noon"))

    def first() -> TurnRecorder:
        rec = new_recorder(backend, request, session_id="core-4", turn_index=0)
        rec.feed(ev.Submitted(ev.now_ns()))
        return rec

    tooled = TurnCore(backend, request, first(), log=None, tools=Offered(host, Consent(allow_all=True)))
    plain = TurnCore(backend, request, first(), log=None)
    assert tooled.agent is not None and plain.agent is None and plain.live_steps(ev.now_ns()) == ()

    async def main() -> tuple[str, str]:
        try:
            a, b = await tooled.run(), await plain.run()
        finally:
            await backend.aclose()
        return a.status, b.status

    assert asyncio.run(main()) == ("ok", "ok") and host.calls == [("search", {"q": "noon"})]
    assert tooled.ended() is not None and tooled.ended().steps  # type: ignore[union-attr]
    never = TurnCore(backend, request, first(), log=None)
    cut = never.failed(asyncio.CancelledError(), "a test")  # cancelled before it began: nothing was sent
    assert cut.status == "cancelled" and never.ended() is cut
