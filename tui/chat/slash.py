"""The chat's slash commands: a line typed in the prompt box read as a typed command, or as a prompt.

:func:`parse` turns ``/attach PATH…``, ``/detach [N]``, ``/tools`` and ``/compare [SPEC]`` into one
frozen record each (any other text is a prompt: ``None``); the screen dispatches on the record's type,
and the modules that carry each one out (:mod:`tui.chat.attach`, :mod:`tui.chat.compare`) talk back
to it in messages. ``while_busy``: whether the command may run while a turn is in flight (a list or a
file for the next prompt may; opening the comparison may not, and its text stays in the box).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .attach import ATTACH, DETACH

TOOLS = "/tools"
COMPARE = "/compare"


@dataclass(frozen=True, slots=True)
class Attach:
    """``/attach PATH…``: files for the next prompt (the paths as typed, shell-quoted when they hold spaces)."""

    args: str
    while_busy: ClassVar[bool] = True


@dataclass(frozen=True, slots=True)
class Detach:
    """``/detach`` (every file) or ``/detach N`` (the Nth, from 1)."""

    args: str
    while_busy: ClassVar[bool] = True


@dataclass(frozen=True, slots=True)
class Tools:
    """``/tools``: the MCP servers and their tools."""

    while_busy: ClassVar[bool] = True


@dataclass(frozen=True, slots=True)
class Compare:
    """``/compare [SPEC]``: the compare screen with this chat's model and ``spec`` (asked for when None)."""

    spec: str | None
    while_busy: ClassVar[bool] = False


Command = Attach | Detach | Tools | Compare


def parse(text: str) -> Command | None:
    """The command ``text`` types (its first word, then its arguments), or None: a prompt to send."""
    word, _, args = text.strip().partition(" ")
    if word == ATTACH:
        return Attach(args)
    if word == DETACH:
        return Detach(args)
    if word == TOOLS:
        return Tools()
    if word == COMPARE:
        return Compare(args.strip() or None)
    return None
