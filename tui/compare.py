"""CompareApp: one prompt, 2-4 panes side by side, a live race view, a ranked summary with verdicts.

Streams are consumed on the stream thread (``tui.runner.LoopThread``), where
``backends.compare.CompareRunner`` releases every pane at the same instant (or runs
them in turn), feeds each pane's recorder and logs each turn. The UI thread only
polls the recorders' snapshots at its frame rate and draws; every figure comes from
``telemetry`` (snapshots, records, ``telemetry.compare``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import random
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import App, ComposeResult, CSSPathType, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Container, Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.filter import LineFilter
from textual.markup import escape as escape_markup
from textual.screen import Screen
from textual.widgets import Footer, Input, Static

from backends.base import Backend, Message
from backends.compare import ComparePane, CompareRunner, Mode, PromptResult, new_comparison_id
from backends.turn import warm_up
from telemetry import events as ev
from telemetry.compare import METRICS, Comparison, compare, write_comparison
from telemetry.log import SessionLog, data_dir
from telemetry.record import TurnRecord
from telemetry.recorder import TurnRecorder
from telemetry.render import RenderLag
from telemetry.settings import TurnSettings
from telemetry.timeline import Timeline, live_timeline, turn_timeline
from tui import signals
from tui.compare_view import pane_color, pane_done_text, pane_live_text, summary
from tui.format import fmt_settings, short_spec_str
from tui.runner import LoopThread, collect_between_turns, full_collections_between_turns
from tui.terminal import with_drop_controls
from tui.widgets import AssistantMessage, ErrorCard, NoteMessage, TimelineView, Transcript
from tui.widgets.transcript import UserMessage

LABELS = "ABCD"
MAX_PANES = 4
DEFAULT_TRIALS = 5
FIGURES_FPS = 10  # status lines and the race view: the figures change slower than the text
SHORT = {"ttft": "TTFT", "ttfvt": "TTFVT", "tpot": "TPOT", "e2e": "E2E", "output_tokens": "tokens"}

BackendFactory = Callable[[str, str | None], Backend]


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
        self.last_record: dict[str, Any] | None = None
        self.turn_records: list[dict[str, Any]] = []
        self.ui_lock = asyncio.Lock()
        self._phase = ""
        self._unrendered: tuple[AssistantMessage | None, dict[str, Any]] | None = None

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

    async def finish_trial(self, record: dict[str, Any], render: bool = True) -> None:
        """The turn has ended: figures now; the full render of the answer now or (``render=False``)
        at ``render_final``, so that rendering one long answer never stalls panes still streaming."""
        self.tick(self.clock())  # last frame: every chunk painted before the full render
        self.recorder = None
        self.last_record = record
        if self.trial == self.trials - 1:  # as in the pane's conversation: the last trial of each prompt
            self.turn_records.append(record)
        self.lag_history.append(self.lag.summary())
        self.timeline = turn_timeline(record)
        self.set_status(pane_done_text(record))
        self._unrendered = (self.message, record)
        if render:
            await self.render_final()

    async def render_final(self) -> None:
        if self._unrendered is None:
            return
        message, record = self._unrendered
        self._unrendered = None
        if message is not None and message.is_attached:
            await message.finalize(record)
        if self.box is not None and self.box.is_attached:
            if record.get("status") == "error":
                await self.box.mount(ErrorCard(record))
            elif record.get("status") == "cancelled":
                kept = "the partial answer is kept" if record.get("answer") else "nothing had arrived"
                await self.box.mount(NoteMessage(f"■ cancelled; {kept}", "warn"))

    def set_status(self, text: Text) -> None:
        """The status line has a fixed height (compare.tcss): a new text never costs a layout pass."""
        self.status.update(text, layout=False)

    def show_wins(self, wins: Sequence[str]) -> None:
        self.wins = list(wins)
        self.show_title()


@dataclass(frozen=True)
class ChatHandoff:
    """What the chat continues with when the compare screen hands one pane back to it."""

    spec: str
    base_url: str | None
    messages: tuple[Message, ...]  # the pane's conversation: the chat's context from now on
    records: tuple[dict[str, Any], ...]  # the pane's turns in this comparison, for the chat's transcript
    label: str


class CompareScreen(Screen["ChatHandoff | None"]):
    """The comparison itself: ``ttft compare`` shows it alone, and the chat opens it over itself
    (F9 or ``/compare SPEC``); from there, ``/chat A`` continues pane A's conversation in the chat."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+e", "export", "Export", priority=True),
        Binding("f5", "reveal", "Reveal"),
        Binding("f6", "toggle_mode", "Parallel/sequential"),
        Binding("f7", "trials", "Trials"),
        Binding("f8", "toggle_bottom", "Summary"),
        Binding("f10", "to_chat", "Back to chat"),
    ]

    def __init__(
        self,
        backends: Sequence[Backend],
        *,
        settings: TurnSettings | None = None,
        mode: Mode = "parallel",
        repeat: int = 1,
        blind: bool = False,
        system: str | None = None,
        initial_prompt: str | None = None,
        out_dir: Path | None = None,
        session_id: str | None = None,
        comparison_id: str | None = None,
        factory: BackendFactory | None = None,
        clock: Callable[[], int] | None = None,
        fps: float = 60.0,
        seed: int | None = None,
        specs: Sequence[tuple[str, str | None]] | None = None,
        history: Sequence[Message] = (),
        from_chat: bool = False,
    ) -> None:
        super().__init__()
        self._gc_policy = contextlib.ExitStack()
        self.from_chat = from_chat
        if not 1 <= len(backends) <= MAX_PANES:
            raise ValueError(f"compare takes 1 to {MAX_PANES} models")
        self.clock = clock or ev.now_ns
        self.fps = fps
        self.settings = settings or TurnSettings()
        self.repeat = max(1, repeat)
        self.blind = blind
        self.initial_prompt = initial_prompt
        self.out_dir = out_dir
        self.factory = factory
        order = list(range(len(backends)))
        if blind:  # names hidden *and* order shuffled, so pane A is not simply the first -m
            random.Random(seed).shuffle(order)
        panes = [
            ComparePane(backends[j], LABELS[k], history=list(history), settings=self.settings)
            for k, j in enumerate(order)
        ]
        # pane label -> the spec it was made from (so the chat can continue with it)
        self.specs: dict[str, tuple[str, str | None]] = (
            {LABELS[k]: specs[j] for k, j in enumerate(order)} if specs is not None else {}
        )
        self.stream = LoopThread("ttft-compare")
        self.session_log = SessionLog(session_id)
        self.runner = CompareRunner(
            panes, log=self.session_log, comparison_id=comparison_id or new_comparison_id(), mode=mode, system=system
        )
        self.views: list[PaneView] = []
        self.results: list[tuple[PromptResult, Comparison]] = []
        self.last_prompt: str | None = None
        self.in_flight = False
        self.last_export: list[Path] = []
        self._ui_loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._tick_timer: Any = None
        self._figures_ns = 0
        self._log_errors_shown = 0
        self._current_repeat = 1

    # --- layout --------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static(id="header")
        with Container(id="compare-panes"):
            for i, p in enumerate(self.runner.panes):
                view = PaneView(p.label, self._pane_name(p), pane_color(i), self.clock)
                view.blind = self.blind
                self.views.append(view)
                yield view
        with VerticalScroll(id="compare-bottom"):
            yield Static("Race · current prompt, every pane on one time axis", classes="section-title")
            yield TimelineView(id="race")
            yield Static(Text("Send a prompt: every pane gets it at the same instant.", style="dim"), id="summary")
        yield Input(
            placeholder="Prompt for every pane · /keep A · /repeat N · /again · /add SPEC · /remove B · F1-F8",
            id="prompt",
        )
        yield Footer()

    @staticmethod
    def _pane_name(p: ComparePane) -> str:
        return f"{p.backend.provider}:{p.backend.model}"

    async def on_mount(self) -> None:
        self._gc_policy.enter_context(full_collections_between_turns())
        self._ui_loop = asyncio.get_running_loop()
        self._tick_timer = self.set_interval(1 / self.fps, self._tick, pause=True)
        self.query_one(TimelineView).max_rows = MAX_PANES
        self._draw_race()
        self.update_header()
        self.query_one("#prompt", Input).focus()
        for p in self.runner.panes:  # first-use costs while the user types, not in the first prompt's own delay
            self._warm(p.backend)
        if self.initial_prompt:
            await self.send(self.initial_prompt)

    def _warm(self, backend: Backend) -> None:
        fut = self.stream.submit(warm_up(backend))  # a backend process finishes it before a turn sent meanwhile
        fut.add_done_callback(lambda f: f.cancelled() or f.exception())  # best effort: never raises

    async def on_unmount(self) -> None:
        self._gc_policy.close()
        for task in list(self._tasks):  # pane updates still queued: their widgets are going
            task.cancel()
        self._on_stream(self.runner.cancel)
        with contextlib.suppress(Exception):
            await self.stream.call(self.runner.aclose)
        self.stream.close()

    def update_header(self) -> None:
        r = self.runner
        t = Text()
        t.append("ttft compare ", style="bold")
        if r.kept:
            t.append(f"│ kept {r.panes[0].label} ", style="bold cyan")
        else:
            t.append(f"│ {len(r.panes)} panes · {r.mode} ", style="bold cyan")
        if self.blind:
            t.append("· blind ", style="bold magenta")
        t.append(f"│ trials {self.repeat} ")
        t.append(f"│ {fmt_settings(self.settings.to_dict())} ")
        t.append(f"│ {r.comparison_id}", style="dim")
        self.query_one("#header", Static).update(t)

    # --- sending -------------------------------------------------------------------
    async def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()  # opened from the chat: the chat's own handler must not see it
        submitted = self.clock()  # Enter: each pane's own delay (-> its send) starts here
        text = event.value.strip()
        if not text:
            return
        event.input.value = ""
        if text.startswith("/"):
            await self.command(text)
            return
        if self.in_flight:
            self.notify("A prompt is in flight: Esc cancels it.", severity="warning")
            return
        await self.send(text, submitted_ns=submitted)

    async def send(self, prompt: str, repeat: int | None = None, submitted_ns: int | None = None) -> None:
        """Start the prompt on every pane; returns once it is running. ``submitted_ns``: the user's Enter."""
        submitted_ns = self.clock() if submitted_ns is None else submitted_ns
        n = repeat or self.repeat
        self._current_repeat = n
        self.in_flight = True
        self.last_prompt = prompt
        for v in self.views:
            await v.start_prompt(prompt)
        summary_box = self.query_one("#summary", Static)
        # Same height as the summary it replaces: the panes do not move (a layout of every pane) mid-stream.
        pad = "\n" * max(0, summary_box.size.height - 1)
        summary_box.update(Text(f"running {n} trial{'s' if n > 1 else ''} ({self.runner.mode})…{pad}", style="dim"))
        future = self.stream.submit(
            self.runner.run_prompt(
                prompt,
                repeat=n,
                on_start=self._started,
                on_done=self._done,
                ready=self._ready,
                submitted_ns=submitted_ns,
            )
        )
        if self._tick_timer is not None:
            self._tick_timer.resume()
        self._await_prompt(asyncio.wrap_future(future))

    # Called on the stream thread: hand over to the UI loop without waiting (never block a stream).
    def _started(self, pane: int, trial: int, recorder: TurnRecorder) -> None:
        self._to_ui(pane, self._ui_started(pane, trial, recorder))

    async def _while_attached(self, coro: Coroutine[Any, Any, None]) -> None:
        """A pane update from the stream thread; one that lands while the app is closing finds
        its widgets gone, and is dropped (the turn itself is recorded and logged by the runner)."""
        try:
            await coro
        except NoMatches:
            if self.is_running and self.is_attached:
                raise

    async def _ready(self) -> None:
        """Resolves once every pane just started is laid out and on screen: the requests go out then,
        so mounting and laying out the new answers never competes with their first tokens."""
        assert self._ui_loop is not None
        fut: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._ui_loop.call_soon_threadsafe(self._spawn, self._ui_ready(fut))
        await asyncio.wrap_future(fut)

    async def _ui_ready(self, fut: concurrent.futures.Future[None]) -> None:
        try:
            for v in list(self.views):  # the _ui_started calls queued before this one hold these locks
                async with v.ui_lock:
                    pass
            await self.wait_for_refresh()  # the new answers are laid out: their rooms can be measured
            for v in list(self.views):
                v.fit_room()
            await self.wait_for_refresh()  # ... and laid out in turn
        finally:
            if not fut.done():
                fut.set_result(None)

    def _done(self, pane: int, trial: int, record: TurnRecord) -> None:
        self._to_ui(pane, self._ui_done(pane, record.to_dict()))

    def _to_ui(self, pane: int, coro: Coroutine[Any, Any, None]) -> None:
        assert self._ui_loop is not None
        self._ui_loop.call_soon_threadsafe(self._spawn, coro)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(self._while_attached(coro))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _ui_started(self, pane: int, trial: int, recorder: TurnRecorder) -> None:
        view = self.views[pane]
        async with view.ui_lock:
            await view.render_final()  # sequential mode: the previous trial's answer in full first
            await view.start_trial(trial, self._current_repeat, recorder)

    async def _ui_done(self, pane: int, record: dict[str, Any]) -> None:
        view = self.views[pane]
        async with view.ui_lock:
            await view.finish_trial(record, render=False)
        self._draw_race()
        if not any(v.recorder is not None for v in self.views):  # nobody streams now: full renders
            for v in list(self.views):
                async with v.ui_lock:
                    await v.render_final()

    @work(exclusive=False, group="prompt")
    async def _await_prompt(self, result_future: asyncio.Future[PromptResult]) -> None:
        try:
            result = await result_future
        except Exception as exc:  # the runner turns pane failures into records; this is a bug path
            self.notify(f"comparison ended abnormally: {exc}", severity="error")
            result = None
        # Let every pane's pending UI work (finalize, error cards) land before the summary.
        for v in self.views:
            async with v.ui_lock:
                pass
        if self._tick_timer is not None:
            self._tick_timer.pause()
        self.in_flight = False
        errors = self.session_log.write_errors
        if len(errors) > self._log_errors_shown:  # the panes show the turns; the log does not hold them
            self._log_errors_shown = len(errors)
            self.notify(f"{errors[-1]}: these turns are not saved", severity="error", timeout=15)
        if result is None:
            return
        per_pane = {p.label: recs for p, recs in zip(self.runner.panes, result.as_dicts(), strict=True)}
        c = compare(per_pane)
        self.results.append((result, c))
        await self.wait_for_refresh()  # the full renders are laid out: each pane can now end on its answer's end
        for v in self.views:
            wins = [SHORT[m.key] for m in METRICS if v.label in c.rankings[m.key].winners and len(self.views) > 1]
            v.show_wins(wins)
            v.transcript.scroll_end(animate=False, immediate=False)
        self._draw_race()
        self.show_summary()
        self.call_after_refresh(collect_between_turns)

    def show_summary(self) -> None:
        if not self.results:
            return
        result, c = self.results[-1]
        names = {v.label: ("hidden" if self.blind else v.model_name) for v in self.views}
        colors = {v.label: v.color for v in self.views}
        self.query_one("#summary", Static).update(
            summary(c, names, mode=result.mode, skew_ms=result.start_skew_ms, colors=colors)
        )

    # --- the frame -----------------------------------------------------------------
    def _tick(self) -> None:
        """One frame: every pane's new text; the figures (status lines, race view) at FIGURES_FPS."""
        now = self.clock()
        figures = now - self._figures_ns >= 1e9 / FIGURES_FPS
        if figures:
            self._figures_ns = now
        for v in self.views:
            v.tick(now, figures)
        if figures:
            self._draw_race()

    def _draw_race(self) -> None:
        race = self.query_one(TimelineView)
        race.reserve_rows = len(self.views)  # its height stays put while the panes stream
        race.set_rows([(v.label, v.timeline) for v in self.views if v.timeline is not None])

    # --- actions -------------------------------------------------------------------
    def _on_stream(self, fn: Callable[[], Any]) -> None:
        if not self.stream.loop.is_closed():
            self.stream.loop.call_soon_threadsafe(fn)

    def action_cancel(self) -> None:
        if self.in_flight:
            self._on_stream(self.runner.cancel)
        elif self.from_chat:
            self.action_to_chat()

    def action_reveal(self) -> None:
        self.blind = not self.blind
        for v in self.views:
            v.blind = self.blind
            v.show_title()
        self.update_header()
        self.show_summary()

    def action_toggle_mode(self) -> None:
        if self.in_flight:
            self.notify("Wait for the prompt in flight to finish.", severity="warning")
            return
        self.runner.mode = "sequential" if self.runner.mode == "parallel" else "parallel"
        self.update_header()
        self.notify(f"next prompts run {self.runner.mode}")

    async def action_trials(self, n: int = DEFAULT_TRIALS) -> None:
        """Send the last prompt again, ``n`` trials, for medians, p90 and verdicts."""
        if self.in_flight:
            self.notify("A prompt is in flight: Esc cancels it.", severity="warning")
            return
        if not self.last_prompt:
            self.notify("Send a prompt first; trials resend it.", severity="warning")
            return
        await self.send(self.last_prompt, repeat=n)

    def action_toggle_bottom(self) -> None:
        bottom = self.query_one("#compare-bottom")
        bottom.set_class(not bottom.has_class("-expanded"), "-expanded")

    async def action_keep(self, label: str) -> None:
        """Continue the conversation with this pane alone."""
        idx = self._index(label)
        if idx is None or self.in_flight:
            return
        dropped = self.runner.keep(idx)
        for b in [p.backend for p in dropped]:
            self.stream.submit(b.aclose())
        keep_view = self.views[idx]
        for v in [v for v in self.views if v is not keep_view]:
            await v.remove()
        self.views = [keep_view]
        self.repeat = 1
        self.update_header()
        self._draw_race()
        self.notify(f"continuing with {keep_view.label} ({keep_view.model_name}) alone")

    async def action_remove(self, label: str) -> None:
        idx = self._index(label)
        if idx is None or self.in_flight or len(self.views) <= 1:
            return
        pane = self.runner.remove(idx)
        self.stream.submit(pane.backend.aclose())
        view = self.views.pop(idx)
        await view.remove()
        self.update_header()
        self._draw_race()

    async def action_add(self, spec: str) -> None:
        if self.in_flight or len(self.views) >= MAX_PANES or self.runner.kept:
            self.notify(f"at most {MAX_PANES} panes, and not after keep", severity="warning")
            return
        if self.factory is None:
            from tui.commands.compare import parse_model, ui_factory

            factory: BackendFactory = ui_factory()
        else:
            from tui.commands.compare import parse_model

            factory = self.factory
        ps = parse_model(spec, None)

        async def make() -> Backend:  # on the stream thread: starting a backend process takes a moment
            return factory(ps.spec, ps.base_url)

        try:
            backend = await self.stream.call(make)
        except Exception as exc:
            self.notify(f"could not add {spec}: {exc}", severity="error")
            return
        label = next(c for c in LABELS if c not in {v.label for v in self.views})
        history = list(self.runner.panes[0].history) if self.from_chat and self.runner.panes else []
        pane = ComparePane(backend, label, history=history, settings=self.settings)
        self.specs[label] = (ps.spec, ps.base_url)
        self.runner.add(pane)
        self._warm(backend)
        view = PaneView(label, self._pane_name(pane), pane_color(LABELS.index(label)), self.clock)
        view.blind = self.blind
        self.views.append(view)
        await self.query_one("#compare-panes").mount(view)
        self.update_header()

    async def action_export(self) -> list[Path]:
        out = self.out_dir or data_dir() / "exports"
        records = [r for res, _ in self.results for recs in res.as_dicts() for r in recs]
        parts = [({"prompt_index": res.prompt_index, "mode": res.mode}, c) for res, c in self.results]
        if not records:
            self.notify("Nothing to export yet.", severity="warning")
            return []
        paths = write_comparison(records, parts, out, self.runner.comparison_id)
        self.last_export = list(paths)
        self.notify("exported " + ", ".join(str(p) for p in paths), timeout=8)
        return self.last_export

    def _index(self, label: str) -> int | None:
        label = label.strip().upper()
        for i, v in enumerate(self.views):
            if v.label == label:
                return i
        self.notify(f"no pane {label!r}", severity="warning")
        return None

    async def command(self, text: str) -> None:
        cmd, _, arg = text[1:].partition(" ")
        arg = arg.strip()
        match cmd.lower():
            case "keep":
                await self.action_keep(arg)
            case "remove":
                await self.action_remove(arg)
            case "add":
                await self.action_add(arg)
            case "repeat":
                try:
                    self.repeat = max(1, int(arg))
                except ValueError:
                    self.notify("/repeat N: trials per prompt", severity="warning")
                    return
                self.update_header()
            case "again":
                await self.action_trials(self.repeat)
            case "reveal":
                self.action_reveal()
            case "sequential" | "parallel":
                if self.runner.mode != cmd.lower():
                    self.action_toggle_mode()
            case "export":
                await self.action_export()
            case "chat":
                self.action_to_chat(arg or None)
            case _:
                self.notify(f"unknown command /{cmd}", severity="warning")

    def system_commands(self) -> Iterable[SystemCommand]:
        if self.from_chat:
            yield SystemCommand("Back to the chat", "F10 / Esc: the chat as it was", self.action_to_chat)
            for v in self.views:
                yield SystemCommand(
                    f"Continue pane {v.label} in the chat",
                    "its model and its conversation become the chat's",
                    self._to_chat_with(v.label),
                )
        yield SystemCommand(
            f"Trials: resend the last prompt {DEFAULT_TRIALS} times", "medians, p90 and verdicts", self.action_trials
        )
        yield SystemCommand("Reveal / hide model names", "blind mode", self.action_reveal)
        yield SystemCommand("Parallel / sequential", "how the next prompts start", self.action_toggle_mode)
        yield SystemCommand("Export the comparison", "JSONL + summary and verdict CSVs", self.action_export)
        for v in self.views:
            yield SystemCommand(f"Keep pane {v.label}", "continue with this pane alone", self._keeper(v.label))

    def _to_chat_with(self, label: str) -> Callable[[], None]:
        def go() -> None:
            self.action_to_chat(label)

        return go

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "to_chat":
            return self.from_chat  # only where there is a chat to go back to
        return True

    def action_to_chat(self, label: str | None = None) -> None:
        """Leave the comparison for the chat: as it was, or (``label``) continuing that pane's conversation."""
        if not self.from_chat:
            self.notify("This comparison was not opened from a chat.", severity="warning")
            return
        if self.in_flight:
            self.notify("A prompt is in flight: Esc cancels it first.", severity="warning")
            return
        if not label:
            self.dismiss(None)
            return
        idx = self._index(label)
        if idx is None:
            return
        view, pane = self.views[idx], self.runner.panes[idx]
        spec = self.specs.get(view.label)
        if spec is None:
            self.notify(f"pane {view.label}: its model spec is unknown", severity="error")
            return
        self.dismiss(ChatHandoff(spec[0], spec[1], tuple(pane.history), tuple(view.turn_records), view.label))

    def _keeper(self, label: str) -> Callable[[], Awaitable[None]]:
        async def keep() -> None:
            await self.action_keep(label)

        return keep


