"""ctrl+r: search the prompt history as you type, as a shell's reverse search does, with the matches listed.

Each word typed narrows the list (any case, in any order), newest first. Up/Down (or ctrl+r and
ctrl+s, as in a shell) move through the matches; Enter puts the one picked in the prompt box, to edit
or send (ctrl+z in the box brings back what was there); Esc leaves the box as it was.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from ...telemetry.log.prompt_history import PromptHistory
from ..format import visible_controls

SHOWN = 50  # matches listed
LINE_W = 200  # a match's first line, cut to this many characters (the list cuts it to its width)


def _label(text: str) -> Text:
    lines = text.split("\n")
    first = next((ln for ln in lines if ln.strip()), "")[:LINE_W]
    label = Text(visible_controls(first))
    if len(lines) > 1:
        label.append(f"  (+{len(lines) - 1} lines)", style="dim")
    return label


class HistorySearch(ModalScreen[str | None]):
    """The search over ``history``; dismisses with the prompt picked, or None."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss(None)", "Close"),
        Binding("up,ctrl+r", "move(1)", "Older", show=False, priority=True),
        Binding("down,ctrl+s", "move(-1)", "Newer", show=False, priority=True),
    ]
    DEFAULT_CSS = """
    HistorySearch { align: center bottom; background: $background 40%; }
    #history-search-box {
        width: 100%; max-height: 60%; height: auto; margin: 0 0 3 0;
        border: round $primary; background: $surface; padding: 0 1;
    }
    #history-search-box OptionList { height: auto; max-height: 16; border: none; }
    #history-search-help { color: $text-muted; }
    """

    def __init__(self, history: PromptHistory, query: str = "") -> None:
        super().__init__()
        self.history = history
        self.query_text = query
        self.matches: list[str] = []

    def compose(self) -> ComposeResult:
        with Vertical(id="history-search-box"):
            yield Input(self.query_text, placeholder="search earlier prompts: words, any order", id="history-query")
            yield OptionList(id="history-matches")
            yield Static(
                "↑/↓ or ctrl+r/ctrl+s move · Enter puts it in the prompt · Esc closes", id="history-search-help"
            )

    def on_mount(self) -> None:
        self.history.refresh()
        self.query_one(Input).focus()
        self._fill(self.query_text)

    @on(Input.Changed, "#history-query")
    def _typed(self, event: Input.Changed) -> None:
        self._fill(event.value)

    def _fill(self, query: str) -> None:
        self.matches = self.history.search(query, SHOWN)
        options = self.query_one(OptionList)
        options.clear_options()
        if self.matches:
            options.add_options([Option(_label(m)) for m in self.matches])
            options.highlighted = 0
        else:
            options.add_option(Option(Text("no earlier prompt matches", style="dim"), disabled=True))

    def action_move(self, step: int) -> None:
        options = self.query_one(OptionList)
        if not self.matches:
            return
        at = (options.highlighted or 0) + step
        options.highlighted = max(0, min(len(self.matches) - 1, at))

    @on(Input.Submitted, "#history-query")
    def _enter(self, event: Input.Submitted) -> None:
        event.stop()
        self._pick(self.query_one(OptionList).highlighted)

    @on(OptionList.OptionSelected, "#history-matches")
    def _clicked(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self._pick(event.option_index)

    def _pick(self, index: int | None) -> None:
        if index is not None and 0 <= index < len(self.matches):
            self.dismiss(self.matches[index])
        else:
            self.dismiss(None)
