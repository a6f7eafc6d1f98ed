"""ChatApp: the ttft chat with a live telemetry pane.

One idea, the chat screen: its layout, a turn from Enter to its record, and the chat's keys and
palette. Opening the compare screen over it is :mod:`tui.chat_compare`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import App, ComposeResult, CSSPathType, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Container, Vertical
from textual.filter import LineFilter
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer, Input, Static

from backends.finish import finish_turn
from telemetry import events as ev
from telemetry.export import export
from telemetry.log import SessionLog, Skipped, data_dir
from telemetry.record import ErrorInfo
from telemetry.render import RenderLag
from telemetry.settings import PROMPT_LOOKUP, TurnSettings
from telemetry.timeline import Timeline, live_timeline, turn_timeline
from tui import signals
from tui.chat_compare import CompareSpecScreen, compare_screen, continue_pane
from tui.format import fmt_settings, short_spec, turn_label
from tui.runner import LiveTurn, LoopThread, collect_between_turns, full_collections_between_turns
from tui.session import BackendFactory, ChatSession, default_backend_factory, default_model_spec
from tui.target import Target, describe_target
from tui.terminal import visible_text, with_drop_controls
from tui.widgets import AssistantMessage, ErrorCard, TelemetryPane, Transcript

if TYPE_CHECKING:
    from tui.compare import ChatHandoff

PANE_FPS = 10  # the figures change slower than the text; a layout-free repaint at 10 fps reads as live
EFFORTS = (None, "minimal", "low", "medium", "high")
STOP_WAIT_S = 3.0  # SIGTERM/SIGHUP: how long the turn in flight gets to be recorded and logged before exit


def exports_dir() -> Path:
    return data_dir() / "exports"


CHAT_ACTIONS = {"regenerate", "new_chat", "copy_answer", "export", "toggle_stream", "cycle_effort", "settings"}
CHAT_ACTIONS |= {"sessions", "toggle_pane", "compare", "cancel_turn"}


RESUME_DRAWN = 20  # turns a resumed session draws in the transcript


class ChatApp(App[None]):
    CSS_PATH: ClassVar[CSSPathType] = ["chat.tcss", "compare.tcss"]
    TITLE = "ttft"
    # Textual declares this an instance attribute (not a ClassVar), so it is overridden as one.
    HORIZONTAL_BREAKPOINTS: list[tuple[int, str]] | None = [(0, "-narrow"), (120, "-wide")]  # noqa: RUF012
    BINDINGS: ClassVar[list[BindingType]] = [
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
        self.live: LiveTurn | None = None
        self.message: AssistantMessage | None = None
        self.lag = RenderLag()
        self.lag_by_turn: dict[int, dict[str, Any]] = {}
        self._timelines: list[tuple[str, Timeline]] = []
        self.last_export: list[Path] = []
        self._tick_timer: Timer | None = None
        self._pane_phase = ""
        self._starting = False
        self._pane_ns = 0
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
        self._tick_timer = self.set_interval(1 / self.fps, self._tick, pause=True)
        self.update_header()
        self.query_one("#prompt", Input).focus()
        if self.resume_path is not None:
            await self.load_session(self.resume_path)
        else:
            await self.transcript.show_greeting(self.target())
        self.warm_up()

    def warm_up(self) -> None:
        """The backend's start and first use, in the background: the first turn then goes out as fast as
        any later one (its own delay, Enter -> send, no longer holds a process start or an SDK's first use)."""
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

    # --- a turn --------------------------------------------------------------------
    @property
    def busy(self) -> bool:
        return self.live is not None or self.message is not None or self._starting

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
        """Start a turn; returns once it is running (the record arrives later).

        ``submitted_ns``: the user's Enter (default: now); the record's ``own_delay_ms`` runs from it.
        """
        submitted_ns = self.clock() if submitted_ns is None else submitted_ns
        self.lag = RenderLag()
        self.pane.show_message(f"starting {self.session.spec}…")
        self._starting = True  # busy from Enter on, though nothing is mounted yet
        try:
            live = await self.session.start(prompt, submitted_ns=submitted_ns)
        except Exception as exc:  # the backend could not even be created (unknown model, missing key, ...)
            self._starting = False
            await self.transcript.hide_greeting()
            await self.transcript.compact()
            await self.transcript.add_user(prompt)
            error = ErrorInfo(
                type=getattr(exc, "kind", None) or type(exc).__name__,
                message=str(exc) or repr(exc),
                hint=getattr(exc, "hint", None),
            )
            await self.transcript.add_error(ErrorCard(error, self.session.spec, ""))
            self.pane.show_message(f"could not start {self.session.spec}: {exc}")
            return
        # The request is on its way: the prompt and the answer's widgets are mounted while it travels
        # (10-30 ms), not before it leaves, where they were ttft's own delay.
        self.live = live
        if self._tick_timer is not None:
            self._tick_timer.resume()
        self._tick(force=True)  # the pane goes live at once: the phase and the wait so far
        try:
            await self.transcript.hide_greeting()
            await self.transcript.compact()  # a paint must not cost more the longer the chat
            await self.transcript.add_user(prompt)
            self.message = message = await self.transcript.add_assistant(self.clock, self.lag)
        finally:
            self._starting = False
        self.update_header()
        self._await_turn(live, message)

    @work(exclusive=False, group="turn")
    async def _await_turn(self, live: LiveTurn, message: AssistantMessage) -> None:
        try:
            turn = await live.wait()
        except Exception as exc:  # should not happen: the runner turns every failure into a record
            turn = finish_turn(live.recorder, self.session.log)  # logged and sunk, if not yet
            self.notify(f"turn ended abnormally: {exc}", severity="error")
        record = turn.to_dict()
        if self._tick_timer is not None:
            self._tick_timer.pause()
        self._tick(force=True)  # the last frame: every chunk painted before the full render
        self.live = None
        await message.finalize(turn)
        await self.transcript.add_outcome(turn)
        if live.log_error:
            await self.transcript.add_note(live.log_error, "error")
        self.session.complete(record)
        refreshed = asyncio.Event()
        self.call_after_refresh(refreshed.set)  # after the final render's own lag stamp
        await refreshed.wait()
        lag = self.lag.summary()
        self.lag_by_turn[turn.turn_index] = lag
        self.pane.show_record(record, lag)
        self._timelines.append((turn_label(turn.turn_index), turn_timeline(record)))
        self.pane.set_timelines(self._timelines)
        self.pane.set_history(self.session.records)
        self.message = None
        self.call_after_refresh(collect_between_turns)

    def _tick(self, force: bool = False) -> None:
        """One frame: new text into the answer every frame; the pane at PANE_FPS or on a phase change."""
        live, message = self.live, self.message
        if live is None:
            return
        rec = live.recorder
        now = self.clock()
        snap = rec.snapshot(now)
        if message is not None:  # None for the first frames: the answer's widget is mounted after the send
            message.pump(rec, snap)
        if force or snap.phase != self._pane_phase or now - self._pane_ns >= 1e9 / PANE_FPS:
            self._pane_phase, self._pane_ns = snap.phase, now
            self.pane.show_live(snap, rec.attempts, self.lag.summary())
            self.pane.set_timelines([*self._timelines, ("now", live_timeline(snap, rec.attempts))])

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
        self._timelines = []
        self.lag_by_turn = {}
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
        try:
            records = self.session.log.records()
        except OSError as exc:
            self.notify(f"Export failed: could not read the session log: {exc}", severity="error")
            return []
        if not records:
            self.notify("Nothing to export yet: no turn has finished.")
            return []
        out_dir = exports_dir()
        sid = self.session.log.session_id
        paths = [out_dir / f"{sid}.jsonl", out_dir / f"{sid}.csv"]
        try:
            export(records, "jsonl", paths[0])
            export(records, "csv", paths[1])
        except OSError as exc:
            self.notify(f"Export failed: {exc}", severity="error")
            return []
        self.last_export = paths
        await self.transcript.add_note(f"exported {len(records)} turns: {paths[0]}  {paths[1]}", "ok")
        self.notify(f"Exported {len(records)} turns to {out_dir}")
        return paths

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
        """Reopen a logged session: transcript, timelines, history; new turns append to the same log."""
        if self.live is not None:
            self.notify("Cancel the turn in flight first (Esc).", severity="warning")
            return
        skipped = Skipped()
        try:
            records = self.session.resume(path, skipped)
        except (OSError, ValueError) as exc:  # ValueError: a file name that is no session id
            self.notify(f"Could not open {path}: {exc}", severity="error")
            return
        await self.transcript.remove_children()
        # The last few turns drawn (each is widgets to mount); the history and timelines get all read.
        for rec in records[-RESUME_DRAWN:]:
            await self.transcript.add_logged(rec, self.clock)
        await self.transcript.compact()
        self._timelines = [(turn_label(r.get("turn_index")), turn_timeline(r)) for r in records]
        self.pane.set_timelines(self._timelines)
        self.pane.set_history(records)
        if records:
            self.pane.show_record(records[-1])
        else:  # an empty session: the chat starts as a new one would
            await self.transcript.show_greeting(self.target())
        # the turn count from the last index: the earlier turns are not read up front
        turns = max((r.get("turn_index", -1) for r in records), default=-1) + 1
        shown = f", the last {RESUME_DRAWN} shown" if len(records) > RESUME_DRAWN else ""
        await self.transcript.add_note(f"resumed session {self.session.log.session_id}: {turns} turns{shown}", "ok")
        if skipped:  # a torn or damaged line: said once, the rest of the session is there
            await self.transcript.add_note(str(skipped.message()), "error")
        self.update_header()
        self.call_after_refresh(collect_between_turns)

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
        from tui.compare import CompareScreen

        # the compare screen on top: its own keys, not the chat's underneath
        return not (isinstance(self.screen, CompareScreen) and action in CHAT_ACTIONS)

    # --- command palette -----------------------------------------------------------
    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        from tui.compare import CompareScreen

        yield from super().get_system_commands(screen)
        if isinstance(screen, CompareScreen):
            yield from screen.system_commands()
            return
        s = self.session.settings
        yield SystemCommand("Cancel the turn in flight", "Esc: stop now and keep what arrived", self.action_cancel_turn)
        yield SystemCommand("Regenerate the last answer", "ctrl+r", self.action_regenerate)
        yield SystemCommand("New chat", "ctrl+n: a fresh conversation and session log", self.action_new_chat)
        yield SystemCommand("Copy the last answer", "ctrl+y", self.action_copy_answer)
        yield SystemCommand("Export the session (JSONL + CSV)", "ctrl+e", self.action_export)
        yield SystemCommand("Settings", "F2: model, reasoning, tokens, temperature, streaming", self.action_settings)
        yield SystemCommand("Change the model", "ctrl+l", lambda: self.action_settings("model"))
        yield SystemCommand(
            f"Streaming: turn {'off' if s.stream else 'on'}",
            "ctrl+t: applies to the next turn",
            self.action_toggle_stream,
        )
        yield SystemCommand(
            "Reasoning effort: next level", f"ctrl+o: now {s.reasoning_effort or 'default'}", self.action_cycle_effort
        )
        yield SystemCommand(
            f"Speculative decoding: turn {'off' if s.speculative else 'on'}",
            "local models: prompt-lookup drafting",
            self.action_toggle_speculative,
        )
        yield SystemCommand(
            "Compare with another model…", "F9 or /compare SPEC: side by side, same context", self.action_compare
        )
        yield SystemCommand("Sessions: reopen a past chat", "F3", self.action_sessions)
        yield SystemCommand("Toggle the telemetry pane", "F4", self.action_toggle_pane)
        yield SystemCommand("Help: keys and metrics", "F1", self.action_help)
