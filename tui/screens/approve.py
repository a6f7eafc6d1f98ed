"""Asking before a tool call runs: the server, the tool and its arguments, and the person's answer.

Everything shown came from outside (the tool's name and description from its server, the arguments
from the model): control characters are made visible, never run, and long arguments are folded (the
tool gets them whole). The answers: allow once (``a``), always allow this tool for the rest of the
chat (``A`` or ``s``), deny (``d`` or Esc: the model is told the call did not run), or stop the whole
turn (``x``, as Esc does in the chat).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import ClassVar, Literal

from rich.console import Group
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from telemetry import json_guard
from telemetry.json_guard import JsonRefused
from tui.format import visible_controls

Reply = Literal["once", "always", "deny", "stop"]
ARG_LINES = 24  # the arguments' first lines shown; the rest folded
ARG_CHARS = 3_000
DESCRIPTION_CHARS = 300
ARGS_PRETTY_BYTES = 256 * 1024  # larger arguments are shown as sent (indenting MBs would stall the screen)


@dataclass(frozen=True, slots=True)
class Approval:
    """One call to ask about: its tool, that tool's server and description, the arguments as the model
    sent them, and its place among the step's calls (``index`` from 0, of ``count``)."""

    tool: str
    server: str
    description: str
    arguments: str
    index: int = 0
    count: int = 1
    pane: str = ""  # the compare pane whose model asks (a comparison asks per call per pane)


def shown_arguments(arguments: str) -> tuple[str, str | None]:
    """The arguments as a person reads them (JSON indented when it reads as JSON), folded to their first
    lines, with what was folded said; made visible."""
    text = arguments
    if arguments.strip():
        try:
            text = json.dumps(
                json_guard.loads(arguments, "the arguments", max_bytes=ARGS_PRETTY_BYTES), indent=2, ensure_ascii=False
            )
        except JsonRefused:
            text = arguments
    text = visible_controls(text)
    lines = text.splitlines()
    shown = "\n".join(lines[:ARG_LINES])
    if len(shown) > ARG_CHARS:
        shown = shown[:ARG_CHARS]
    if shown == text:
        return text, None
    rest = max(0, len(lines) - ARG_LINES)
    more = f"{rest:,} more lines, " if rest else ""
    return shown + " …", f"{more}{len(arguments):,} characters in all: the tool gets them whole"


class ApproveScreen(ModalScreen[Reply | None]):
    """The dialog before a tool call; dismissed with the answer (``stop``: end the turn; None: the turn
    ended meanwhile, nothing to answer)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("a", "reply('once')", "Allow once"),
        Binding("A,s", "reply('always')", "Always allow"),
        Binding("d,escape", "reply('deny')", "Deny"),
        Binding("x", "reply('stop')", "Stop the turn"),
    ]
    DEFAULT_CSS = """
    ApproveScreen { align: center middle; }
    ApproveScreen > Vertical {
        width: 90%; max-width: 110; height: auto; max-height: 90%;
        border: round $warning; background: $surface; padding: 0 1;
    }
    ApproveScreen #approve-body { height: auto; max-height: 30; }
    ApproveScreen Horizontal { height: auto; margin: 1 0 0 0; }
    ApproveScreen Button { margin: 0 1 0 0; }
    """

    def __init__(self, approval: Approval) -> None:
        super().__init__()
        self.approval = approval

    def compose(self) -> ComposeResult:
        a = self.approval
        tool = visible_controls(a.tool)
        which = f" ({a.index + 1} of {a.count} in this step)" if a.count > 1 else ""
        head = Text.assemble(
            (f"Pane {visible_controls(a.pane)}: run this tool call?" if a.pane else "Run this tool call?", "bold"),
            which,
        )
        where = Text.assemble(("tool    ", "dim"), (tool, "bold cyan"))
        server = Text.assemble(("server  ", "dim"), visible_controls(a.server) or "(none)")
        desc = " ".join(visible_controls(a.description).split())
        if len(desc) > DESCRIPTION_CHARS:
            desc = desc[:DESCRIPTION_CHARS] + " …"
        args, notice = shown_arguments(a.arguments)
        body: list[Text] = [where, server]
        if desc:
            body.append(Text.assemble(("about   ", "dim"), (desc, "italic")))
        body.append(Text("arguments", style="dim"))
        body.append(Text(args or "(none)", style="" if args else "dim italic"))
        if notice is not None:
            body.append(Text(f"… {notice}", style="yellow"))
        with Vertical():
            yield Static(head)
            with VerticalScroll(id="approve-body"):
                yield Static(Group(*body), id="approve-call")
            with Horizontal():
                yield Button("Allow once (a)", id="once", variant="success")
                yield Button(f"Always allow {tool[:30]} (A/s)", id="always", variant="primary")
                yield Button("Deny (d, Esc)", id="deny", variant="error")
                yield Button("Stop the turn (x)", id="stop")
            scope = "this comparison, in every pane" if a.pane else "this chat"
            yield Static(
                Text(f"Always: for the rest of {scope}. Deny: the model is told the call did not run.", style="dim")
            )

    def on_mount(self) -> None:
        self.query_one("#once", Button).focus()

    def action_reply(self, reply: Reply) -> None:
        self.dismiss(reply)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id in ("once", "always", "deny", "stop"):
            self.dismiss(event.button.id)  # type: ignore[arg-type]
