"""CompareApp: one prompt, 2-4 panes side by side, a live race view, a ranked summary with verdicts.

Streams are consumed on the stream thread (``tui.runner.LoopThread``), where
``backends.compare.CompareRunner`` releases every pane at the same instant (or runs
them in turn), feeds each pane's recorder and logs each turn. The UI thread only
polls the recorders' snapshots at its frame rate and draws; every figure comes from
``telemetry`` (snapshots, records, ``telemetry.compare``).

The screen lays out and routes; the thread hand-off is ``tui.compare_controller``, one pane's
widgets ``tui.compare_pane``, the slash commands and palette entries ``tui.compare_commands``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import App, ComposeResult, CSSPathType, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Container, VerticalScroll
from textual.filter import LineFilter
from textual.screen import Screen
from textual.widgets import Footer, Input, Static

from backends.base import Backend, Message
from backends.compare import ComparePane, CompareRunner, Mode, PromptResult, new_comparison_id
from backends.panes import LABELS, MAX_PANES, BackendFactory, build_panes, next_label, pane_order, parse_model
from telemetry import events as ev
from telemetry.compare import METRICS, Comparison, compare, write_comparison
from telemetry.log import SessionLog, data_dir
from telemetry.settings import TurnSettings
from tui import signals
from tui.compare_commands import DEFAULT_TRIALS, palette, run_command
from tui.compare_controller import PaneController
from tui.compare_pane import PaneView
from tui.compare_view import pane_color, summary
from tui.format import fmt_settings
from tui.runner import LoopThread, collect_between_turns, full_collections_between_turns
from tui.terminal import with_drop_controls
from tui.widgets import TimelineView

FIGURES_FPS = 10  # status lines and the race view: the figures change slower than the text
SHORT = {"ttft": "TTFT", "ttfvt": "TTFVT", "tpot": "TPOT", "e2e": "E2E", "output_tokens": "tokens"}


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
        self.clock = clock or ev.now_ns
        self.fps = fps
        self.settings = settings or TurnSettings()
        self.repeat = max(1, repeat)
        self.blind = blind
        self.initial_prompt = initial_prompt
        self.out_dir = out_dir
        if factory is None:  # each backend in its own process, as in the chat
            from tui.session import default_backend_factory

            factory = default_backend_factory
        self.factory: BackendFactory = factory
        order = pane_order(len(backends), blind=blind, seed=seed)  # blind: names hidden *and* order shuffled
        panes = build_panes(backends, order, settings=self.settings, history=history)
        # pane label -> the spec it was made from (so the chat can continue with it)
        self.specs: dict[str, tuple[str, str | None]] = (
            {LABELS[k]: specs[j] for k, j in enumerate(order)} if specs is not None else {}
        )
        self.session_log = SessionLog(session_id)
        self.runner = CompareRunner(
            panes, log=self.session_log, comparison_id=comparison_id or new_comparison_id(), mode=mode, system=system
        )
        self.panes = PaneController(self, self.runner, lambda: self.is_running)
        self.views: list[PaneView] = []
        self.results: list[tuple[PromptResult, Comparison]] = []
        self.last_prompt: str | None = None
        self.in_flight = False
        self.last_export: list[Path] = []
        self._tick_timer: Any = None
        self._figures_ns = 0
        self._log_errors_shown = 0

    @property
    def stream(self) -> LoopThread:
        """The stream thread the panes' turns run on."""
        return self.panes.stream

    @property
    def mode(self) -> Mode:
        return self.runner.mode

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
        self.panes.attach()
        self._tick_timer = self.set_interval(1 / self.fps, self._tick, pause=True)
        self.query_one(TimelineView).max_rows = MAX_PANES
        self._draw_race()
        self.update_header()
        self.query_one("#prompt", Input).focus()
        for p in self.runner.panes:
            self.panes.warm(p.backend)
        if self.initial_prompt:
            await self.send(self.initial_prompt)

    async def on_unmount(self) -> None:
        self._gc_policy.close()
        await self.panes.close()

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
        self.in_flight = True
        self.last_prompt = prompt
        for v in self.views:
            await v.start_prompt(prompt)
        summary_box = self.query_one("#summary", Static)
        # Same height as the summary it replaces: the panes do not move (a layout of every pane) mid-stream.
        pad = "\n" * max(0, summary_box.size.height - 1)
        summary_box.update(Text(f"running {n} trial{'s' if n > 1 else ''} ({self.runner.mode})…{pad}", style="dim"))
        future = self.panes.run_prompt(prompt, n, submitted_ns)
        if self._tick_timer is not None:
            self._tick_timer.resume()
        self._await_prompt(future)

    def pane_done(self) -> None:
        self._draw_race()

    @work(exclusive=False, group="prompt")
    async def _await_prompt(self, result_future: asyncio.Future[PromptResult]) -> None:
        try:
            result = await result_future
        except Exception as exc:  # the runner turns pane failures into records; this is a bug path
            self.notify(f"comparison ended abnormally: {exc}", severity="error")
            result = None
        await self.panes.settle()  # every pane's pending UI work (finalize, error cards) before the summary
        if self._tick_timer is not None:
            self._tick_timer.pause()
        self.in_flight = False
        errors = self.session_log.write_errors
        if len(errors) > self._log_errors_shown:  # the panes show the turns; the log does not hold them
            self._log_errors_shown = len(errors)
            self.notify(f"{errors[-1]}: these turns are not saved", severity="error", timeout=15)
        if result is None:
            return
        per_pane = {p.label: recs for p, recs in zip(self.runner.panes, result.records, strict=True)}
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
    def action_cancel(self) -> None:
        if self.in_flight:
            self.panes.cancel()
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
        for p in dropped:
            self.panes.close_backend(p.backend)
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
        self.panes.close_backend(pane.backend)
        view = self.views.pop(idx)
        await view.remove()
        self.update_header()
        self._draw_race()

    async def action_add(self, spec: str) -> None:
        if self.in_flight or len(self.views) >= MAX_PANES or self.runner.kept:
            self.notify(f"at most {MAX_PANES} panes, and not after keep", severity="warning")
            return
        factory = self.factory
        ps = parse_model(spec, None)

        async def make() -> Backend:  # on the stream thread: starting a backend process takes a moment
            return factory(ps.spec, ps.base_url)

        try:
            backend = await self.stream.call(make)
        except Exception as exc:
            self.notify(f"could not add {spec}: {exc}", severity="error")
            return
        label = next_label({v.label for v in self.views})
        history = list(self.runner.panes[0].history) if self.from_chat and self.runner.panes else []
        pane = ComparePane(backend, label, history=history, settings=self.settings)
        self.specs[label] = (ps.spec, ps.base_url)
        self.runner.add(pane)
        self.panes.warm(backend)
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
        """A slash command (``tui.compare_commands.COMMANDS``)."""
        warning = await run_command(self, text)
        if warning:
            self.notify(warning, severity="warning")

    def system_commands(self) -> Iterable[SystemCommand]:
        return palette(self, [v.label for v in self.views])

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
