"""The command palette's own entries: each screen offers its commands, and an app shows those of the
screen the palette opens over or, under a dialog (settings, sessions, help), of the screen beneath it.

A screen's commands are its own, as its key bindings are: an app lists no screen's entries itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

from textual.app import App, SystemCommand
from textual.screen import Screen


@runtime_checkable
class OffersCommands(Protocol):
    """A screen with entries of its own in the command palette."""

    def system_commands(self) -> Iterable[SystemCommand]: ...


def screen_commands(app: App[Any], screen: Screen[Any]) -> Iterable[SystemCommand]:
    """The entries of ``screen``, or of the nearest screen below it that offers some (none: nothing)."""
    stack = app.screen_stack
    below = stack[: stack.index(screen) + 1] if screen in stack else [screen]
    for s in reversed(below):
        if isinstance(s, OffersCommands):
            return s.system_commands()
    return ()
