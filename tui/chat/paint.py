"""A turn on the chat's screen, painted: from the driver's ``TurnStarted`` to its figures in the pane.

The screen hands the turn driver's messages (:mod:`tui.chat.turn`) to :class:`TurnPainter`, which
mounts the prompt and the answer while the request travels, paints the turn in flight in frames (new
text into the answer every frame, the telemetry pane at :data:`PANE_FPS` or on a phase change, both
from the recorder's snapshot), then draws the answer's full render, how the turn ended, and, once that
render is on screen, its figures. A tool-using turn's steps are :mod:`tui.chat.tools`' to draw; the
painter finishes them through it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from textual.app import App
from textual.css.query import NoMatches
from textual.timer import Timer
from textual.widget import MountError

from ...telemetry.view.timeline import live_steps_timeline, live_timeline, turn_timeline
from ..format import turn_label
from ..runner import LiveTurn, collect_between_turns
from ..session import ChatSession
from ..widgets.error_card import ErrorCard
from ..widgets.telemetry_pane import TelemetryPane
from ..widgets.transcript import Transcript
from .attach import Attachments
from .blocks import DrawnBlocks
from .branches import Branches
from .drawn import DrawnTurns
from .tools import ToolSteps, live_steps
from .turn import TurnFailed, TurnFinished, TurnStarted

PANE_FPS = 10  # the figures change slower than the text; a layout-free repaint at 10 fps reads as live
# The gaps' sparkline and the live timeline row at this rate (and at once on a phase change): each costs
# a compositor pass as large as the figures' own, about 1.5 ms at 160x48, for a picture that moves slowly.
PANE_GRAPH_FPS = 4


class PaintedScreen(Protocol):
    """What :class:`TurnPainter` paints on: the chat's screen."""

    session: ChatSession
    steps: ToolSteps
    blocks: DrawnBlocks
    branches: Branches
    attachments: Attachments

    @property
    def transcript(self) -> Transcript: ...
    @property
    def pane(self) -> TelemetryPane: ...
    @property
    def app(self) -> App[Any]: ...
    @property
    def is_attached(self) -> bool: ...
    def clock(self) -> int: ...
    def notify(self, message: str, *, severity: Any = ...) -> None: ...
    def call_after_refresh(self, callback: Callable[..., Any], *args: Any) -> bool: ...
    def set_interval(self, interval: float, callback: Callable[[], Any], *, pause: bool = ...) -> Timer: ...
    def update_header(self) -> None: ...
    def put_back(self, prompt: str) -> None: ...


