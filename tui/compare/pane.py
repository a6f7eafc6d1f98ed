"""One compare pane on screen: its transcript (answers, reasoning blocks, error cards), its title and its
live status line, painted from its recorder's snapshots on the screen's shared frame.

A tool-using turn (``--mcp``) draws as the chat's does: an answer per model step, each call's result
(``tui.widgets.tool_steps.ToolRun``, outside text shown, never run) under the step that asked for it."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.markup import escape as escape_markup
from textual.widgets import Static

from ...telemetry.record import TurnRecord
from ...telemetry.recorder import TurnRecorder
from ...telemetry.steps import ToolStepRecord
from ...telemetry.view.render import RenderLag
from ...telemetry.view.timeline import Timeline, live_timeline, turn_timeline
from ..format import kept_after_cancel, short_spec_str
from ..widgets.error_card import ErrorCard
from ..widgets.tool_steps import ToolRun
from ..widgets.transcript import AssistantMessage, NoteMessage, Transcript, UserMessage
from .view import pane_done_text, pane_live_text


class PaneView(Vertical):
    """One model: its own transcript (with reasoning blocks and error cards) and a live status line."""

    def __init__(self, label: str, name: str, color: str, clock: Callable[[], int]) -> None:
        super().__init__(classes="compare-pane", id=f"pane-{label}")
        self.label = label
        self.model_name = name
        self.color = color
        self.clock = clock
        self.blind = False
        self.recorder: TurnRecorder | None = None
        self.message: AssistantMessage | None = None
        self.box: Vertical | None = None
        self.lag = RenderLag()
        self.lag_history: list[dict[str, Any]] = []  # one render-lag summary per finished turn
        self.trial = 0
        self.trials = 1
        self.timeline: Timeline | None = None
        self.wins: list[str] = []  # the summary columns this pane won on the last prompt
        self.turn_records: list[TurnRecord] = []  # the last trial of each prompt: the pane's conversation
        self.ui_lock = asyncio.Lock()
        self._phase = ""
        self._unrendered: tuple[AssistantMessage | None, TurnRecord] | None = None
        self._steps: list[AssistantMessage] = []  # a tool-using turn: the answer drawn for each earlier model step
        self._models: list[TurnRecord] = []  # ... and, once it ended, each model step's own record

    def compose(self) -> ComposeResult:
        yield Transcript(classes="pane-transcript")
        yield Static(Text("ready", style="dim"), classes="pane-status")

    def on_mount(self) -> None:
        self.show_title()

    @property
    def transcript(self) -> Transcript:
        return self.query_one(Transcript)

    @property
    def status(self) -> Static:
        return self.query_one(".pane-status", Static)

    def show_title(self) -> None:
        name = "model hidden" if self.blind else self.model_name
        wins = f"  [b green]★ {' '.join(self.wins)}[/]" if self.wins else ""
        # room for the name: the border's corners and padding, the label, the stars
        room = (self.size.width or 40) - 6 - len(self.label) - (len(" ".join(self.wins)) + 4 if self.wins else 0)
        short = escape_markup(short_spec_str(name, max(8, room)))  # a model name may hold brackets
        self.border_title = f"[b {self.color}]{self.label}[/] {short}{wins}"

    def on_resize(self) -> None:
        self.show_title()  # the model's name is shortened to the pane's width

    async def start_prompt(self, prompt: str) -> None:
        self.timeline = None
        self.show_wins([])
        await self.transcript.compact()
        await self.transcript.add_user(prompt)
        self.box = Vertical(classes="pane-turn")
        await self.transcript.mount(self.box)

    async def start_trial(self, trial: int, trials: int, recorder: TurnRecorder) -> None:
        assert self.box is not None
        if self.message is not None or self.box.children:
            await self.box.remove_children()  # a trial replaces the previous trial's answer
        self.lag = RenderLag()
        # All panes paint on the same ticks, and the answer stays lightly styled text until the prompt ends:
        # a Markdown block mounted mid-stream would lay out every pane again while the others stream.
        self.message = AssistantMessage(self.clock, self.lag, chain=False, settle=False)
        await self.box.mount(self.message)
        self.trial, self.trials = trial, trials
        self.recorder = recorder
        self._steps = []

    async def step_began(self, recorder: TurnRecorder) -> None:
        """A model step of a tool-using turn begins: after the first, a new answer under the tool results."""
        if recorder is self.recorder or self.box is None or self.message is None:
            return
        self.tick(self.clock())  # the last step's text all painted before its answer is left
        self._steps.append(self.message)
        self.message = AssistantMessage(self.clock, self.lag, chain=False, settle=False)
        await self.box.mount(self.message)
        self.recorder = recorder

    async def tool_ended(self, step: ToolStepRecord, text: str | None) -> None:
        """A call's result, under the step that asked for it."""
        if self.box is not None:
            await self.box.mount(ToolRun(step, text))  # the next step's answer is mounted after it

    def fit_room(self) -> None:
        """Once the new answer is laid out, before its request goes out: give it a fixed room, what is
        left of the view below the prompt. The prompt stays in view, the answer fills the room and then
        pages within it, and no pane changes height while it streams (each change is a layout pass of
        the whole screen, landing in whichever frame each pane's text arrives)."""
        msg, users = self.message, self.transcript.query(UserMessage)
        if self.recorder is None or msg is None or msg.final or msg.stream.tail.text or not users:
            return  # not a turn about to be sent (sequential mode: another pane's)
        tail, user = msg.stream.tail, users.last()
        above = tail.region.y - user.region.y + user.styles.margin.top  # the prompt, down to the answer
        tail.reserve(self.transcript.scrollable_content_region.height - above - tail.styles.margin.bottom)

    def tick(self, now: int, figures: bool = True) -> None:
        """A frame: new answer text every frame; the status line and race row only when ``figures``."""
        rec, msg = self.recorder, self.message
        if rec is None or msg is None:
            return
        snap = rec.snapshot(now)
        msg.pump(rec, snap)
        if figures or snap.phase != self._phase:
            self._phase = snap.phase
            self.set_status(pane_live_text(snap, self.trial, self.trials))
            self.timeline = live_timeline(snap, rec.attempts)

    async def finish_trial(self, record: TurnRecord, render: bool = True, models: Sequence[TurnRecord] = ()) -> None:
        """The turn has ended: figures now; the full render of the answer now or (``render=False``) at
        ``render_final``, so that rendering one long answer never stalls panes still streaming."""
        self.tick(self.clock())  # last frame: every chunk painted before the full render
        self.recorder = None
        if self.trial == self.trials - 1:  # as in the pane's conversation: the last trial of each prompt
            self.turn_records.append(record)
        self.lag_history.append(self.lag.summary())
        self.timeline = turn_timeline(record)
        self.set_status(pane_done_text(record))
        self._unrendered = (self.message, record)
        self._models = list(models)
        if render:
            await self.render_final()

    async def render_final(self) -> None:
        if self._unrendered is None:
            return
        message, record = self._unrendered
        self._unrendered = None
        steps, self._steps = self._steps, []
        models, self._models = self._models, []
        if models and len(models) == len(steps) + 1:  # each step's answer from its own record, not the joined one
            for msg, rec in zip(steps, models, strict=False):
                if msg.is_attached:
                    await msg.finalize(rec)
            if message is not None and message.is_attached:
                await message.finalize(dataclasses.replace(models[-1], status=record.status, error=record.error))
        elif message is not None and message.is_attached:
            await message.finalize(record)
        if self.box is not None and self.box.is_attached:
            if record.status == "error":
                await self.box.mount(ErrorCard.of(record))
            elif record.status == "cancelled":
                kept = kept_after_cancel(record)
                await self.box.mount(NoteMessage(f"■ cancelled; {kept}", "warn"))

    def set_status(self, text: Text) -> None:
        """The status line has a fixed height (compare.tcss): a new text never costs a layout pass."""
        self.status.update(text, layout=False)

    def show_wins(self, wins: Sequence[str]) -> None:
        self.wins = list(wins)
        self.show_title()
