"""ChatApp: the ttft chat with a live telemetry pane.

One idea, the chat screen: its layout and lifecycle, its header, and routing Enter, keys and palette
entries to what handles them. The parts it routes to, one idea each: a turn from Enter to its record
(:mod:`tui.chat.turn`), the key bindings and palette table (:mod:`tui.chat.commands`), export and
reopening a session (:mod:`tui.chat.sessions`), and the compare screen over the chat
(:mod:`tui.chat.compare`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual.app import App, ComposeResult, CSSPathType, SystemCommand
from textual.binding import BindingType
from textual.containers import Container, Vertical
from textual.filter import LineFilter
from textual.screen import Screen
from textual.widgets import Footer, Input, Static

from telemetry import events as ev
from telemetry.log.turns import SessionLog
from telemetry.render import RenderLag
from telemetry.settings import PROMPT_LOOKUP, TurnSettings
from tui import signals
from tui.chat import commands as chat_commands
from tui.chat import sessions as chat_sessions
from tui.chat.compare import CompareSpecScreen, compare_screen, continue_pane
from tui.chat.turn import ChatTurns
from tui.format import fmt_settings, short_spec
from tui.runner import LiveTurn, LoopThread, full_collections_between_turns
from tui.session import BackendFactory, ChatSession, default_backend_factory, default_model_spec
from tui.target import Target, describe_target
from tui.terminal import visible_text, with_drop_controls
from tui.widgets.telemetry_pane import TelemetryPane
from tui.widgets.transcript import AssistantMessage, Transcript

if TYPE_CHECKING:
    from tui.compare.app import ChatHandoff

EFFORTS = (None, "minimal", "low", "medium", "high")
STOP_WAIT_S = 3.0  # SIGTERM/SIGHUP: how long the turn in flight gets to be recorded and logged before exit


class ChatApp(App[None]):
    CSS_PATH: ClassVar[CSSPathType] = ["chat.tcss", "../compare/compare.tcss"]
    TITLE = "ttft"
    # Textual declares this an instance attribute (not a ClassVar), so it is overridden as one.
    HORIZONTAL_BREAKPOINTS: list[tuple[int, str]] | None = [(0, "-narrow"), (120, "-wide")]  # noqa: RUF012
    BINDINGS: ClassVar[list[BindingType]] = chat_commands.BINDINGS

    def __init__(
        self,
        spec: str | None = None,
        *,
        settings: TurnSettings | None = None,
        base_url: str | None = None,
        factory: BackendFactory | None = None,
        resume: Path | None = None,
        session_id: str | None = None,
        clock: Callable[[], int] | None = None,
        fps: float = 30.0,
        warm_up: bool | None = None,
    ) -> None:
        """``warm_up``: start the backend and pay its first-use costs at start-up, while the user types
        (None: for the real backends, i.e. no ``factory`` given; a factory's fakes only when asked)."""
        super().__init__()
        self.warm_up_at_start = factory is None if warm_up is None else warm_up
        self._gc_policy = contextlib.ExitStack()
        self.clock = clock or ev.now_ns
        self.fps = fps
        self.runner = LoopThread()
        self.session = ChatSession(
            self.runner,
            spec or default_model_spec(),
            settings or TurnSettings(),
            base_url,
            factory or default_backend_factory,
            SessionLog(session_id),
        )
        self.resume_path = resume
        self.turns = ChatTurns(self)
        self.last_export: list[Path] = []
        self._signals: list[int] = []

    def get_line_filters(self) -> Sequence[LineFilter]:
        return with_drop_controls(super().get_line_filters())  # outside text never drives the terminal

    # --- layout --------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static(id="header")
        with Container(id="main"):
            with Vertical(id="chat"):
                yield Transcript(id="transcript")
                self.prompt_input = Input(placeholder="Ask anything · Enter sends · Esc cancels · F1 help", id="prompt")
                yield self.prompt_input
            yield TelemetryPane(id="pane")
        yield Footer()

    @property
    def transcript(self) -> Transcript:
        return self.query_one("#transcript", Transcript)

    @property
    def pane(self) -> TelemetryPane:
        return self.query_one("#pane", TelemetryPane)

    async def on_mount(self) -> None:
        self._gc_policy.enter_context(full_collections_between_turns())
        self._signals = signals.install(asyncio.get_running_loop(), self._on_stop_signal)
        self.turns.attach(self.fps)
        self.update_header()
        self.query_one("#prompt", Input).focus()
        if self.resume_path is not None:
            await self.load_session(self.resume_path)
        else:
            await self.transcript.show_greeting(self.target())
        self.warm_up()

    def warm_up(self) -> None:
        """The backend's start and first use, in the background: the first turn then goes out as fast as
        any later one (its own delay, Enter -> send, holds no process start and no SDK's first use)."""
        if self.warm_up_at_start:
            self.run_worker(self.session.warm_up(), group="warm-up", exit_on_error=False)

    async def on_unmount(self) -> None:
        signals.uninstall(asyncio.get_running_loop(), self._signals)
        self._gc_policy.close()
        if self.live is not None:
            self.live.cancel()
        with contextlib.suppress(Exception):
            await self.session.close_backend()
        self.runner.close()

    def _on_stop_signal(self, signum: int) -> None:
        """SIGTERM or SIGHUP (a container stop, the terminal closed): quit as ctrl+q would, and first let the
        turn in flight end as cancelled and be logged with what arrived; it is never just killed."""
        live = self.live
        if live is not None:
            live.cancel()  # at once, on the stream thread: the UI may be unable to paint (no terminal)

        async def stop() -> None:
            if live is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(live.wait(), STOP_WAIT_S)
            self.exit(return_code=signals.exit_code(signals.Interrupted(signum)))

        self.run_worker(stop(), group="stop", exit_on_error=False)

    def target(self) -> Target:
        """What the next turn talks to (the backend's own names once it exists)."""
        return describe_target(self.session.spec, self.session.base_url, self.session.backend)

    def update_header(self) -> None:
        """The header, and the empty chat's greeting: both say which model the next turn uses."""
        target = self.target()
        settings = f"│ {fmt_settings(self.session.settings.to_dict())} "
        sid = f"│ {self.session.log.session_id}"
        room = self.size.width - 2 - len("ttft │  ") - len(settings) - len(sid)  # 2: the header's padding
        label = short_spec(target.provider, target.model, max(20, room), sep=" · ")
        t = Text()
        t.append("ttft ", style="bold")
        t.append(f"│ {label} ", style="bold cyan")
        t.append(settings, style="")
        t.append(sid, style="dim")
        self.query_one("#header", Static).update(visible_text(t))  # a model name may come from a server
        if (greeting := self.transcript.greeting) is not None:
            greeting.set_target(target)

    def on_resize(self) -> None:
        self.call_after_refresh(self.update_header)  # the model's name is shortened to the new width

    # --- a turn (tui.chat.turn) ----------------------------------------------------------
    @property
    def live(self) -> LiveTurn | None:
        return self.turns.live

    @property
    def message(self) -> AssistantMessage | None:
        return self.turns.message

    @property
    def lag(self) -> RenderLag:
        return self.turns.lag

    @property
    def lag_by_turn(self) -> dict[int, dict[str, Any]]:
        return self.turns.lag_by_turn

    @property
    def busy(self) -> bool:
        return self.turns.busy

    def _tick(self, force: bool = False) -> None:
        self.turns.tick(force)

    async def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input is not self.prompt_input:
            return  # another screen's input (compare mode, a dialog)
        submitted = self.clock()  # Enter: what the user waits for starts here, not at the send
        text = event.value.strip()
        if not text:
            return
        if self.busy:
            self.notify("A turn is in flight: Esc cancels it.", severity="warning")
            return
        event.input.value = ""
        if text.startswith("/compare"):
            await self.action_compare(text.removeprefix("/compare").strip() or None)
            return
        await self.send(text, submitted)

    async def send(self, prompt: str, submitted_ns: int | None = None) -> None:
        """Start a turn; returns once it is running (the record arrives later; see ``ChatTurns.send``)."""
        await self.turns.send(prompt, submitted_ns)

    # --- actions -------------------------------------------------------------------
    def action_cancel_turn(self) -> None:
        if self.live is not None:
            self.live.cancel()
        elif len(self.screen_stack) > 1:
            self.pop_screen()

    async def action_regenerate(self) -> None:
        submitted = self.clock()
        if self.busy:
            self.notify("A turn is in flight: Esc cancels it first.", severity="warning")
            return
        prompt = self.session.pop_last_exchange()
        if prompt is None:
            self.notify("Nothing to regenerate yet.")
            return
        await self.send(prompt, submitted)

    async def action_new_chat(self) -> None:
        if self.live is not None:
            self.live.cancel()
            with contextlib.suppress(Exception):
                await self.live.wait()
        self.session.new_chat()
        self.turns.forget()
        await self.transcript.remove_children()
        await self.transcript.show_greeting(self.target())
        self.pane.show_message("New chat. Send a prompt: its latency appears here.")
        self.pane.set_timelines([])
        self.pane.set_history([])
        self.update_header()

    def action_copy_answer(self) -> None:
        answer = next((r["answer"] for r in reversed(self.session.records) if r.get("answer")), None)
        if not answer:
            self.notify("No answer to copy yet.")
            return
        self.copy_to_clipboard(answer)
        self.notify(f"Copied the last answer ({len(answer)} characters).")

    async def action_export(self) -> list[Path]:
        return await chat_sessions.export_session(self)

    def action_toggle_pane(self) -> None:
        self.pane.toggle_class("-hidden")

    def apply_settings(self, settings: TurnSettings, spec: str | None = None, base_url: str | None = None) -> None:
        """Settings take effect on the next turn and are recorded with it."""
        self.session.settings = settings
        if spec and (spec != self.session.spec or base_url != self.session.base_url):
            self.session.switch_model(spec, base_url)
            self.warm_up()  # the new model's first use, too, while the user types
        self.update_header()
        self.notify(f"Next turn: {self.session.spec} · {fmt_settings(settings.to_dict())}")

    def action_toggle_stream(self) -> None:
        s = self.session.settings
        self.apply_settings(s.with_(stream=not s.stream))

    def action_cycle_effort(self) -> None:
        s = self.session.settings
        i = EFFORTS.index(s.reasoning_effort) if s.reasoning_effort in EFFORTS else 0
        self.apply_settings(s.with_(reasoning_effort=EFFORTS[(i + 1) % len(EFFORTS)]))

    def action_toggle_speculative(self) -> None:
        s = self.session.settings
        self.apply_settings(s.with_(speculative=None if s.speculative else dict(PROMPT_LOOKUP)))

    def action_settings(self, focus: str | None = None) -> None:
        from tui.screens.settings import SettingsScreen

        def done(result: tuple[str, str | None, TurnSettings] | None) -> None:
            if result is not None:
                spec, base_url, settings = result
                self.apply_settings(settings, spec, base_url)

        self.push_screen(
            SettingsScreen(self.session.spec, self.session.base_url, self.session.settings, focus=focus), done
        )

    def action_sessions(self) -> None:
        from tui.screens.sessions import SessionsScreen

        def done(path: Path | None) -> None:
            if path is not None:
                self.run_worker(self.load_session(path), group="load")

        self.push_screen(SessionsScreen(current=self.session.log.session_id), done)

    def action_help(self) -> None:
        from tui.screens.help import HelpScreen

        self.push_screen(HelpScreen())

    async def load_session(self, path: Path) -> None:
        """Reopen a logged session (see ``chat_sessions.load_session``)."""
        await chat_sessions.load_session(self, path)

    # --- compare mode ----------------------------------------------------------------
    async def action_compare(self, spec: str | None = None) -> None:
        """Open the compare screen: this chat's model and ``spec`` (asked for when not given)."""
        if self.busy:
            self.notify("A turn is in flight: Esc cancels it first.", severity="warning")
            return
        if spec is None:

            def asked(answer: str | None) -> None:
                if answer:
                    self.run_worker(self.open_compare(answer), group="compare")

            self.push_screen(CompareSpecScreen(self.session.spec), asked)
            return
        await self.open_compare(spec)

    async def open_compare(self, spec: str) -> None:
        screen = await compare_screen(self, spec)
        if screen is not None:
            self.push_screen(screen, self._back_from_compare)

    def _back_from_compare(self, handoff: ChatHandoff | None) -> None:
        if handoff is None:
            self.notify("Back to the chat.")
            return
        self.run_worker(self.continue_from(handoff), group="compare")

    async def continue_from(self, handoff: ChatHandoff) -> None:
        await continue_pane(self, handoff)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        from tui.compare.app import CompareScreen

        # the compare screen on top: its own keys, not the chat's underneath
        return not (isinstance(self.screen, CompareScreen) and action in chat_commands.CHAT_ACTIONS)

    # --- command palette -----------------------------------------------------------
    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        from tui.compare.app import CompareScreen

        yield from super().get_system_commands(screen)
        if isinstance(screen, CompareScreen):
            yield from screen.system_commands()
            return
        yield from chat_commands.palette(self, self.session.settings)
