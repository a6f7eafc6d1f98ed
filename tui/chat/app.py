"""ChatApp: ``ttft chat``, the process around the chat screen (:mod:`tui.chat.screen`).

The app holds what is one per process: the stream thread the turns run on (``LoopThread``), the stop
signals, the GC policy while the UI runs, the filter that keeps control characters off the terminal,
and which screen's entries the command palette lists (:mod:`tui.palette`). The chat itself, its
layout, keys, state and CSS, is the ``ChatScreen`` (``app.chat``), the app's base screen.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar

from textual.app import App, SystemCommand
from textual.driver import Driver
from textual.filter import LineFilter
from textual.screen import Screen

from ...telemetry import events as ev
from ...telemetry.log.turns import SessionLog
from ...telemetry.settings import TurnSettings
from .. import hangup, signals
from ..crash import KeepsRunning
from ..palette import screen_commands
from ..runner import LoopThread, full_collections_between_turns
from ..session import BackendFactory, ChatSession, default_backend_factory, default_model_spec
from ..terminal import with_drop_controls
from ..tool_servers import ToolServers
from .screen import ChatScreen

STOP_WAIT_S = 3.0  # SIGTERM/SIGHUP: how long the turn in flight gets to be recorded and logged before exit


class ChatApp(KeepsRunning, App[None]):
    TITLE = "ttft"
    DEFAULT_MODE: ClassVar[str] = "chat"

    def __init__(
        self,
        spec: str | None = None,
        *,
        settings: TurnSettings | None = None,
        base_url: str | None = None,
        factory: BackendFactory | None = None,
        resume: Path | None = None,
        session_id: str | None = None,
        clock: Callable[[], int] | None = None,
        fps: float = 30.0,
        warm_up: bool | None = None,
        tools: ToolServers | None = None,
    ) -> None:
        """``warm_up``: start the backend and pay its first-use costs at start-up, while the user types
        (None: for the real backends, i.e. no ``factory`` given; a factory's fakes only when asked);
        ``tools``: the MCP servers (``--mcp``), started with the chat and listed by ``/tools``."""
        super().__init__()
        self._gc_policy = contextlib.ExitStack()
        self.runner = LoopThread()
        session = ChatSession(
            self.runner,
            spec or default_model_spec(),
            settings or TurnSettings(),
            base_url,
            factory or default_backend_factory,
            SessionLog(session_id),
        )
        self.chat = ChatScreen(
            session,
            clock=clock or ev.now_ns,
            fps=fps,
            resume=resume,
            warm_up=factory is None if warm_up is None else warm_up,
            tools=tools,
        )
        # The base screen as a mode, not get_default_screen(): Textual loads a mode's screen's own
        # CSS_PATH, and a default screen's not.
        self.add_mode("chat", lambda: self.chat)
        self._signals: list[int] = []
        self._stopping = False

    def get_driver_class(self) -> type[Driver]:
        # A closed terminal ends the app at once; a paste is only text; bytes not UTF-8 are said, not fatal.
        return hangup.driver_class(super().get_driver_class())

    def get_line_filters(self) -> Sequence[LineFilter]:
        return with_drop_controls(super().get_line_filters())  # outside text never drives the terminal

    def on_mount(self) -> None:
        self._gc_policy.enter_context(full_collections_between_turns())
        self._signals = signals.install(asyncio.get_running_loop(), self._on_stop_signal)

    async def on_unmount(self) -> None:
        # The screens are gone by now: the chat's cancelled its turn in flight and closed its backend.
        signals.uninstall(asyncio.get_running_loop(), self._signals)
        self._gc_policy.close()
        self.runner.close()

    def _on_stop_signal(self, signum: int) -> None:
        """SIGTERM or SIGHUP (a container stop, the terminal closed): quit as ctrl+q would, and first let the
        turn in flight end as cancelled and be logged with what arrived; it is never just killed. The
        first one counts (a hangup may come twice: from the kernel and from the driver, tui.hangup)."""
        if self._stopping:
            return
        self._stopping = True
        self.chat.drafts.save()  # first: what was just typed is on disk whatever follows
        turns = self.chat.turns
        turns.cancel()  # at once, on the stream thread: the UI may be unable to paint (no terminal)

        async def stop() -> None:
            with contextlib.suppress(Exception):
                await turns.wait_idle(STOP_WAIT_S)
            self.exit(return_code=signals.exit_code(signals.Interrupted(signum)))

        self.run_worker(stop(), group="stop", exit_on_error=False)

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield from screen_commands(self, screen)
