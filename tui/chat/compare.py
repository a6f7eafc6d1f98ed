"""The chat's compare mode: asking for the model to compare with, the compare screen for the chat's
model and conversation, and the chat's session taking over a pane handed back.

The functions take the chat's ``ChatSession`` and return what the chat screen pushes, draws or says.
:class:`Launcher` opens the comparison over the chat (asking for the model when none was typed) and
tells the screen in a ``HandedBack`` message when a pane is chosen to go on with; the screen draws it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Input, Static

from ...backends.base import Backend
from ...backends.spec import parse_model
from ...telemetry.log.prompt_history import PromptHistory
from ...telemetry.log.urls import without_masked
from ..format import visible_controls
from ..session import ChatSession

if TYPE_CHECKING:
    from ..compare.output import ChatHandoff
    from ..compare.screen import CompareScreen
    from ..tool_servers import ToolServers

Spec = tuple[str, str | None]  # a model spec and its base URL


class CompareSpecScreen(ModalScreen[str | None]):
    """Asks for the model to compare the chat's model with."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss_none", "Close")]
    DEFAULT_CSS = """
    CompareSpecScreen { align: center middle; }
    #compare-spec-box { width: 72; height: auto; padding: 1 2; border: round $primary; background: $surface; }
    """

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


def compare_specs(session: ChatSession, spec: str) -> list[Spec]:
    """The panes' models: the chat's, then ``spec`` (``PROVIDER:MODEL[@URL]``). A URL recalled from the
    history has its credentials and query values masked (``***``): those parts are left out, as
    ``chat --resume`` leaves them out, rather than sent as a credential."""
    other = parse_model(spec, None)
    return [(session.spec, session.base_url), (other.spec, without_masked(other.base_url))]


@dataclass(frozen=True, slots=True)
class CouldNotStart:
    """A pane's backend that did not start (a bad spec, a missing key): its spec and the error's words."""

    spec: str
    error: str


async def compare_screen(
    session: ChatSession,
    specs: Sequence[Spec],
    clock: Callable[[], int],
    prompts: PromptHistory | None = None,
    tools: ToolServers | None = None,
) -> CompareScreen | CouldNotStart:
    """The compare screen for ``specs``, with the chat's settings and conversation as every pane's
    context, each backend started on the chat's stream thread; or the first that could not start
    (those started before it are closed). ``tools``: the chat's MCP servers, which the comparison
    starts again for itself (its own host, its own consent, closed when it closes: the chat's stay up)."""
    from ..compare.screen import CompareScreen  # imported late: the chat starts without the compare screen

    factory = session.factory
    backends: list[Backend] = []
    for s, url in specs:

        async def make(s: str = s, url: str | None = url) -> Backend:  # on the stream thread: may take a moment
            return factory(s, url)

        try:
            backends.append(await session.runner.call(make))
        except Exception as exc:  # a bad spec, a missing key: the chat says so and stays
            for b in backends:
                session.runner.submit(b.aclose())
            return CouldNotStart(s, str(exc))
    return CompareScreen(
        backends,
        settings=session.settings,
        system=session.system_prompt,
        specs=specs,
        history=session.messages,
        from_chat=True,
        factory=factory,
        clock=clock,
        prompts=prompts,
        tools=None if tools is None or not tools.servers else tools.again(),
    )


def take_over(session: ChatSession, handoff: ChatHandoff) -> str:
    """The chat goes on with a compare pane: its model, and its conversation as the context; the note
    that says so (the pane's turns are the handoff's records, for the transcript)."""
    session.switch_model(handoff.spec, handoff.base_url)
    session.continue_with(list(handoff.messages))
    n = len(handoff.records)
    return f"continuing pane {handoff.label} ({handoff.spec}) from the comparison: {n} turn{'s' if n != 1 else ''}"


class HandedBack(Message):
    """The comparison closed with a pane chosen: the chat goes on from it (``handoff``)."""

    def __init__(self, handoff: ChatHandoff) -> None:
        super().__init__()
        self.handoff = handoff


class Launcher:
    """Opens the compare screen over the chat on ``screen``: this chat's model, session, prompt
    history and MCP servers (started again for the comparison), and another model."""

    def __init__(
        self,
        screen: Widget,
        session: ChatSession,
        clock: Callable[[], int],
        prompts: PromptHistory | None,
        tools: ToolServers | None,
    ) -> None:
        self.screen, self.session, self.clock, self.prompts, self.tools = screen, session, clock, prompts, tools

    async def launch(self, spec: str | None) -> None:
        """The compare screen with ``spec``; asked for first when None."""
        if spec is not None:
            await self.open(spec)
            return

        def asked(answer: str | None) -> None:
            if answer:
                self.screen.run_worker(self.open(answer), group="compare")

        self.screen.app.push_screen(CompareSpecScreen(self.session.spec), asked)

    async def open(self, spec: str) -> None:
        specs = compare_specs(self.session, spec)
        self.screen.notify(visible_controls(f"starting {specs[1][0]}…"), markup=False)  # typed text, not markup
        opened = await compare_screen(self.session, specs, self.clock, self.prompts, self.tools)
        if isinstance(opened, CouldNotStart):
            # the spec and the error's words (a server's, maybe) are shown as written, never as markup or run
            said = visible_controls(f"could not start {opened.spec}: {opened.error}")
            self.screen.notify(said, severity="error", markup=False)
            return
        self.screen.app.push_screen(opened, self._back)

    def _back(self, handoff: ChatHandoff | None) -> None:
        if handoff is None:
            self.screen.notify("Back to the chat.")
            return
        self.screen.post_message(HandedBack(handoff))
