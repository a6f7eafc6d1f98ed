"""A Client's MCP servers: started by its first turn on an event loop, kept for its later turns there, and
ended by close() or the loop's end. Real parts: the official SDK's MCP server over stdio (its every start
counted by the shell that launches it) and a loopback model that asks for its tool."""

from __future__ import annotations

import asyncio
import shlex
import sys
from pathlib import Path

import pytest
from ttft.backends import api

from tests.fakes.agent_server import AgentServer, Call, Step
from tests.support.paths import ROOT

SCRIPT = [Step(calls=(Call("echo", {"text": "from the tool"}),)), Step(text="Done.")]


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "TTFT_MODEL", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))
    (tmp_path / "conf").mkdir()
    monkeypatch.setenv("TTFT_CONFIG_DIR", str(tmp_path / "conf"))
    return tmp_path


def _counted(starts: Path) -> str:
    """An --mcp command that notes each start of the server in ``starts``, then becomes the server."""
    server = f"{shlex.quote(sys.executable)} {shlex.quote(str(ROOT / 'tests' / 'fakes' / 'mcp_server.py'))}"
    return f"sh -c {shlex.quote(f'echo up >> {shlex.quote(str(starts))}; exec {server}')}"


def _starts(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_the_synchronous_turns_of_a_client_start_its_servers_once(env: Path) -> None:
    starts = env / "starts"
    with AgentServer(SCRIPT) as srv:
        client = api.Client("compat:m", base_url=srv.base_url, tools=_counted(starts), approve="all", log=False)
        try:
            first, second = client.prompt("go"), client.prompt("again")
            assert first.status == second.status == "ok" and _starts(starts) == 1
            assert [s.kind for s in second.steps] == ["model", "tool", "model"]  # the kept server answered
            assert first.metrics.mcp_start_ms is not None and first.metrics.mcp_start_ms > 0
            assert second.metrics.mcp_start_ms is None  # nothing started for it
        finally:
            client.close()
        third = client.prompt("after close")
        client.close()
    assert third.status == "ok" and _starts(starts) == 2  # closed: the next turn starts them anew
    assert third.metrics.mcp_start_ms is not None


def test_an_async_client_keeps_them_on_its_loop_and_the_loops_end_ends_them(env: Path) -> None:
    starts = env / "starts"
    with AgentServer(SCRIPT) as srv:
        client = api.Client("compat:m", base_url=srv.base_url, tools=_counted(starts), approve="all", log=False)

        async def two_at_once() -> list[api.TurnRecord]:
            return list(await asyncio.gather(client.aprompt("one"), client.aprompt("two")))

        together = asyncio.run(two_at_once())  # begun together: one start, which both wait for
        assert [r.status for r in together] == ["ok", "ok"] and _starts(starts) == 1
        assert sum(r.metrics.mcp_start_ms is not None for r in together) == 1
        again = asyncio.run(client.aprompt("a new loop"))  # the last loop's end ended them
    assert again.status == "ok" and _starts(starts) == 2


def test_run_turn_starts_its_servers_for_the_one_turn(env: Path) -> None:
    starts = env / "starts"
    with AgentServer(SCRIPT) as srv:
        target = api.resolve("compat:m", srv.base_url)
        for prompt in ("one", "two"):
            rec = api.run_turn(target, prompt, tools=_counted(starts), approve="all", log=False)
            assert rec.status == "ok" and rec.metrics.mcp_start_ms is not None
    assert _starts(starts) == 2
