"""A chat turn from Enter to its record: the hand-off between the chat screen and the stream thread.

The request runs on the stream thread (``tui.runner``); the UI only polls the recorder's snapshot at
its frame rate (:meth:`ChatTurns.tick`): new text into the answer every frame, the telemetry pane at
``PANE_FPS`` or on a phase change. When the record arrives, the answer gets its full render, the
transcript the turn's outcome, the session its context, and the pane the turn's figures, render lag
and timeline. At most one turn is in flight.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from textual.timer import Timer

from backends.finish import finish_turn
from telemetry.record import ErrorInfo, typed_records
from telemetry.render import RenderLag
from telemetry.timeline import Timeline, live_timeline, turn_timeline
from tui.format import turn_label
from tui.runner import LiveTurn, collect_between_turns
from tui.widgets.error_card import ErrorCard
from tui.widgets.transcript import AssistantMessage

if TYPE_CHECKING:
    from tui.chat.app import ChatApp

PANE_FPS = 10  # the figures change slower than the text; a layout-free repaint at 10 fps reads as live


class ChatTurns:
    """The chat's turn in flight, and what the finished ones left for the pane (timelines, render lag)."""

    def __init__(self, app: ChatApp) -> None:
        self.app = app
        self.live: LiveTurn | None = None
        self.message: AssistantMessage | None = None
        self.lag = RenderLag()
        self.lag_by_turn: dict[int, dict[str, Any]] = {}
        self.timelines: list[tuple[str, Timeline]] = []
        self.starting = False  # busy from Enter on, though nothing is mounted yet
        self._tick_timer: Timer | None = None
        self._pane_phase = ""
        self._pane_ns = 0

    def attach(self, fps: float) -> None:
        """Called once the app is mounted: the frame timer, paused between turns."""
        self._tick_timer = self.app.set_interval(1 / fps, self.tick, pause=True)

    @property
    def busy(self) -> bool:
        return self.live is not None or self.message is not None or self.starting

    def forget(self) -> None:
        """A new chat: no timelines and no render lag of earlier turns."""
        self.timelines = []
        self.lag_by_turn = {}

    def show_logged(self, records: Sequence[dict[str, Any]]) -> None:
        """A reopened session's turns as the pane's timelines."""
        # the log's lines were read as records there (read_records); typed here at the edge
        self.timelines = [(turn_label(r.turn_index), turn_timeline(r)) for r in typed_records(records)]
        self.app.pane.set_timelines(self.timelines)

    async def send(self, prompt: str, submitted_ns: int | None = None) -> None:
        """Start a turn; returns once it is running (the record arrives later).

        ``submitted_ns``: the user's Enter (default: now); the record's ``own_delay_ms`` runs from it.
        """
        app = self.app
        session, transcript = app.session, app.transcript
        submitted_ns = app.clock() if submitted_ns is None else submitted_ns
        self.lag = RenderLag()
        app.pane.show_message(f"starting {session.spec}…")
        self.starting = True
        try:
            live = await session.start(prompt, submitted_ns=submitted_ns)
        except Exception as exc:  # the backend could not even be created (unknown model, missing key, ...)
            self.starting = False
            await transcript.hide_greeting()
            await transcript.compact()
            await transcript.add_user(prompt)
            error = ErrorInfo(
                type=getattr(exc, "kind", None) or type(exc).__name__,
                message=str(exc) or repr(exc),
                hint=getattr(exc, "hint", None),
            )
            await transcript.add_error(ErrorCard(error, session.spec, ""))
            app.pane.show_message(f"could not start {session.spec}: {exc}")
            return
        # The request is on its way: the prompt and the answer's widgets are mounted while it travels
        # (10-30 ms), not before it leaves, where they were ttft's own delay.
        self.live = live
        if self._tick_timer is not None:
            self._tick_timer.resume()
        self.tick(force=True)  # the pane goes live at once: the phase and the wait so far
        try:
            await transcript.hide_greeting()
            await transcript.compact()  # a paint must not cost more the longer the chat
            await transcript.add_user(prompt)
            self.message = message = await transcript.add_assistant(app.clock, self.lag)
        finally:
            self.starting = False
        app.update_header()
        app.run_worker(self._await_turn(live, message), group="turn", exclusive=False)

    async def _await_turn(self, live: LiveTurn, message: AssistantMessage) -> None:
        app = self.app
        try:
            turn = await live.wait()
        except Exception as exc:  # should not happen: the runner turns every failure into a record
            turn = finish_turn(live.recorder, app.session.log)  # logged and sunk, if not yet
            app.notify(f"turn ended abnormally: {exc}", severity="error")
        record = turn.to_dict()
        if self._tick_timer is not None:
            self._tick_timer.pause()
        self.tick(force=True)  # the last frame: every chunk painted before the full render
        self.live = None
        await message.finalize(turn)
        await app.transcript.add_outcome(turn)
        if live.log_error:
            await app.transcript.add_note(live.log_error, "error")
        app.session.complete(record)
        refreshed = asyncio.Event()
        app.call_after_refresh(refreshed.set)  # after the final render's own lag stamp
        await refreshed.wait()
        lag = self.lag.summary()
        self.lag_by_turn[turn.turn_index] = lag
        app.pane.show_record(record, lag)
        self.timelines.append((turn_label(turn.turn_index), turn_timeline(turn)))
        app.pane.set_timelines(self.timelines)
        app.pane.set_history(app.session.records)
        self.message = None
        app.call_after_refresh(collect_between_turns)

    def tick(self, force: bool = False) -> None:
        """One frame: new text into the answer every frame; the pane at PANE_FPS or on a phase change."""
        live, message = self.live, self.message
        # Shutting down: Textual removes the widgets before it stops the app's timers, so a frame may
        # still fire with the pane gone (a turn in flight at exit is cancelled and logged elsewhere).
        if live is None or not self.app.is_running:
            return
        rec = live.recorder
        now = self.app.clock()
        snap = rec.snapshot(now)
        if message is not None:  # None for the first frames: the answer's widget is mounted after the send
            message.pump(rec, snap)
        if force or snap.phase != self._pane_phase or now - self._pane_ns >= 1e9 / PANE_FPS:
            self._pane_phase, self._pane_ns = snap.phase, now
            self.app.pane.show_live(snap, rec.attempts, self.lag.summary())
            self.app.pane.set_timelines([*self.timelines, ("now", live_timeline(snap, rec.attempts))])
