"""What a screen shows of the MCP servers, without the SDK: each server's start (:class:`Startup`)
and state (:class:`ServerView`). Kept apart from the host so the chat can import it at no cost."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..base import ToolSpec

State = Literal["starting", "ready", "failed", "gone", "closed"]


@dataclass(frozen=True, slots=True)
class Startup:
    """How one server's start went: each step's time (None: not reached, or no process for HTTP)."""

    name: str
    transport: Literal["stdio", "http"]
    spawn_ms: float | None = None
    initialize_ms: float | None = None
    list_tools_ms: float | None = None
    tool_count: int = 0
    error: str | None = None


@dataclass(frozen=True, slots=True)
class ServerView:
    """One server as a screen shows it: what it is, how it is, and the tools the host offers of it."""

    name: str
    shown: str  # the command line, or the URL with credentials masked; never env nor headers
    state: State
    startup: Startup
    error: str | None
    server_info: str | None
    log_path: Path | None
    tools: tuple[ToolSpec, ...]


def timings(st: Startup) -> str:
    """``spawn 9 ms · initialize 480 ms · list tools 3 ms``: the steps the start reached."""
    steps = (("spawn", st.spawn_ms), ("initialize", st.initialize_ms), ("list tools", st.list_tools_ms))
    return " · ".join(f"{label} {value:.0f} ms" for label, value in steps if value is not None)


def startup_line(view: ServerView) -> str:
    """One server's start in a line, for a script's stderr (control characters are the caller's to show)."""
    if view.state in ("failed", "starting"):
        return f"mcp {view.name}: {view.error or view.state}"
    took = timings(view.startup)
    return f"mcp {view.name}: {view.state}" + (f" · {took}" if took else "") + f" · {len(view.tools)} tools"
