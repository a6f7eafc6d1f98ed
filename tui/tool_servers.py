"""The MCP tool servers of a chat or a comparison (``--mcp``): started on the stream thread, where the
turns run (so a turn's tool calls reach them on their own loop), their notices said on the screen,
closed with it.

The start runs in the background while the user types. Each server's tools are offered as soon as
that server is ready, and ``/tools`` says each one's own state meanwhile (before the servers are even
spawned, each is listed as starting).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any

from textual.screen import Screen

from ..backends.mcp.config import DEFAULT_CALL_TIMEOUT_S, DEFAULT_START_TIMEOUT_S, shown
from ..backends.mcp.views import ServerView, Startup, State
from ..backends.providers.config import McpServerConfig
from .format import visible_controls
from .runner import LoopThread

if TYPE_CHECKING:
    from ..backends.mcp.host import McpHost

CLOSE_WAIT_S = 15.0


class ToolServers:
    def __init__(
        self,
        servers: Sequence[McpServerConfig] = (),
        *,
        start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
        call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S,
    ) -> None:
        self.servers = list(servers)
        self.start_timeout_s = start_timeout_s
        self.call_timeout_s = call_timeout_s
        self.host: McpHost | None = None
        self.error: str | None = None
        self._closed = False

    def again(self) -> ToolServers:
        """The same servers, not started: another screen's own set (a comparison opened from the chat)."""
        return ToolServers(self.servers, start_timeout_s=self.start_timeout_s, call_timeout_s=self.call_timeout_s)

    def begin(self, screen: Screen[Any], runner: LoopThread) -> None:
        """Start them in the background of ``screen`` (while the user types); each notice said there."""
        if not self.servers:
            return
        self._closed = False
        loop = asyncio.get_running_loop()

        def said(text: str) -> None:
            screen.notify(visible_controls(text), severity="warning", markup=False, timeout=10)

        def notice(text: str) -> None:  # on the stream thread: handed over, never waited for
            with contextlib.suppress(RuntimeError):  # the screen's loop already closed
                loop.call_soon_threadsafe(said, text)

        screen.run_worker(self.start(runner, notice), group="tools", exit_on_error=False)

    async def start(self, runner: LoopThread, notice: Callable[[str], None]) -> None:
        """Start the servers on ``runner``'s loop; ``notice`` is called there (it must hand over itself)."""
        if not self.servers:
            return
        from ..backends.mcp.host import start_host

        def spawned(host: McpHost) -> None:  # on the runner's loop: a turn from now on offers what is ready
            if not self._closed:
                self.host = host

        def begin() -> Coroutine[Any, Any, McpHost]:  # a coroutine: it runs on the runner's loop
            return start_host(
                self.servers,
                on_notice=notice,
                start_timeout_s=self.start_timeout_s,
                call_timeout_s=self.call_timeout_s,
                on_start=spawned,
            )

        try:
            host = await runner.call(begin)
            if not self._closed:
                self.host = host
        except Exception as exc:  # a bug of ours: the chat goes on without tools, and says so
            self.error = f"the MCP servers could not be started: {exc}"
            notice(self.error)

    def views(self) -> list[ServerView]:
        """Each server as it is now (as starting, until the start is over)."""
        if self.host is not None:
            return self.host.servers()
        state: State = "failed" if self.error else "starting"
        return [
            ServerView(
                name=s.name,
                shown=shown(s),
                state=state,
                startup=Startup(s.name, "http" if s.url else "stdio", error=self.error),
                error=self.error,
                server_info=None,
                log_path=None,
                tools=(),
            )
            for s in self.servers
        ]

    async def close(self, runner: LoopThread) -> None:
        self._closed = True
        host, self.host = self.host, None
        if host is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(runner.call(host.aclose), CLOSE_WAIT_S)
