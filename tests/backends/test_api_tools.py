"""The Python API's turns with tools and attachments, through the core ``ttft ask`` runs, every part real:
the official SDK's MCP server (tests/fakes/mcp_server.py) over stdio, a loopback model that asks for the
tool (the lean reader, and the real ``openai`` and ``anthropic`` SDKs), and files read from disk.

No tool runs without consent: approved with ``"all"``, asked through a function (its "no" goes back to the
model, its "always" holds for the client's later turns), and denied by default."""

from __future__ import annotations

import asyncio
import base64
import json
import shlex
import sys
import time
from pathlib import Path

import pytest
from ttft.backends import api

from tests.backends.mcp.servers import stdio
from tests.fakes.agent_server import AgentServer, Call, Step
from tests.fakes.schedule import Schedule
from tests.fakes.server import FakeServer
from tests.support import files
from tests.support.paths import ROOT

MCP = f"{shlex.quote(sys.executable)} {shlex.quote(str(ROOT / 'tests' / 'fakes' / 'mcp_server.py'))}"
SCRIPT = [Step(calls=(Call("echo", {"text": "from the tool"}),)), Step(text="Done.")]


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    data, conf = tmp_path / "data", tmp_path / "conf"
    conf.mkdir()
    for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "TTFT_MODEL", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("TTFT_DATA_DIR", str(data))
    monkeypatch.setenv("TTFT_CONFIG_DIR", str(conf))
    return data


@pytest.fixture
def srv():
    with AgentServer(SCRIPT) as s:
        yield s


def _kinds(record: api.TurnRecord) -> list[tuple[str, str]]:
    return [(s.kind, getattr(s, "status", None) or getattr(s, "answer", None)) for s in record.steps]


def test_an_mcp_tool_the_user_approved_runs_and_its_answer_goes_back(env: Path, srv: AgentServer) -> None:
    target = api.resolve("compat:m", srv.base_url)
    record = api.run_turn(target, "go", tools=MCP, approve="all", session="api-tools")
    assert record.status == "ok" and record.answer.strip() == "Done."
    assert _kinds(record) == [("model", "ok"), ("tool", "ok"), ("model", "ok")]
    tool = record.steps[1]
    assert tool.name == "echo" and tool.result_bytes == len("from the tool")
    assert len(srv.requests) == 2 and "from the tool" in json.dumps(srv.requests[1]["messages"][-1])
    assert record.metrics.mcp_start_ms is not None and record.metrics.mcp_start_ms > 0
    logged = [json.loads(line) for line in (env / "sessions" / "api-tools.jsonl").read_text().splitlines()]
    assert [r["steps"] for r in logged] == [[s.to_dict() for s in record.steps]]  # logged as returned


def test_an_approve_function_sees_each_call_and_its_no_goes_back_to_the_model(env: Path, srv: AgentServer) -> None:
    seen: list[api.ToolRequest] = []

    def approve(request: api.ToolRequest) -> bool:
        seen.append(request)
        return False

    target = api.resolve("compat:m", srv.base_url)
    record = api.run_turn(target, "go", tools=[stdio("fake")], approve=approve, log=False)
    assert [(r.name, r.arguments, r.server, r.index, r.count) for r in seen] == [
        ("echo", {"text": "from the tool"}, "fake", 0, 1)
    ]
    assert "Say the text back." in seen[0].description
    assert record.status == "ok" and _kinds(record) == [
        ("model", "ok"),
        ("approval", "deny"),
        ("tool", "denied"),
        ("model", "ok"),
    ]
    assert "did not allow" in json.dumps(srv.requests[1]["messages"][-1])  # the model read why, the tool never ran


def test_without_approve_no_tool_runs_and_the_turn_stops(env: Path, srv: AgentServer) -> None:
    record = api.run_turn(api.resolve("compat:m", srv.base_url), "go", tools=MCP, log=False)
    assert record.status == "error" and record.error is not None and record.error.type == "tool_not_allowed"
    assert _kinds(record)[-1] == ("tool", "denied") and len(srv.requests) == 1


def test_a_conversation_with_tools_keeps_its_history_on_the_anthropic_sdk(env: Path, srv: AgentServer) -> None:
    asked: list[str] = []

    async def approve(request: api.ToolRequest) -> str:
        asked.append(request.name)
        return "always"  # this tool, for the rest of the client's turns

    async def main() -> tuple[api.TurnRecord, api.TurnRecord, list[api.Message]]:
        async with api.Client(
            "anthropic:m", base_url=srv.url, key="sk-ant-test-KEY", sdk=True, tools=MCP, approve=approve, log=False
        ) as client:
            chat = client.conversation(system="Be brief.")
            one = await chat.aprompt("go")
            two = await chat.aprompt("and again")
            return one, two, chat.messages

    one, two, messages = asyncio.run(main())
    assert one.status == two.status == "ok" and asked == ["echo"]  # asked once: "always" held
    assert _kinds(two) == [("model", "ok"), ("tool", "ok"), ("model", "ok")]
    assert [(m.role, m.content) for m in messages] == [
        ("user", "go"),
        ("assistant", one.answer),
        ("user", "and again"),
        ("assistant", two.answer),
    ]
    second_turn = srv.requests[2]  # turn 2's first model step: the history, then the new prompt
    assert second_turn["system"] == "Be brief."
    assert [(m["role"], m["content"] if isinstance(m["content"], str) else m["content"][0]["text"]) for m in
            second_turn["messages"]] == [("user", "go"), ("assistant", one.answer), ("user", "and again")]  # fmt: skip


