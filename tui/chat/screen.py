"""ChatScreen: the chat with its live telemetry pane, and everything the chat holds.

One idea, the chat on screen: its layout (header, transcript, prompt, telemetry pane, footer), its
keys and palette entries, and its state (the ``ChatSession``, the turn in flight, the finished turns'
timelines and render lag). Attributes down, messages up: the prompt says ``ChatPrompt.Sent``
(:mod:`tui.chat.prompt`), the turn driver says ``TurnStarted``, ``TurnFinished`` or ``TurnFailed``
(:mod:`tui.chat.turn`), and the handlers here call the widgets' methods. What the handlers route to,
one idea each: the key bindings and palette table (:mod:`tui.chat.commands`), export and reopening a
session (:mod:`tui.chat.sessions`), and the compare screen over the chat (:mod:`tui.chat.compare`).

A turn in flight is painted by the screen's frames (:meth:`ChatScreen.frame`): new text into the answer
every frame, the telemetry pane at ``PANE_FPS`` or on a phase change, both from the recorder's snapshot.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult, CSSPathType, SystemCommand
from textual.binding import BindingType
from textual.containers import Container, Vertical
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.timer import Timer
from textual.widget import MountError
from textual.widgets import Footer, Static

from telemetry.settings import PROMPT_LOOKUP, TurnSettings
from telemetry.view.render import RenderLag
from telemetry.view.timeline import Timeline, live_timeline, turn_timeline
from tui.chat import commands as chat_commands
from tui.chat.compare import CompareSpecScreen, CouldNotStart, compare_screen, compare_specs, take_over
from tui.chat.prompt import ChatPrompt
from tui.chat.sessions import Reopened, export_session, reopen
from tui.chat.turn import ChatTurns, TurnFailed, TurnFinished, TurnStarted
from tui.format import fmt_settings, short_spec, turn_label, visible_controls
from tui.runner import LiveTurn, collect_between_turns
from tui.session import ChatSession
from tui.target import Target, describe_target
from tui.terminal import visible_text
from tui.widgets.error_card import ErrorCard
from tui.widgets.telemetry_pane import TelemetryPane
from tui.widgets.transcript import AssistantMessage, Transcript

if TYPE_CHECKING:
    from tui.compare.output import ChatHandoff

EFFORTS = (None, "minimal", "low", "medium", "high")
PANE_FPS = 10  # the figures change slower than the text; a layout-free repaint at 10 fps reads as live


class ChatScreen(Screen[None]):
    """The chat. ``ttft chat`` shows it as its app's base screen; dialogs and the compare screen go on top."""

    CSS_PATH: ClassVar[CSSPathType] = ["chat.tcss", "../widgets/transcript.tcss"]
    # Textual declares this an instance attribute (not a ClassVar), so it is overridden as one.
    HORIZONTAL_BREAKPOINTS: list[tuple[int, str]] | None = [(0, "-narrow"), (120, "-wide")]  # noqa: RUF012
    BINDINGS: ClassVar[list[BindingType]] = chat_commands.BINDINGS

    def __init__(
        self,
        session: ChatSession,
        *,
        clock: Callable[[], int],
        fps: float = 30.0,
        resume: Path | None = None,
        warm_up: bool = True,
    ) -> None:
        """``warm_up``: start the backend and pay its first-use costs once the chat is shown, while the
        user types; ``resume``: a session log to reopen instead of the greeting."""
        super().__init__()
        self.session = session
        self.clock = clock
        self.fps = fps
        self.resume_path = resume
        self.warm_up_at_start = warm_up
        self.turns = ChatTurns(session, self)
        self.answer: AssistantMessage | None = None  # the answer of the turn on screen, while it is drawn
        self.lag = RenderLag()  # the turn on screen's render lag
        self.lag_by_turn: dict[int, dict[str, Any]] = {}  # each finished turn's render-lag summary
        self.timelines: list[tuple[str, Timeline]] = []  # each finished turn's, for the pane
        self.last_export: list[Path] = []
        self._on_screen: LiveTurn | None = None  # the turn being drawn: from TurnStarted to its figures shown
        self._frames: Timer | None = None
        self._pane_phase = ""
        self._pane_ns = 0

    # --- layout --------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static(id="header")
        with Container(id="main"):
            with Vertical(id="chat"):
                yield Transcript(id="transcript")
                yield ChatPrompt(self.clock, id="prompt")
            yield TelemetryPane(id="pane")
        yield Footer()

    @property
    def transcript(self) -> Transcript:
        return self.query_one("#transcript", Transcript)

    @property
    def pane(self) -> TelemetryPane:
        return self.query_one("#pane", TelemetryPane)

    @property
    def prompt(self) -> ChatPrompt:
        return self.query_one("#prompt", ChatPrompt)

    async def on_mount(self) -> None:
        self._frames = self.set_interval(1 / self.fps, self.frame, pause=True)
        self.update_header()
        self.prompt.focus()
        if self.resume_path is not None:
            await self.load_session(self.resume_path)
        else:
            await self.transcript.show_greeting(self.target())
        self.warm_up()

    async def on_unmount(self) -> None:
        self.turns.cancel()  # logged with what arrived, as cancelled
        await self.session.close_backend()

    def warm_up(self) -> None:
        """The backend's start and first use, in the background: the first turn then goes out as fast as
        any later one (its own delay, Enter -> send, holds no process start and no SDK's first use)."""
        if self.warm_up_at_start:
            self.run_worker(self.session.warm_up(), group="warm-up", exit_on_error=False)

    def target(self) -> Target:
        """What the next turn talks to (the backend's own names once it exists)."""
        return describe_target(self.session.spec, self.session.base_url, self.session.backend)

    def update_header(self) -> None:
        """The header, and the empty chat's greeting: both say which model the next turn uses."""
        target = self.target()
        settings = f"│ {fmt_settings(self.session.settings.to_dict())} "
        sid = f"│ {self.session.log.session_id}"
        room = self.app.size.width - 2 - len("ttft │  ") - len(settings) - len(sid)  # 2: the header's padding
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

    # --- a turn ----------------------------------------------------------------------
    @property
    def live(self) -> LiveTurn | None:
        """The turn in flight, until its record is handed off."""
        return self.turns.live

    @property
    def busy(self) -> bool:
        """From Enter until the finished turn's figures are shown: a new prompt waits."""
        return self.turns.busy or self._on_screen is not None

    async def on_chat_prompt_sent(self, event: ChatPrompt.Sent) -> None:
        if self.busy:
            self.notify("A turn is in flight: Esc cancels it.", severity="warning")
            return  # the text stays in the prompt
        self.prompt.clear()
        if event.text.startswith("/compare"):
            await self.action_compare(event.text.removeprefix("/compare").strip() or None)
            return
        await self.send(event.text, event.submitted_ns)

    async def send(self, prompt: str, submitted_ns: int | None = None) -> None:
        """Start a turn; returns once its request is on its way (``TurnStarted`` draws it, ``TurnFinished``
        its end). ``submitted_ns``: the user's Enter (default: now); ttft's own delay runs from it."""
        self.pane.show_message(f"starting {self.session.spec}…")
        await self.turns.start(prompt, self.clock() if submitted_ns is None else submitted_ns)

    @contextlib.contextmanager
    def _drawing(self) -> Iterator[None]:
        """What a turn's message draws. The app may close meanwhile (ctrl+q, SIGTERM after the turn is
        logged): its widgets are going, and the drawing is dropped; while it runs, a failure is a bug."""
        try:
            yield
        except (MountError, NoMatches):
            if self.app.is_running and self.is_attached:
                raise

    async def on_turn_failed(self, event: TurnFailed) -> None:
        with self._drawing():
            transcript = self.transcript
            await transcript.hide_greeting()
            await transcript.compact()
            await transcript.add_user(event.prompt)
            await transcript.add_error(ErrorCard(event.error, event.spec, ""))
            self.pane.show_message(f"could not start {event.spec}: {event.error.message}")

    async def on_turn_started(self, event: TurnStarted) -> None:
        """The request is on its way: the pane goes live at once, and the prompt and the answer's widgets
        are mounted while it travels (10-30 ms), not before it leaves, where they were ttft's own delay."""
        self._on_screen, self.lag = event.live, event.lag
        if self._frames is not None:
            self._frames.resume()
        with self._drawing():
            self.frame(force=True)  # the phase and the wait so far
            transcript = self.transcript
            await transcript.hide_greeting()
            await transcript.compact()  # a paint must not cost more the longer the chat
            await transcript.add_user(event.prompt)
            self.answer = await transcript.add_assistant(self.clock, event.lag)
            self.update_header()

    async def on_turn_finished(self, event: TurnFinished) -> None:
        """The answer's full render and how the turn ended; its figures once that render is on screen."""
        if event.live is not self._on_screen:
            return  # the chat moved on (a new chat, another session): the turn is logged, not drawn
        self._stop_frames()
        with self._drawing():
            self.frame(force=True)  # the last frame: every chunk painted before the full render
            record, transcript = event.record, self.transcript
            if self.answer is not None:
                await self.answer.finalize(record)
            await transcript.add_outcome(record)
            if event.log_error:
                await transcript.add_note(event.log_error, "error")
            if event.trouble:
                self.notify(event.trouble, severity="error")
            self.call_after_refresh(self._show_figures, event)  # after the full render's own lag stamp

    def _show_figures(self, event: TurnFinished) -> None:
        if event.live is not self._on_screen:
            return
        record = event.record
        lag = event.lag.summary()
        self.lag_by_turn[record.turn_index] = lag
        with self._drawing():
            self.pane.show_record(record, lag)
            self.timelines.append((turn_label(record.turn_index), turn_timeline(record)))
            self.pane.set_timelines(self.timelines)
            self.pane.set_history(self.session.records)
        self._on_screen = self.answer = None
        self.call_after_refresh(collect_between_turns)

    def _stop_frames(self) -> None:
        if self._frames is not None:
            self._frames.pause()

    def frame(self, force: bool = False) -> None:
        """One frame: new text into the answer every frame; the pane at PANE_FPS or on a phase change."""
        live, answer = self._on_screen, self.answer
        # Shutting down: Textual removes the widgets before it stops the timers, so a frame may still
        # fire with the pane gone (a turn in flight at exit is cancelled and logged elsewhere).
        if live is None or not self.app.is_running:
            return
        rec = live.recorder
        now = self.clock()
        snap = rec.snapshot(now)
        if answer is not None:  # None for the first frames: the answer's widget is mounted after the send
            answer.pump(rec, snap)
        if force or snap.phase != self._pane_phase or now - self._pane_ns >= 1e9 / PANE_FPS:
            self._pane_phase, self._pane_ns = snap.phase, now
            self.pane.show_live(snap, rec.attempts, self.lag.summary())
            self.pane.set_timelines([*self.timelines, ("now", live_timeline(snap, rec.attempts))])

    # --- actions -------------------------------------------------------------------
    def action_cancel_turn(self) -> None:
        self.turns.cancel()

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
        await self._leave_turn()
        self.session.new_chat()
        self.timelines, self.lag_by_turn = [], {}
        await self.transcript.remove_children()
        await self.transcript.show_greeting(self.target())
        self.pane.show_message("New chat. Send a prompt: its latency appears here.")
        self.pane.set_timelines([])
        self.pane.set_history([])
        self.update_header()

    async def _leave_turn(self) -> None:
        """The turn in flight cancelled and handed off, and no longer drawn: the chat moves on."""
        self.turns.cancel()
        await self.turns.wait_idle()
        self._stop_frames()
        self._on_screen = self.answer = None

    def action_copy_answer(self) -> None:
        answer = next((r.answer for r in reversed(self.session.records) if r.answer), None)
        if not answer:
            self.notify("No answer to copy yet.")
            return
        self.app.copy_to_clipboard(answer)
        self.notify(f"Copied the last answer ({len(answer)} characters).")

    async def action_export(self) -> list[Path]:
        """The session's log as JSONL and CSV; the paths, or [] (the user is told why)."""
        done = export_session(self.session)
        if done.error is not None:
            self.notify(done.error, severity="error")
            return []
        if not done.paths:
            self.notify("Nothing to export yet: no turn has finished.")
            return []
        self.last_export = list(done.paths)
        jsonl, csv = done.paths
        await self.transcript.add_note(f"exported {done.turns} turns: {jsonl}  {csv}", "ok")
        self.notify(f"Exported {done.turns} turns to {jsonl.parent}")
        return self.last_export

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

        self.app.push_screen(
            SettingsScreen(self.session.spec, self.session.base_url, self.session.settings, focus=focus), done
        )

    def action_sessions(self) -> None:
        from tui.screens.sessions import SessionsScreen

        def done(path: Path | None) -> None:
            if path is not None:
                self.run_worker(self.load_session(path), group="load")

        self.app.push_screen(SessionsScreen(current=self.session.log.session_id), done)

    def action_help(self) -> None:
        from tui.screens.help import HelpScreen

        self.app.push_screen(HelpScreen())

    # --- a logged session (tui.chat.sessions) ------------------------------------------
    async def load_session(self, path: Path) -> None:
        """Reopen a logged session: transcript, timelines, history; new turns append to the same log."""
        if self.busy:
            self.notify("Cancel the turn in flight first (Esc).", severity="warning")
            return
        reopened = reopen(self.session, path)
        if reopened.error is not None:
            self.notify(reopened.error, severity="error")
            return
        await self.show_reopened(reopened)

    async def show_reopened(self, reopened: Reopened) -> None:
        transcript = self.transcript
        await transcript.remove_children()
        for rec in reopened.drawn:
            await transcript.add_record(rec, self.clock)
        await transcript.compact()
        self.timelines = [(turn_label(r.turn_index), turn_timeline(r)) for r in reopened.records]
        self.pane.set_timelines(self.timelines)
        self.pane.set_history(reopened.records)
        if reopened.records:
            self.pane.show_record(reopened.records[-1])
        else:  # an empty session: the chat starts as a new one would
            await transcript.show_greeting(self.target())
        await transcript.add_note(f"resumed session {self.session.log.session_id}: {reopened.note}", "ok")
        if reopened.skipped:  # a torn or damaged line: said once, the rest of the session is there
            await transcript.add_note(reopened.skipped, "error")
        self.update_header()
        self.call_after_refresh(collect_between_turns)

    # --- compare mode (tui.chat.compare) -------------------------------------------------
    async def action_compare(self, spec: str | None = None) -> None:
        """Open the compare screen: this chat's model and ``spec`` (asked for when not given)."""
        if self.busy:
            self.notify("A turn is in flight: Esc cancels it first.", severity="warning")
            return
        if spec is None:

            def asked(answer: str | None) -> None:
                if answer:
                    self.run_worker(self.open_compare(answer), group="compare")

            self.app.push_screen(CompareSpecScreen(self.session.spec), asked)
            return
        await self.open_compare(spec)

    async def open_compare(self, spec: str) -> None:
        specs = compare_specs(self.session, spec)
        self.notify(visible_controls(f"starting {specs[1][0]}…"), markup=False)  # typed text, not markup
        opened = await compare_screen(self.session, specs, self.clock)
        if isinstance(opened, CouldNotStart):
            # the spec and the error's words (a server's, maybe) are shown as written, never as markup or run
            said = visible_controls(f"could not start {opened.spec}: {opened.error}")
            self.notify(said, severity="error", markup=False)
            return
        self.app.push_screen(opened, self._back_from_compare)

    def _back_from_compare(self, handoff: ChatHandoff | None) -> None:
        if handoff is None:
            self.notify("Back to the chat.")
            return
        self.run_worker(self.continue_from(handoff), group="compare")

    async def continue_from(self, handoff: ChatHandoff) -> None:
        """The chat goes on with a compare pane: its model, its conversation, its turns drawn."""
        note = take_over(self.session, handoff)
        self.warm_up()
        await self.transcript.hide_greeting()
        await self.transcript.add_note(note, "ok")
        for rec in handoff.records:
            await self.transcript.add_record(rec, self.clock)
        self.update_header()

    # --- command palette -----------------------------------------------------------
    def system_commands(self) -> Iterable[SystemCommand]:
        """The chat's entries in the command palette (``tui.palette``)."""
        return chat_commands.palette(self, self.session.settings)