class CompareApp(App[int]):
    """``ttft compare``: the compare screen on its own."""

    CSS_PATH: ClassVar[CSSPathType] = ["chat.tcss", "compare.tcss"]
    TITLE = "ttft compare"
    # Textual declares this an instance attribute (not a ClassVar), so it is overridden as one.
    HORIZONTAL_BREAKPOINTS: list[tuple[int, str]] | None = [(0, "-narrow"), (120, "-wide")]  # noqa: RUF012

    def __init__(self, backends: Sequence[Backend], **kwargs: Any) -> None:
        super().__init__()
        self.compare = CompareScreen(backends, **kwargs)
        self._signals: list[int] = []

    def get_default_screen(self) -> Screen[Any]:
        return self.compare

    def on_mount(self) -> None:
        # SIGTERM / SIGHUP quit as ctrl+q does: the screen's unmount cancels the turns in flight and logs them
        self._signals = signals.install(
            asyncio.get_running_loop(), lambda s: self.exit(return_code=signals.exit_code(signals.Interrupted(s)))
        )

    def on_unmount(self) -> None:
        signals.uninstall(asyncio.get_running_loop(), self._signals)

    def get_line_filters(self) -> Sequence[LineFilter]:
        return with_drop_controls(super().get_line_filters())  # outside text never drives the terminal

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        if isinstance(screen, CompareScreen):
            yield from screen.system_commands()

    # The comparison's state, as scripts and tests read it.
    @property
    def results(self) -> list[tuple[PromptResult, Comparison]]:
        return self.compare.results

    @property
    def in_flight(self) -> bool:
        return self.compare.in_flight

    @property
    def runner(self) -> CompareRunner:
        return self.compare.runner

    @property
    def views(self) -> list[PaneView]:
        return self.compare.views

    @property
    def stream(self) -> LoopThread:
        return self.compare.stream

    @property
    def repeat(self) -> int:
        return self.compare.repeat

    @property
    def last_export(self) -> list[Path]:
        return self.compare.last_export
