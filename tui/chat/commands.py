"""The chat screen's commands: its key bindings, and its entries in the command palette, each a row
of one table. Both are the screen's own: they apply while the chat is on top, not under another screen."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import Protocol

from textual.app import SystemCommand
from textual.binding import Binding, BindingType

from telemetry.settings import TurnSettings

BINDINGS: list[BindingType] = [
    Binding("escape", "cancel_turn", "Cancel"),
    Binding("ctrl+r", "regenerate", "Regenerate", priority=True),
    Binding("ctrl+n", "new_chat", "New chat", priority=True),
    Binding("ctrl+y", "copy_answer", "Copy answer", priority=True),
    Binding("ctrl+e", "export", "Export", priority=True),
    Binding("f2", "settings", "Settings"),
    Binding("ctrl+t", "toggle_stream", "Stream on/off", show=False, priority=True),
    Binding("ctrl+o", "cycle_effort", "Reasoning effort", show=False, priority=True),
    Binding("ctrl+l", "settings('model')", "Model", show=False, priority=True),
    Binding("f3", "sessions", "Sessions"),
    Binding("f4", "toggle_pane", "Pane"),
    Binding("f9", "compare", "Compare"),
    Binding("f1", "help", "Help"),
]

Action = Callable[[], Awaitable[object] | None]


class Chat(Protocol):
    """What the palette drives: the chat screen's actions."""

    def action_cancel_turn(self) -> None: ...

    async def action_regenerate(self) -> None: ...

    async def action_new_chat(self) -> None: ...

    def action_copy_answer(self) -> None: ...

    async def action_export(self) -> object: ...

    def action_settings(self, focus: str | None = None) -> None: ...

    def action_toggle_stream(self) -> None: ...

    def action_cycle_effort(self) -> None: ...

    def action_toggle_speculative(self) -> None: ...

    async def action_compare(self, spec: str | None = None) -> None: ...

    def action_sessions(self) -> None: ...

    def action_toggle_pane(self) -> None: ...

    def action_help(self) -> None: ...


def palette(chat: Chat, s: TurnSettings) -> Iterator[SystemCommand]:
    """The chat's palette entries, (title, help, action) each; the toggles' titles say what they would
    do with the next turn's settings ``s``."""
    rows: list[tuple[str, str, Action]] = [
        ("Cancel the turn in flight", "Esc: stop now and keep what arrived", chat.action_cancel_turn),
        ("Regenerate the last answer", "ctrl+r", chat.action_regenerate),
        ("New chat", "ctrl+n: a fresh conversation and session log", chat.action_new_chat),
        ("Copy the last answer", "ctrl+y", chat.action_copy_answer),
        ("Export the session (JSONL + CSV)", "ctrl+e", chat.action_export),
        ("Settings", "F2: model, reasoning, tokens, temperature, streaming", chat.action_settings),
        ("Change the model", "ctrl+l", lambda: chat.action_settings("model")),
        (
            f"Streaming: turn {'off' if s.stream else 'on'}",
            "ctrl+t: applies to the next turn",
            chat.action_toggle_stream,
        ),
        ("Reasoning effort: next level", f"ctrl+o: now {s.reasoning_effort or 'default'}", chat.action_cycle_effort),
        (
            f"Speculative decoding: turn {'off' if s.speculative else 'on'}",
            "local models: prompt-lookup drafting",
            chat.action_toggle_speculative,
        ),
        ("Compare with another model…", "F9 or /compare SPEC: side by side, same context", chat.action_compare),
        ("Sessions: reopen a past chat", "F3", chat.action_sessions),
        ("Toggle the telemetry pane", "F4", chat.action_toggle_pane),
        ("Help: keys and metrics", "F1", chat.action_help),
    ]
    for title, help_text, action in rows:
        yield SystemCommand(title, help_text, action)
