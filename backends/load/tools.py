"""The tools of a bench run under load (``ttft bench --tool-latency MS`` or ``--mcp SPEC``).

With tools, each request of a level is one agent turn (:class:`backends.agent.loop.AgentTurn`): the
model, the tool calls it asks for, their results back, until an answer or ``max_steps``. The tools
are a stub that answers after a set delay (:mod:`backends.agent.stub`) or the MCP servers given,
started once per run in each load process (before anything is timed) and shared by all of its streams (their calls run
concurrently). The bench is headless: every tool offered is allowed, as ``--allow-tools`` would.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..agent.consent import Consent
from ..agent.host import DEFAULT_MAX_RESULT_BYTES, ToolHost
from ..agent.loop import DEFAULT_MAX_STEPS
from ..agent.stub import StubHost
from ..mcp.config import DEFAULT_CALL_TIMEOUT_S, DEFAULT_START_TIMEOUT_S
from ..providers.config import McpServerConfig


@dataclass(frozen=True)
class ToolsConfig:
    """Where a run's tools come from: the stub (``latency_ms``) or MCP servers (``servers``), never both.
    Plain data, so a worker process builds its own host from it."""

    latency_ms: float | None = None
    servers: tuple[McpServerConfig, ...] = ()
    max_steps: int = DEFAULT_MAX_STEPS
    start_timeout_s: float = DEFAULT_START_TIMEOUT_S
    call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S

    def describe(self) -> dict[str, object]:
        """What the summary says of the tools (never a server's env or headers)."""
        from ..mcp.config import shown

        if self.latency_ms is not None:
            return {"kind": "stub", "latency_ms": self.latency_ms, "tools": ["lookup"], "max_steps": self.max_steps}
        return {"kind": "mcp", "servers": [shown(s) for s in self.servers], "max_steps": self.max_steps}


def consent() -> Consent:
    """The bench asks nobody: every tool offered runs."""
    return Consent(allow_all=True)


async def open_host(tools: ToolsConfig, on_notice: Callable[[str], None] | None = None) -> ToolHost:
    """The run's tool host, started: the stub at once, the MCP servers in parallel (one that fails to start
    is a notice, and the others' tools are offered)."""
    if tools.latency_ms is not None:
        return StubHost(tools.latency_ms)
    from ..mcp.host import start_host

    return await start_host(
        tools.servers,
        on_notice=on_notice,
        start_timeout_s=tools.start_timeout_s,
        call_timeout_s=tools.call_timeout_s,
        max_result_bytes=DEFAULT_MAX_RESULT_BYTES,
    )
