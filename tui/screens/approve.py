"""Asking before a tool call runs: the server, the tool and its arguments, and the person's answer.

Everything shown came from outside (the tool's name and description from its server, the arguments
from the model), so the dialog must not let one part hide another:

- every top-level key of the arguments is listed (one a line; in columns when there are many), its
  value cut in the middle (the cut said) so that no long value pushes a later key out of sight;
- below that, the whole arguments, scrollable (past ``WHOLE_CHARS`` their two ends, and the cut
  said); what they are (keys, size) and whether the end has been seen are said outside the scroll
  region, always in view;
- allowing (once or always, button or key) stays closed until the end of the arguments has been on
  screen; Deny and Stop are always open;
- control characters, bidi overrides and line separators are made visible, never run (a newline in
  a one-line field would draw rows that look like the dialog's own).

The answers: allow once (``a``), always allow this tool for the rest of the chat (``A`` or ``s``),
deny (``d`` or Esc: the model is told the call did not run), or stop the whole turn (``x``, as Esc
does in the chat). PageDown, PageUp, End, Home and the arrows scroll the arguments.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from rich.columns import Columns
from rich.console import Group, RenderableType
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from ...backends.base import MAX_TOOL_ARGUMENT_BYTES
from ...telemetry import json_guard
from ...telemetry.json_guard import JsonRefused
from ...telemetry.log.surrogates import scrub
from ..format import visible_controls

Reply = Literal["once", "always", "deny", "stop"]
ALLOWING: frozenset[str] = frozenset({"once", "always"})
KEY_CHARS = 32  # a key's length in the key list; a longer key is cut in the middle
VALUE_CHARS = 64  # a value's length in the key list, as JSON on one line; cut in the middle past it
MANY_KEYS = 12  # past this many keys the list is laid out in columns (narrower), to stay in view
MANY_KEY_CHARS = 20
MANY_VALUE_CHARS = 24
LISTED_KEYS = 1_000  # keys listed one a line; past it the list says how many more (the text below has all)
WHOLE_CHARS = 50_000  # the indented arguments drawn whole up to this (each layout pass wraps them all again)
DESCRIPTION_CHARS = 300
MIN_BODY_ROWS = 3

# Line breaks that ``visible_controls`` keeps (it is for multi-line text) and that a terminal or a
# Rich line may break on; in a one-line field each is shown as a control picture.
_BREAKS = str.maketrans({"\n": "\u240a", "\t": "\u2409", "\u2028": "<U+2028>", "\u2029": "<U+2029>"})
_SEPARATORS = str.maketrans({"\u2028": "<U+2028>", "\u2029": "<U+2029>"})


def shown(text: str) -> str:
    """Outside text as drawn over several lines: controls and separators visible, lone surrogates
    replaced (a JSON escape such as ``\\ud800`` decodes to one, which no terminal write can carry)."""
    return visible_controls(scrub(text)).translate(_SEPARATORS)


def one_line(text: str) -> str:
    """Outside text as drawn on one line: as :func:`shown`, and its line breaks and tabs visible too."""
    return visible_controls(scrub(text)).translate(_BREAKS)


def cut_middle(text: str, width: int, style: str = "") -> Text:
    """``text`` at most about ``width`` characters: its start and its end around a marked cut that
    says how much was left out (the marker styled apart, so text that imitates it reads as text)."""
    if len(text) <= width:
        return Text(text, style=style)
    head = (width + 1) // 2
    tail = width // 2
    gone = len(text) - head - tail
    return Text.assemble(
        (text[:head], style), (f"…⟨{gone:,} characters cut⟩…", "bold yellow"), (text[len(text) - tail :], style)
    )


_KINDS: dict[type, str] = {list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
_KINDS[type(None)] = "null"


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


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


@dataclass(slots=True)
class ShownArguments:
    """The arguments as the dialog draws them."""

    keys: list[Text] = field(default_factory=list)  # one line per top-level key, or one saying what they are
    columns: bool = False  # many keys: the list is laid out in columns
    text: str = ""  # the whole arguments: indented when they read as JSON, made visible
    facts: str = ""  # what they are: keys, characters, lines
    warnings: list[str] = field(default_factory=list)  # what is not drawn here, said outside the scroll region


def _key_lines(value: dict[str, Any], names: list[str], key_chars: int, value_chars: int) -> list[Text]:
    """One line per key: the key as JSON, then its value as one line of JSON (strings quoted, their
    newlines escaped, a nested value as it is written), each cut in the middle past its width."""
    keys = [cut_middle(one_line(json.dumps(k, ensure_ascii=False)), key_chars, "bold") for k in names]
    width = max((len(k.plain) for k in keys), default=0)
    lines = []
    for key, name in zip(keys, names, strict=True):
        key.append(":" + " " * (width - len(key.plain) + 1))
        key.append_text(cut_middle(one_line(json.dumps(value[name], ensure_ascii=False)), value_chars))
        lines.append(key)
    return lines


def shown_arguments(arguments: str) -> ShownArguments:
    """What the dialog draws for ``arguments``: the key list, the whole text (indented when it reads as
    JSON, as the tool will get it), the facts and any warning. Read through the untrusted-JSON guard,
    with the agent loop's own size limit."""
    out = ShownArguments()
    if not arguments.strip():
        out.facts = "no arguments"
        return out
    value: Any = None
    parsed = False
    try:
        value = json_guard.loads(arguments, "the arguments", max_bytes=MAX_TOOL_ARGUMENT_BYTES)
        text = json.dumps(value, indent=2, ensure_ascii=False)
        parsed = True
    except JsonRefused as exc:
        text = arguments
        out.keys.append(Text(f"{one_line(str(exc))}: shown below as sent", style="yellow"))
    facts = [_count(len(arguments), "character")]
    if isinstance(value, dict):
        facts.insert(0, _count(len(value), "key"))
        names = list(value)[:LISTED_KEYS]
        out.columns = len(names) > MANY_KEYS
        chars = (MANY_KEY_CHARS, MANY_VALUE_CHARS) if out.columns else (KEY_CHARS, VALUE_CHARS)
        out.keys.extend(_key_lines(value, names, *chars))
        if len(value) > LISTED_KEYS:
            more = len(value) - LISTED_KEYS
            out.warnings.append(f"{_count(more, 'more key')} than the {LISTED_KEYS:,} listed: all in the text below")
    elif parsed:
        kind = _KINDS.get(type(value), "a value")
        out.keys.append(Text(f"not a JSON object but {kind}: shown whole below", style="yellow"))
    text = shown(text)
    out.facts = " · ".join([*facts, _count(text.count("\n") + 1, "line")])
    if len(text) > WHOLE_CHARS:
        half = WHOLE_CHARS // 2
        gone = len(text) - 2 * half
        text = f"{text[:half]}\n…⟨{gone:,} characters not drawn here⟩…\n{text[-half:]}"
        out.warnings.append(f"too long to draw whole: the middle {gone:,} characters are not shown")
    out.text = text
    return out


