"""TEST SUPPORT: an in-process :class:`backends.agent.host.ToolHost` whose tools sleep, answer, or fail.

Each tool is a :class:`FakeTool`: its answer (text, or an error), how long it takes, its server's
name. The host records every call (name, arguments) and how many ran at once at most, so a test can
tell parallel calls from sequential ones.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest
from ttft.backends.agent.host import ToolHost, ToolResult
from ttft.backends.base import ToolSpec
from ttft.tui.tool_servers import ToolServers

from tests.fakes.agent_server import Call, Step


@dataclass(frozen=True)
class FakeTool:
    name: str
    text: str = "ok"
    delay_s: float = 0.0
    is_error: bool = False
    server: str = "fake"
    raises: bool = False  # a host that breaks its contract and raises


class FakeHost:
    def __init__(self, *tools: FakeTool, max_result_bytes: int = 65536) -> None:
        self._tools = {t.name: t for t in tools}
        self.max_result_bytes = max_result_bytes
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.closed = False

    def tools(self) -> list[ToolSpec]:
        schema = {"type": "object", "properties": {"q": {"type": "string"}}}
        return [ToolSpec(t.name, f"the {t.name} tool", schema, t.server) for t in self._tools.values()]

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        tool = self._tools[name]
        self.calls.append((name, arguments))
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if tool.delay_s:
                await asyncio.sleep(tool.delay_s)
        finally:
            self.in_flight -= 1
        if tool.raises:
            raise RuntimeError("the server went away")
        raw = tool.text.encode()
        if len(raw) > self.max_result_bytes:
            cut = raw[: self.max_result_bytes].decode("utf-8", "ignore")
            return ToolResult(cut, tool.is_error, len(raw), truncated=True)
        return ToolResult(tool.text, tool.is_error, len(raw))

    async def aclose(self) -> None:
        self.closed = True


def stand_in_mcp(mp: pytest.MonkeyPatch, host: FakeHost) -> dict[str, Any]:
    """Stand in for the MCP client: ``ttft.backends.mcp.config.resolve_specs`` takes any spec as it is, and
    ``ttft.backends.mcp.host.start_host`` hands out ``host``: ``ttft ask --mcp SPEC`` then runs its tools.
    Returns what ``start_host`` was given (``servers``, ``kw``)."""
    import ttft.backends.mcp.config
    import ttft.backends.mcp.host

    seen: dict[str, Any] = {}

    async def start_host(servers: list[str], **kw: Any) -> FakeHost:
        seen["servers"], seen["kw"] = servers, kw
        return host

    mp.setattr(ttft.backends.mcp.config, "resolve_specs", lambda specs: list(specs))
    mp.setattr(ttft.backends.mcp.host, "start_host", start_host)
    return seen


# The model's script of the usual tool turn (tests/fakes/agent_server.py): one call of ``search``, then the answer.
SEARCH_THEN_ANSWER = (Step(calls=(Call("search", {"q": "noon"}),), first_ms=20), Step(text="It is noon.", first_ms=20))


def servers_holding(host: ToolHost) -> ToolServers:
    """The chat's and compare's tool servers with an in-process host in the MCP host's place, started."""
    tools = ToolServers()
    tools.host = host  # type: ignore[assignment]
    return tools
