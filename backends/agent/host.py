"""What the agent loop needs from whatever holds the tools: their specs, and a call that answers.

The loop (``backends.agent``) sees only :class:`ToolHost`; the MCP client (``backends.mcp``) is the
host a user configures, and tests give their own. A host never raises for a tool's own failure: the
failure is a :class:`ToolResult` with ``is_error`` set, which goes back to the model as an error result.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Protocol

from ..base import ToolSpec


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a call gave back, as text for the model. ``size_bytes`` is the result's size before any cut;
    ``truncated`` says the text was cut to the host's cap (the loop says so to the user)."""

    text: str
    is_error: bool = False
    size_bytes: int = 0
    truncated: bool = False


# A tool result the model reads is cut to this many bytes of UTF-8 (the host's cap).
DEFAULT_MAX_RESULT_BYTES = 65536


def cap(result: ToolResult, max_bytes: int = DEFAULT_MAX_RESULT_BYTES) -> ToolResult:
    """The result with its text cut to ``max_bytes`` of UTF-8 (a character cut in two is dropped whole),
    ``truncated`` set and ``size_bytes`` the size before any cut; a host that already cut it keeps its figures."""
    raw = result.text.encode("utf-8", "surrogatepass")
    size = result.size_bytes or len(raw)
    if len(raw) <= max_bytes:
        return replace(result, size_bytes=size)
    return replace(result, text=raw[:max_bytes].decode("utf-8", "ignore"), size_bytes=size, truncated=True)


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
