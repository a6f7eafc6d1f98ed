"""The MCP tool servers (``/tools``): each server's state, how long its start took (spawn, initialize,
list tools), its stderr log, and the tools the model is offered, each with its description.

Everything here came from a server (names, descriptions, errors, its own name and version): each
string is shown with its control characters made visible, as plain text, never as markup.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ...backends.mcp.views import ServerView, timings
from ..format import visible_controls

REFRESH_S = 0.5  # while a server is starting, its line changes as it gets ready
DESCRIPTION_CHARS = 160
STATE_STYLE = {"ready": "green", "starting": "yellow", "failed": "red", "gone": "red", "closed": "dim"}
NONE_YET = "No MCP servers. Start the chat with --mcp SPEC (a [mcp.NAME] from config.toml, a command line or a URL)."


def _text(value: str, style: str = "") -> Text:
    return Text(visible_controls(value), style=style)


def _first_line(text: str) -> str:
    line = text.strip().split("\n", 1)[0]
    return line if len(line) <= DESCRIPTION_CHARS else line[: DESCRIPTION_CHARS - 1] + "…"


def render_servers(views: Sequence[ServerView]) -> Group | Text:
    """Every server, then its tools: one block each."""
    if not views:
        return Text(NONE_YET)
    blocks: list[Text | Table] = []
    for view in views:
        head = Text()
        head.append_text(_text(view.name, "bold"))
        head.append("  ")
        head.append(view.state, style=STATE_STYLE.get(view.state, ""))
        if view.server_info:
            head.append("  ")
            head.append_text(_text(view.server_info, "dim"))
        blocks.append(head)
        about = Table.grid(padding=(0, 2))
        about.add_column(style="dim", no_wrap=True)
        about.add_column()
        about.add_row(Text("runs"), _text(view.shown))
        if took := timings(view.startup):
            about.add_row(Text("start"), Text(took))
        if view.error:
            about.add_row(Text("error"), _text(view.error, "red"))
        if view.log_path is not None:
            about.add_row(Text("stderr"), _text(str(view.log_path)))
        tools = Table.grid(padding=(0, 2))
        tools.add_column(style="bold cyan", no_wrap=True)
        tools.add_column()
        for tool in view.tools:
            tools.add_row(_text(tool.name), _text(_first_line(tool.description)))
        about.add_row(Text("tools"), tools if view.tools else Text("none offered", style="dim"))
        blocks.append(about)
        blocks.append(Text(""))
    return Group(*blocks)


class ToolsScreen(ModalScreen[None]):
    """``views`` is read again while any server is still starting."""

    BINDINGS: ClassVar[list[BindingType]] = [("escape,q", "app.pop_screen", "Close")]
    DEFAULT_CSS = """
    ToolsScreen { align: center middle; }
    ToolsScreen > VerticalScroll {
        width: 90%; max-width: 120; height: 90%;
        border: round $primary; background: $surface; padding: 0 1;
    }
    """

    def __init__(self, views: Callable[[], Sequence[ServerView]]) -> None:
        super().__init__()
        self.views = views

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(Text("MCP tool servers", style="bold underline"))
            yield Static(id="servers")
            yield Static(Text("Esc closes this list.", style="dim"))

    def on_mount(self) -> None:
        self.refresh_servers()
        self.set_interval(REFRESH_S, self.refresh_servers)

    def refresh_servers(self) -> None:
        self.query_one("#servers", Static).update(render_servers(self.views()))
