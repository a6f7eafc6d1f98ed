"""A stand-in for tool servers under load: every tool answers one fixed short text after a set delay.

``ttft bench --tool-latency MS`` offers the model one tool, ``lookup(query)``, and answers each call
after ``MS`` milliseconds with :data:`STUB_ANSWER`, whatever was asked. The bench then measures the
agent loop's own shape (model, tool, model) against a server without an MCP server's variance: each
tool step takes the latency set, so the rest of a turn is the model's and ttft's.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass
from typing import Any

from ..base import ToolSpec
from .host import ToolResult

STUB_SERVER = "stub"
STUB_ANSWER = "stub result: 42"
LOOKUP = ToolSpec(
    name="lookup",
    description="Look up a short fact about a query and return it as text.",
    input_schema={
        "type": "object",
        "properties": {"query": {"type": "string", "description": "what to look up"}},
        "required": ["query"],
    },
    server=STUB_SERVER,
)
MAX_LATENCY_MS = 3_600_000.0  # an hour: past it a stub tool is a typo, not a plan


def latency_problem(ms: float) -> str | None:
    """Why ``ms`` cannot be a stub tool's latency (a phrase for ``--tool-latency``), or None."""
    if math.isnan(ms) or math.isinf(ms) or ms < 0:
        return f"expected milliseconds from 0 up, got {ms:g}"
    if ms > MAX_LATENCY_MS:
        return f"expected at most {MAX_LATENCY_MS:g} ms (an hour), got {ms:g}"
    return None


@dataclass(frozen=True, slots=True)
class StubHost:
    """The :class:`~backends.agent.host.ToolHost` of ``--tool-latency``: ``lookup`` answers
    :data:`STUB_ANSWER` after ``latency_ms``. Holds no state: one host serves every stream."""

    latency_ms: float

    def tools(self) -> list[ToolSpec]:
        return [LOOKUP]

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        if name != LOOKUP.name:  # the loop already answers a name no host has; a host says it too
            return ToolResult(f"No tool named {name!r} here.", is_error=True)
        if self.latency_ms > 0:
            await asyncio.sleep(self.latency_ms / 1000)
        return ToolResult(STUB_ANSWER, size_bytes=len(STUB_ANSWER))

    async def aclose(self) -> None:
        return None