@pytest.mark.parametrize("sdk", [False, True])
def test_a_turn_sends_its_attachments_as_ask_does(env: Path, tmp_path: Path, sdk: bool) -> None:
    pic, notes = tmp_path / "pic.png", tmp_path / "notes.txt"
    pic.write_bytes(files.png(30, 20))
    notes.write_text("quarterly figures: 17, 23, 42")
    with FakeServer(Schedule(first_token_ms=5, token_ms=1, visible_tokens=4)) as fake:
        target = api.resolve("compat:m", fake.openai_base_url)
        record = api.run_turn(target, "sum?", attachments=[pic, str(notes)], sdk=sdk, session="api-files")
        content = fake.requests[-1].body["messages"][-1]["content"]
    data = base64.b64encode(pic.read_bytes()).decode()
    assert content == [
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}},
        {"type": "text", "text": "notes.txt\n```\nquarterly figures: 17, 23, 42\n```"},
        {"type": "text", "text": "sum?"},
    ]
    assert record.status == "ok" and [a.name for a in record.attachments] == ["pic.png", "notes.txt"]
    assert "quarterly figures" not in (env / "sessions" / "api-files.jsonl").read_text()  # never a file's contents


def test_tools_attachments_and_consent_are_checked_before_anything_is_sent(env: Path, tmp_path: Path) -> None:
    target = api.resolve("compat:m", "http://127.0.0.1:9/v1")
    with pytest.raises(api.BadValue, match=r"nope\.txt"):
        api.run_turn(target, "hi", attachments=tmp_path / "nope.txt")
    with pytest.raises(api.BadValue, match="approve needs tools"):
        api.run_turn(target, "hi", approve="all")
    with pytest.raises(api.BadValue, match="approve takes 'all'"):
        api.run_turn(target, "hi", tools=MCP, approve="everything")
    with pytest.raises(api.BadValue, match="max_steps must be at least 1"):
        api.Client(target, tools=MCP, max_steps=0)
    with pytest.raises(api.TtftError, match="empty spec"):
        api.run_turn(target, "hi", tools=["  "], approve="all")
    with pytest.raises(TypeError, match="tools are MCP servers"):
        api.run_turn(target, "hi", tools=42)  # type: ignore[arg-type]
    with pytest.raises(api.BadValue, match="no tool support"):
        api.Client("local", tools=MCP, approve="all")
    assert not (env / "sessions").exists()


def test_a_server_that_does_not_start_is_said_as_a_warning_and_the_turn_goes_on(env: Path, srv: AgentServer) -> None:
    target = api.resolve("compat:m", srv.base_url)
    gone = api.McpServerConfig("gone", command=str(env / "no-such-server"))
    with pytest.warns(RuntimeWarning, match="MCP server gone"):
        record = api.run_turn(target, "go", tools=[gone], approve="all", log=False)
    # offered no tools, the model still asked for one: the call failed, the model read why and answered
    assert record.status == "ok" and _kinds(record) == [("model", "ok"), ("tool", "error"), ("model", "ok")]


class _Echo:
    """A tool host of the caller's own (no server to start): ``echo`` answers at once."""

    def tools(self) -> list[api.ToolSpec]:
        return [api.ToolSpec("echo", "Say it back.", {"type": "object", "properties": {"text": {"type": "string"}}})]

    async def call(self, name: str, arguments: dict[str, object]) -> api.ToolResult:
        return api.ToolResult(str(arguments.get("text", "")))

    async def aclose(self) -> None:
        return None


def test_a_tool_turn_waiting_on_a_blocked_loop_says_its_first_steps_wait_was_ttfts_own(env: Path) -> None:
    script = [Step(calls=(Call("echo", {"text": "x"}),), first_ms=150.0), Step(text="Done.", first_ms=20.0)]
    with AgentServer(script) as slow:
        target = api.resolve("compat:m", slow.base_url)

        async def block() -> None:
            await asyncio.sleep(0.03)  # the first request is out, its first token not yet in
            time.sleep(0.4)  # a notebook cell's CPU work on the turn's loop

        async def main() -> api.TurnRecord:
            rec, _ = await asyncio.gather(api.arun_turn(target, "go", tools=_Echo(), approve="all", log=False), block())
            return rec

        rec = asyncio.run(main())
    assert rec.status == "ok" and [s.kind for s in rec.steps] == ["model", "tool", "model"]
    lag = rec.metrics.loop_lag_ms
    assert lag is not None and lag >= 200  # the turn's figure is its first step's, as its TTFT is
    assert rec.metrics.wait_ms is not None and rec.metrics.wait_ms.client_lag >= 200