class ArgumentsView(VerticalScroll):
    """The scroll region of the arguments; says when its size changes (the end may now be in view)."""

    def on_resize(self, event: events.Resize) -> None:
        screen = self.screen
        if isinstance(screen, ApproveScreen):
            screen.measure()


class ApproveScreen(ModalScreen[Reply | None]):
    """The dialog before a tool call; dismissed with the answer (``stop``: end the turn; None: the turn
    ended meanwhile, nothing to answer)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("a", "reply('once')", "Allow once"),
        Binding("A,s", "reply('always')", "Always allow"),
        Binding("d,escape", "reply('deny')", "Deny"),
        Binding("x", "reply('stop')", "Stop the turn"),
        # scrolling wherever the focus is (the scroll region binds these itself when it has the focus)
        Binding("pagedown", "scroll_args('page_down')", show=False),
        Binding("pageup", "scroll_args('page_up')", show=False),
        Binding("end,ctrl+end", "scroll_args('end')", show=False),
        Binding("home,ctrl+home", "scroll_args('home')", show=False),
        Binding("down", "scroll_args('down')", show=False),
        Binding("up", "scroll_args('up')", show=False),
    ]
    DEFAULT_CSS = """
    ApproveScreen { align: center middle; }
    ApproveScreen > #approve-dialog {
        width: 90%; max-width: 110; height: auto; max-height: 90%;
        border: round $warning; background: $surface; padding: 0 1;
    }
    ApproveScreen #approve-body { height: auto; max-height: 30; }
    ApproveScreen #approve-gate { height: auto; }
    ApproveScreen Horizontal { height: auto; margin: 1 0 0 0; }
    ApproveScreen Button { margin: 0 1 0 0; }
    """

    def __init__(self, approval: Approval) -> None:
        super().__init__()
        self.approval = approval
        self.args = shown_arguments(approval.arguments)
        self.end_seen = False  # the end of the arguments has been on screen: allowing is open
        self.nudged = False  # an allow was tried before that
        self.fitted = False  # the scroll region has been fitted to the screen and laid out
        self.pending: Reply | None = None  # an allow typed before that

    def compose(self) -> ComposeResult:
        a = self.approval
        tool = one_line(a.tool)
        which = f" ({a.index + 1} of {a.count} in this step)" if a.count > 1 else ""
        title = f"Pane {one_line(a.pane)}: run this tool call?" if a.pane else "Run this tool call?"
        head: list[Text] = [
            Text.assemble((title, "bold"), which),
            Text.assemble(("tool    ", "dim"), (tool, "bold cyan")),
            Text.assemble(("server  ", "dim"), one_line(a.server) or "(none)"),
        ]
        desc = " ".join(one_line(a.description).split())
        if desc:
            head.append(Text.assemble(("about   ", "dim"), cut_middle(desc, DESCRIPTION_CHARS, "italic")))
        head.append(Text.assemble(("arguments  ", "dim"), (self.args.facts, "dim")))
        head.extend(Text(f"⚠ {w}", style="yellow") for w in self.args.warnings)
        body: list[RenderableType] = []
        if self.args.columns:  # down each column first, in the model's order
            body.append(Columns(self.args.keys, padding=(0, 3), column_first=True))
        else:
            body.extend(self.args.keys)
        if self.args.keys and self.args.text:
            body.append(Text("── the whole arguments, as the tool gets them ──", style="dim"))
        body.append(Text(self.args.text or "(none)", style="" if self.args.text else "dim italic"))
        with Vertical(id="approve-dialog"):
            yield Static(Group(*head), id="approve-head")
            with ArgumentsView(id="approve-body"):
                yield Static(Group(*body), id="approve-call")
            yield Static(self._gate(), id="approve-gate")
            with Horizontal():
                yield Button(Text("Allow once (a)"), id="once", variant="success", disabled=True)
                yield Button(
                    Text(f"Always allow {cut_middle(tool, 30).plain} (A/s)"),
                    id="always",
                    variant="primary",
                    disabled=True,
                )
                yield Button(Text("Deny (d, Esc)"), id="deny", variant="error")
                yield Button(Text("Stop the turn (x)"), id="stop")
            scope = "this comparison, in every pane" if a.pane else "this chat"
            yield Static(
                Text(f"Always: for the rest of {scope}. Deny: the model is told the call did not run.", style="dim")
            )

    def _gate(self) -> Text:
        if self.end_seen:
            return Text("✓ the arguments have been shown to their end", style="green")
        style = "bold reverse yellow" if self.nudged else "bold yellow"
        return Text("⬇ scroll to the end of the arguments to allow (PageDown, End); Deny is open", style=style)

    def on_mount(self) -> None:
        body = self.query_one(ArgumentsView)
        self.watch(body, "scroll_y", lambda _: self.measure(), init=False)
        self.watch(body, "virtual_size", lambda _: self.measure(), init=False)
        self.call_after_refresh(self.fit)

    def on_resize(self, event: events.Resize) -> None:
        self.call_after_refresh(self.fit)

    def fit(self) -> None:
        """The scroll region's height: what the dialog's other parts leave of 90% of the screen, so the
        facts, the gate line and the buttons are never pushed out of view."""
        if not self.is_attached:
            return
        dialog = self.query_one("#approve-dialog", Vertical)
        body = self.query_one(ArgumentsView)
        others = sum(w.outer_size.height + w.styles.margin.height for w in dialog.children if w is not body)
        room = int(self.size.height * 0.9) - dialog.styles.gutter.height - others
        body.styles.max_height = max(MIN_BODY_ROWS, room)
        self.call_after_refresh(self.settle)

    def settle(self) -> None:
        """The first layout with the region fitted: an allow typed before it (the dialog not yet drawn)
        is taken if the whole call is on screen now, refused otherwise."""
        if not self.is_attached:  # dismissed meanwhile (the turn ended)
            return
        self.fitted = True
        self.measure()
        pending, self.pending = self.pending, None
        if pending is not None and self.end_seen:
            self.dismiss(pending)
        elif pending is not None:
            self.refuse()

    def measure(self) -> None:
        """Open allowing once the last row of the arguments is on screen: the region laid out, its
        scroll at the end, and the region itself inside the dialog and the screen (not cut off)."""
        if self.end_seen or not self.is_attached:
            return
        body = self.query_one(ArgumentsView)
        dialog = self.query_one("#approve-dialog", Vertical)
        if body.size.height <= 0 or body.virtual_size.height <= 0:
            return  # not laid out yet
        if self.focused is None or (isinstance(self.focused, Button) and self.focused.disabled):
            body.focus()  # the arrows and pages scroll it; allow-once takes the focus if it all fits
        inside = body.region.intersection(dialog.region).intersection(self.region)
        if inside != body.region or body.scroll_offset.y < body.max_scroll_y:
            return
        self.end_seen = True
        once, always = self.query_one("#once", Button), self.query_one("#always", Button)
        once.disabled = always.disabled = False
        self.query_one("#approve-gate", Static).update(self._gate())
        if body.max_scroll_y == 0:  # it all fit at once: allow-once takes the focus, as before
            once.focus()

    def refuse(self) -> None:
        """An allow before the end was shown: nothing happens but a bell and the gate line lit."""
        self.nudged = True
        self.query_one("#approve-gate", Static).update(self._gate())
        self.app.bell()

    def action_scroll_args(self, where: str) -> None:
        body = self.query_one(ArgumentsView)
        moves = {
            "page_down": body.scroll_page_down,
            "page_up": body.scroll_page_up,
            "end": body.scroll_end,
            "home": body.scroll_home,
            "down": body.scroll_down,
            "up": body.scroll_up,
        }
        moves[where](animate=False)

    def action_reply(self, reply: Reply) -> None:
        if reply in ALLOWING and not self.end_seen:
            if self.fitted:
                self.refuse()
            else:
                self.pending = reply  # the dialog is not drawn yet: decided once it is (settle)
            return
        self.pending = None
        self.dismiss(reply)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id in ("once", "always", "deny", "stop"):
            self.action_reply(event.button.id)  # type: ignore[arg-type]
