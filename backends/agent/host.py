"""What the agent loop needs from whatever holds the tools: their specs, and a call that answers.

The loop (``backends.agent``) sees only :class:`ToolHost`; the MCP client (``backends.mcp``) is the
host a user configures, and tests give their own. A host never raises for a tool's own failure: the
failure is a :class:`ToolResult` with ``is_error`` set, which goes back to the model as an error result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One tool as offered to the model: ``input_schema`` is its JSON Schema for the arguments."""

    name: str
    description: str
    input_schema: dict[str, Any] = field(default_factory=dict)
    server: str = ""  # the MCP server that holds it (its configured name, or the spec shown masked)


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a call gave back, as text for the model. ``size_bytes`` is the result's size before any cut;
    ``truncated`` says the text was cut to the host's cap (the loop says so to the user)."""

    text: str
    is_error: bool = False
    size_bytes: int = 0
    truncated: bool = False


class ToolHost(Protocol):
    """The tools of one turn, and how to call them."""

    def tools(self) -> list[ToolSpec]:
        """Every tool on offer, in a stable order; names are unique within a host."""
        ...

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Run tool ``name`` with ``arguments``. A tool's error, a dead server or a timeout is a result
        with ``is_error``; only cancellation (Esc) propagates."""
        ...

    async def aclose(self) -> None:
        """End every server the host started."""
        ...
