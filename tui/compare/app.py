"""``ttft compare``: the compare screen (``tui.compare.screen``) as an app of its own.

Also where the scripts import the comparison's names from: the screen, its panes and the hand-off
back to the chat (the chat itself imports them from their own modules, the screen's only when it opens it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar

from textual.app import App, SystemCommand
from textual.driver import Driver
from textual.filter import LineFilter
from textual.screen import Screen

from ...backends.base import Backend
from ...backends.compare.runner import CompareRunner, PromptResult
from ...telemetry.compare.stats import Comparison
from .. import hangup, signals
from ..crash import KeepsRunning
from ..palette import screen_commands
from ..runner import LoopThread
from ..terminal import with_drop_controls
from .output import ChatHandoff
from .pane import PaneView
from .screen import CompareScreen

__all__ = ["ChatHandoff", "CompareApp", "CompareScreen", "PaneView"]


class CompareApp(KeepsRunning, App[int]):
    crash_where = "the compare screen"

    """``ttft compare``: the compare screen on its own (its layout, keys and CSS are the screen's)."""

    TITLE = "ttft compare"
    DEFAULT_MODE: ClassVar[str] = "compare"

    def __init__(self, backends: Sequence[Backend], **kwargs: Any) -> None:
        super().__init__()
        self.compare = CompareScreen(backends, **kwargs)
        self._signals: list[int] = []
        # The app's base screen as a mode, not get_default_screen(): Textual loads a mode's screen's own
        # CSS_PATH, and a default screen's not.
        self.add_mode("compare", lambda: self.compare)

    def on_mount(self) -> None:
        # SIGTERM / SIGHUP quit as ctrl+q does: the screen's unmount cancels the turns in flight and logs them
        self._signals = signals.install(
            asyncio.get_running_loop(), lambda s: self.exit(return_code=signals.exit_code(signals.Interrupted(s)))
        )

    def on_unmount(self) -> None:
        signals.uninstall(asyncio.get_running_loop(), self._signals)

    def get_driver_class(self) -> type[Driver]:
        # A closed terminal ends the app at once; a paste is only text; bytes not UTF-8 are said, not fatal.
        return hangup.driver_class(super().get_driver_class())

    def get_line_filters(self) -> Sequence[LineFilter]:
        return with_drop_controls(super().get_line_filters())  # outside text never drives the terminal

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield from screen_commands(self, screen)

    # The comparison's state, as scripts and tests read it.
    @property
    def results(self) -> list[tuple[PromptResult, Comparison]]:
        return self.compare.results

    @property
    def in_flight(self) -> bool:
        return self.compare.in_flight

    @property
    def runner(self) -> CompareRunner:
        return self.compare.runner

    @property
    def views(self) -> list[PaneView]:
        return self.compare.views

    @property
    def stream(self) -> LoopThread:
        return self.compare.stream

    @property
    def repeat(self) -> int:
        return self.compare.repeat

    @property
    def last_export(self) -> list[Path]:
        return self.compare.last_export
