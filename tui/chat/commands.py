"""The chat screen's commands: its key bindings, and its entries in the command palette, each a row
of one table. Both are the screen's own: they apply while the chat is on top, not under another screen.

Keys a terminal user knows keep their shell meaning: ctrl+r searches the prompt history, so
regenerate is F5 (reload); in the prompt box ctrl+e is the end of the line (or unfolds a folded
paste), so export is ctrl+s (save). The prompt box's own keys (Enter, ctrl+j, Up/Down, Tab) are its
bindings (:mod:`tui.widgets.prompt_box`).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Protocol

from textual.app import SystemCommand
from textual.binding import Binding, BindingType

from ...telemetry.settings import TurnSettings

BINDINGS: list[BindingType] = [
    Binding("escape", "cancel_turn", "Cancel"),
    Binding("ctrl+r", "search_history", "Search prompts", priority=True),
    Binding("f5", "regenerate", "Regenerate"),
    Binding("ctrl+n", "new_chat", "New chat", priority=True),
    Binding("ctrl+y", "copy_answer", "Copy answer", priority=True),
    Binding("ctrl+s", "export", "Export", priority=True),
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

    def action_tools(self) -> None: ...

    def action_search_history(self) -> None: ...

    async def action_edit_prompt(self, turn_index: int) -> None: ...

    def action_copy_code(self, number: int) -> None: ...

    def action_attach_file(self) -> None: ...

    async def action_detach(self, index: int) -> None: ...


def palette(
    chat: Chat,
    s: TurnSettings,
    *,
    prompts: Sequence[tuple[int, str]] = (),
    blocks: Sequence[tuple[int, str]] = (),
    files: Sequence[str] = (),
) -> Iterator[SystemCommand]:
    """The chat's palette entries, (title, help, action) each; the toggles' titles say what they would
    do with the next turn's settings ``s``. What is on screen now adds one entry each: the ``prompts``
    that can be edited (turn index, text), the code ``blocks`` (number, what), the attached ``files``."""
    rows: list[tuple[str, str, Action]] = [
        (
            "Cancel the turn in flight",
            "Esc: stop now and keep what arrived (the prompt box keeps its text)",
            chat.action_cancel_turn,
        ),
        ("Regenerate the last answer", "F5: a new branch in its place", chat.action_regenerate),
        ("Search earlier prompts", "ctrl+r: as you type; Up/Down in the box walk them too", chat.action_search_history),
        (
            "Attach a file…",
            "/attach PATH (Tab completes), listed above the prompt until it is sent",
            chat.action_attach_file,
        ),
        ("New chat", "ctrl+n: a fresh conversation and session log", chat.action_new_chat),
        ("Copy the last answer", "ctrl+y", chat.action_copy_answer),
        ("Export the session (JSONL + CSV)", "ctrl+s", chat.action_export),
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
        ("MCP tools: servers and their tools", "/tools: each server's state, start times and tools", chat.action_tools),
        ("Help: keys and metrics", "F1", chat.action_help),
    ]
    for turn_index, prompt in prompts:
        rows.append(
            (
                f"Edit prompt {turn_index + 1}: {prompt}",
                "or click the prompt: change it, Enter sends it as a new branch (the old one stays in the log)",
                functools.partial(chat.action_edit_prompt, turn_index),
            )
        )
    for number, what in blocks:
        rows.append((f"Copy code block {number} ({what})", "or click its header: to the clipboard (OSC 52)",
                     functools.partial(chat.action_copy_code, number)))  # fmt: skip
    for k, name in enumerate(files):
        rows.append(
            (f"Remove attached file {k + 1}: {name}", f"/detach {k + 1}", functools.partial(chat.action_detach, k))
        )
    for title, help_text, action in rows:
        yield SystemCommand(title, help_text, action)