class TurnPainter:
    """Paints the turn on ``screen`` (``on_screen``: from ``TurnStarted`` until its figures are shown),
    keeping what it drew in ``drawn``."""

    def __init__(self, screen: PaintedScreen, drawn: DrawnTurns) -> None:
        self.screen = screen
        self.drawn = drawn
        self.on_screen: LiveTurn | None = None
        self._frames: Timer | None = None
        self._pane_phase = ""
        self._pane_ns = 0
        self._graphs_ns = 0

    def mounted(self, fps: float) -> None:
        self._frames = self.screen.set_interval(1 / fps, self.frame, pause=True)

    @contextlib.contextmanager
    def drawing(self) -> Iterator[None]:
        """What a turn's message draws. The app may close meanwhile (ctrl+q, SIGTERM after the turn is
        logged): its widgets are going, and the drawing is dropped; while it runs, a failure is a bug."""
        try:
            yield
        except (MountError, NoMatches):
            if self.screen.app.is_running and self.screen.is_attached:
                raise

    async def failed(self, event: TurnFailed) -> None:
        screen = self.screen
        with self.drawing():
            transcript = screen.transcript
            await transcript.hide_greeting()
            await transcript.compact()
            await transcript.add_user(event.prompt)
            await transcript.add_error(ErrorCard(event.error, event.spec, ""))
            screen.put_back(event.prompt)
            screen.pane.show_message(f"could not start {event.spec}: {event.error.message}")

    async def started(self, event: TurnStarted) -> None:
        """The request is on its way: the pane goes live at once, and the prompt and the answer's widgets
        are mounted while it travels (10-30 ms), not before it leaves, where they were ttft's own delay."""
        screen, drawn = self.screen, self.drawn
        self.on_screen, drawn.lag = event.live, event.lag
        screen.attachments.started()
        if self._frames is not None:
            self._frames.resume()
        with self.drawing():
            self.frame(force=True)  # the phase and the wait so far
            transcript = screen.transcript
            await transcript.hide_greeting()
            await transcript.compact()  # a paint must not cost more the longer the chat
            await transcript.add_user(event.prompt, event.turn_index, event.files)
            drawn.answer = await transcript.add_assistant(screen.clock, event.lag)
            drawn.answer.first_block = screen.blocks.next_number()
            screen.update_header()

    async def finished(self, event: TurnFinished) -> None:
        """The answer's full render and how the turn ended; its figures once that render is on screen."""
        if event.live is not self.on_screen:
            return  # the chat moved on (a new chat, another session): the turn is logged, not drawn
        screen = self.screen
        self.stop()
        with self.drawing():
            self.frame(force=True, pane=False)  # every chunk painted before the full render; the pane's figures follow
            record, transcript = event.record, screen.transcript
            if not await screen.steps.finalize(event.live, record) and self.drawn.answer is not None:
                await self.drawn.answer.finalize(record)
            screen.blocks.add(record.turn_index, record.answer)
            await transcript.add_outcome(record)
            if event.log_error:
                await transcript.add_note(event.log_error, "error")
            if event.trouble:
                screen.notify(event.trouble, severity="error")
            screen.call_after_refresh(self._show_figures, event)  # after the full render's own lag stamp

    def _show_figures(self, event: TurnFinished) -> None:
        if event.live is not self.on_screen:
            return
        screen, drawn, record = self.screen, self.drawn, event.record
        lag = event.lag.summary()
        drawn.lag_by_turn[record.turn_index] = lag
        with self.drawing():
            screen.pane.show_record(record, lag)
            drawn.timelines.append((turn_label(record.turn_index), turn_timeline(record)))
            screen.pane.set_timelines(drawn.timelines)
            screen.pane.set_history(screen.session.records)
            screen.branches.finished(record)
        self.forget()
        screen.call_after_refresh(collect_between_turns)

    def forget(self) -> None:
        """No turn is drawn any more (its figures shown, or the chat moved on)."""
        self.on_screen = self.drawn.answer = None

    def stop(self) -> None:
        if self._frames is not None:
            self._frames.pause()

    def frame(self, force: bool = False, pane: bool = True) -> None:
        """One frame: new text into the answer every frame; the pane's figures at PANE_FPS and its graphs at
        PANE_GRAPH_FPS, both at once on a phase change (``force``: now; not at all without ``pane``)."""
        screen = self.screen
        live, answer = self.on_screen, self.drawn.answer
        # Shutting down: Textual removes the widgets before it stops the timers, so a frame may still
        # fire with the pane gone (a turn in flight at exit is cancelled and logged elsewhere).
        if live is None or not screen.app.is_running:
            return
        rec = live.recorder
        now = screen.clock()
        snap = rec.snapshot(now)
        if answer is not None:  # None for the first frames: the answer's widget is mounted after the send
            answer.pump(rec, snap)
            if snap.phase == "ok":  # the stream is over and its text whole: the full render need not wait
                answer.finish_early(rec, snap)
        changed = force or snap.phase != self._pane_phase
        if pane and (changed or now - self._pane_ns >= 1e9 / PANE_FPS):
            graphs = changed or now - self._graphs_ns >= 1e9 / PANE_GRAPH_FPS
            self._pane_phase, self._pane_ns = snap.phase, now
            steps = live_steps(live, now)  # a tool-using turn's steps so far
            screen.pane.show_live(snap, rec.attempts, self.drawn.lag.summary(), steps, graphs=graphs)
            if graphs:
                self._graphs_ns = now
                now_row = live_steps_timeline(steps, snap.own_delay_ms, snap.phase) if steps else None
                screen.pane.set_timelines(
                    [*self.drawn.timelines, ("now", now_row or live_timeline(snap, rec.attempts))]
                )
