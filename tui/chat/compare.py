"""The chat's compare mode: asking for the model to compare with, opening the compare screen over the
chat with the chat's model and conversation, and going on in the chat with a pane handed back."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from backends.base import Backend
from backends.compare.panes import parse_model
from tui.format import visible_controls

if TYPE_CHECKING:
    from tui.chat.app import ChatApp
    from tui.compare.app import ChatHandoff, CompareScreen


class CompareSpecScreen(ModalScreen[str | None]):
    """Asks for the model to compare the chat's model with."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss_none", "Close")]

    def __init__(self, current: str) -> None:
        super().__init__(classes="compare-spec")
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(id="compare-spec-box"):
            yield Static(Text.assemble(("Compare ", "bold"), (self.current, "bold cyan"), (" with:", "bold")))
            yield Input(placeholder="PROVIDER:MODEL[@URL], e.g. openai:gpt-4o-mini", id="compare-spec")
            yield Static(
                Text("Enter opens both side by side, with this chat's conversation as their context.", style="dim")
            )

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value.strip() or None)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)


async def compare_screen(app: ChatApp, spec: str) -> CompareScreen | None:
    """The compare screen for the chat's model and ``spec``, both started on the chat's stream thread;
    None (the user told why) when one of them cannot start."""
    from tui.compare.app import CompareScreen  # imported late: the chat starts without the compare screen

    session = app.session
    other = parse_model(spec, None)
    specs = [(session.spec, session.base_url), (other.spec, other.base_url)]
    factory = session.factory
    app.notify(visible_controls(f"starting {other.spec}…"), markup=False)  # typed text, not markup
    backends: list[Backend] = []
    for s, url in specs:

        async def make(s: str = s, url: str | None = url) -> Backend:  # on the stream thread: may take a moment
            return factory(s, url)

        try:
            backends.append(await app.runner.call(make))
        except Exception as exc:  # a bad spec, a missing key: say so, stay in the chat
            for b in backends:
                app.runner.submit(b.aclose())
            # the spec and the error's words (a server's, maybe) are shown as written, never as markup or run
            app.notify(visible_controls(f"could not start {s}: {exc}"), severity="error", markup=False)
            return None
    return CompareScreen(
        backends,
        settings=session.settings,
        system=session.system_prompt,
        specs=specs,
        history=session.messages,
        from_chat=True,
        factory=factory,
        clock=app.clock,
    )


async def continue_pane(app: ChatApp, handoff: ChatHandoff) -> None:
    """The chat goes on with a compare pane: its model, and its conversation as the context."""
    app.session.switch_model(handoff.spec, handoff.base_url)
    app.warm_up()
    app.session.messages = list(handoff.messages)
    await app.transcript.hide_greeting()
    await app.transcript.add_note(
        f"continuing pane {handoff.label} ({handoff.spec}) from the comparison: "
        f"{len(handoff.records)} turn{'s' if len(handoff.records) != 1 else ''}",
        "ok",
    )
    for rec in handoff.records:
        await app.transcript.add_logged(rec, app.clock)
    app.update_header()
