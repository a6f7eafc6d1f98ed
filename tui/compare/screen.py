"""The compare screen: one prompt, 2-4 panes side by side, a live race view, a ranked summary with verdicts.

Streams are consumed on the stream thread (``tui.runner.LoopThread``), where
``backends.compare.runner.CompareRunner`` releases every pane at the same instant (or runs
them in turn), feeds each pane's recorder and logs each turn. The UI thread only
polls the recorders' snapshots at its frame rate and draws; every figure comes from
``telemetry`` (snapshots, records, ``telemetry.compare.stats``).

The screen lays out and routes; the thread hand-off is ``tui.compare.controller``, one pane's
widgets ``tui.compare.pane``, adding, removing and keeping panes ``tui.compare.roster``, the slash
commands and palette entries ``tui.compare.commands``, the export and the hand-off back to the chat
``tui.compare.output``, and every text drawn ``tui.compare.view``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult, CSSPathType, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Container, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from ...backends.agent.consent import Consent
from ...backends.agent.loop import DEFAULT_MAX_STEPS, NO_TOOLS, supports_tools
from ...backends.base import Backend, Message
from ...backends.compare.panes import LABELS, MAX_PANES, BackendFactory, build_panes, pane_order
from ...backends.compare.runner import CompareMode, CompareRunner, PromptResult, new_comparison_id
from ...telemetry import events as ev
from ...telemetry.compare.stats import Comparison, compare
from ...telemetry.log.prompt_history import PromptHistory
from ...telemetry.log.turns import SessionLog, data_dir
from ...telemetry.settings import TurnSettings
from ..format import fmt_settings, visible_controls
from ..runner import LoopThread, collect_between_turns, full_collections_between_turns
from ..tool_servers import ToolServers
from ..widgets.prompt_box import PromptBox
from ..widgets.timeline import TimelineView
from .commands import DEFAULT_TRIALS, palette, run_command
from .controller import PaneController
from .output import ChatHandoff, export
from .pane import PaneView
from .roster import PaneRoster
from .view import header_text, summary

TOOLS_START_GRACE_S = 5.0  # past the servers' own start timeout, a prompt goes without waiting for them
FIGURES_FPS = 10  # status lines and the race view: the figures change slower than the text
SHORT = {
    "ttft": "TTFT",
    "ttfvt": "TTFVT",
    "tpot": "TPOT",
    "e2e": "E2E",
    "output_tokens": "tokens",
    "steps": "steps",
    "tools": "tools",
    "own": "own",
}


class CompareScreen(Screen["ChatHandoff | None"]):
    """The comparison itself: ``ttft compare`` shows it alone, and the chat opens it over itself
    (F9 or ``/compare SPEC``); from there, ``/chat A`` continues pane A's conversation in the chat."""

    CSS_PATH: ClassVar[CSSPathType] = ["compare.tcss", "../widgets/transcript.tcss"]
    # Textual declares this an instance attribute (not a ClassVar), so it is overridden as one.
    HORIZONTAL_BREAKPOINTS: list[tuple[int, str]] | None = [(0, "-narrow"), (120, "-wide")]  # noqa: RUF012
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+s", "export", "Export", priority=True),
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
        mode: CompareMode = "parallel",
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
        prompts: PromptHistory | None = None,
        tools: ToolServers | None = None,
        consent: Consent | None = None,
        max_steps: int = DEFAULT_MAX_STEPS,
    ) -> None:
        super().__init__()
        self._gc_policy = contextlib.ExitStack()
        self.tools = tools if tools is not None else ToolServers()  # the MCP servers (--mcp), started on mount
        # One consent for every pane: "always" holds for the rest of the comparison, in every pane; what the
        # command line allowed (--allow-tools, --allow-tool) is never asked about.
        self.consent = consent if consent is not None else Consent()
        self.consent.ask = True
        self.max_steps = max_steps
        self._said_no_tools: list[str] = []  # the panes whose models take no tools, said once
        self.from_chat = from_chat
        self.clock = clock or ev.now_ns
        self.fps = fps
        self.settings = settings or TurnSettings()
        self.repeat = max(1, repeat)
        self.blind = blind
        self.initial_prompt = initial_prompt
        self.out_dir = out_dir
        if factory is None:  # each backend in its own process, as in the chat
            from ..session import default_backend_factory

            factory = default_backend_factory
        order = pane_order(len(backends), blind=blind, seed=seed)  # blind: names hidden *and* order shuffled
        panes = build_panes(backends, order, settings=self.settings, history=history)
        self.session_log = SessionLog(session_id)
        self.runner = CompareRunner(
            panes, log=self.session_log, comparison_id=comparison_id or new_comparison_id(), mode=mode, system=system
        )
        self.panes = PaneController(self, self.runner, lambda: self.is_running)
        self.roster = PaneRoster(
            self.runner,
            self.panes,
            factory,
            settings=self.settings,
            clock=self.clock,
            specs={LABELS[k]: specs[j] for k, j in enumerate(order)} if specs is not None else {},
        )
        self.prompts = prompts if prompts is not None else PromptHistory().load()
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
    def mode(self) -> CompareMode:
        return self.runner.mode

    @property
    def views(self) -> list[PaneView]:
        """The panes' widgets, in the runner's order."""
        return self.roster.views

    # --- layout --------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static(id="header")
        with Container(id="compare-panes"):
            for p in self.runner.panes:
                yield self.roster.new_view(p, blind=self.blind)
        with VerticalScroll(id="compare-bottom"):
            yield Static("Race · current prompt, every pane on one time axis", classes="section-title")
            yield TimelineView(id="race")
            yield Static(Text("Send a prompt: every pane gets it at the same instant.", style="dim"), id="summary")
        yield PromptBox(
            self.clock,
            placeholder="Prompt for every pane · Enter sends · ctrl+j new line · ↑ earlier · /keep A · /repeat N"
            " · /again · /add SPEC · /remove B · F1-F8",
            prompts=self.prompts,
            id="prompt",
        )
        yield Footer()

    async def on_mount(self) -> None:
        self._gc_policy.enter_context(full_collections_between_turns())
        self.panes.attach()
        self._tick_timer = self.set_interval(1 / self.fps, self._tick, pause=True)
        self.query_one(TimelineView).max_rows = MAX_PANES
        self._draw_race()
        self.update_header()
        self.query_one("#prompt", PromptBox).focus()
        for p in self.runner.panes:
            self.panes.warm(p.backend)
        self.tools.begin(self, self.stream)
        if self.initial_prompt and self.tools.servers:  # it waits for the servers: the screen is up meanwhile
            self.run_worker(self.send(self.initial_prompt), group="prompt")
        elif self.initial_prompt:
            await self.send(self.initial_prompt)

    async def on_unmount(self) -> None:
        self._gc_policy.close()
        await self.tools.close(self.stream)
        await self.panes.close()

    def action_tools(self) -> None:
        from ..screens.tools import ToolsScreen

        self.app.push_screen(ToolsScreen(self.tools.views))

    def update_header(self) -> None:
        r = self.runner
        t = header_text(
            kept=r.panes[0].label if r.kept else None,
            panes=len(r.panes),
            mode=r.mode,
            blind=self.blind,
            trials=self.repeat,
            settings=fmt_settings(self.settings.to_dict()),
            comparison_id=r.comparison_id,
        )
        self.query_one("#header", Static).update(t)

    # --- sending -------------------------------------------------------------------
    async def on_prompt_box_submitted(self, event: PromptBox.Submitted) -> None:
        event.stop()  # opened from the chat: the chat's own handler must not see it
        submitted = event.submitted_ns  # Enter: each pane's own delay (-> its send) starts here
        box = event.box
        if event.text.strip().startswith("/"):
            await self.command(box.take().strip())
            return
        if self.in_flight:
            self.notify("A prompt is in flight: Esc cancels it (your prompt stays here).", severity="warning")
            return  # the text stays in the box
        await self.send(box.take(), submitted_ns=submitted)

    async def send(self, prompt: str, repeat: int | None = None, submitted_ns: int | None = None) -> None:
        """Start the prompt on every pane; returns once it is running. ``submitted_ns``: the user's Enter."""
        await self._tools_started()
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
        host = self.tools.host
        self.runner.tools = self.panes.tools(host, self.consent, self.max_steps) if host is not None else None
        if host is not None and host.tools():
            bare = [p.label for p in self.runner.panes if not supports_tools(p.backend)]
            if bare and bare != self._said_no_tools:
                self._said_no_tools = bare
                self.notify(f"Pane {', '.join(bare)} answers without the tools: {NO_TOOLS}.", severity="warning")
        future = self.panes.run_prompt(prompt, n, submitted_ns)
        if self._tick_timer is not None:
            self._tick_timer.resume()
        self._await_prompt(future)

    async def _tools_started(self) -> None:
        """A prompt sent while the --mcp servers still start (the one on the command line) waits for them:
        every pane is to be offered the tools from its first turn."""
        tools = self.tools
        if not tools.servers or tools.host is not None or tools.error is not None:
            return
        deadline = ev.now_ns() + int((tools.start_timeout_s + TOOLS_START_GRACE_S) * 1e9)
        while tools.host is None and tools.error is None and ev.now_ns() < deadline:
            await asyncio.sleep(0.05)

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
            v.show_wins([SHORT[k] for k in c.wins(v.label)])
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
        kept = await self.roster.keep(idx)
        self.repeat = 1
        self.update_header()
        self._draw_race()
        self.notify(f"continuing with {kept.label} ({kept.model_name}) alone")

    async def action_remove(self, label: str) -> None:
        idx = self._index(label)
        if idx is None or self.in_flight or len(self.views) <= 1:
            return
        await self.roster.remove(idx)
        self.update_header()
        self._draw_race()

    async def action_add(self, spec: str) -> None:
        if self.in_flight or len(self.views) >= MAX_PANES or self.runner.kept:
            self.notify(f"at most {MAX_PANES} panes, and not after keep", severity="warning")
            return
        history = list(self.runner.panes[0].history) if self.from_chat and self.runner.panes else []
        try:
            view = await self.roster.add(spec, blind=self.blind, history=history)
        except Exception as exc:
            self.notify(f"could not add {spec}: {exc}", severity="error")
            return
        await self.query_one("#compare-panes").mount(view)
        self.update_header()

    async def action_export(self) -> list[Path]:
        out = self.out_dir or data_dir() / "exports"
        try:
            paths = export(self.results, out, self.runner.comparison_id)
        except OSError as exc:  # the disk's answer, told; the comparison stays on screen to export again
            said = f"could not write the export to {out}: {exc.strerror or exc}"
            self.notify(visible_controls(said), severity="error", timeout=15, markup=False)
            return []
        if not paths:
            self.notify("Nothing to export yet.", severity="warning")
            return []
        self.last_export = paths
        # a path is shown as written, never taken as markup
        self.notify(visible_controls("exported " + ", ".join(str(p) for p in paths)), timeout=8, markup=False)
        return self.last_export

    def _index(self, label: str) -> int | None:
        idx = self.roster.index(label)
        if idx is None:
            self.notify(f"no pane {label.strip().upper()!r}", severity="warning")
        return idx

    async def command(self, text: str) -> None:
        """A slash command (``tui.compare.commands.COMMANDS``)."""
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
        view = self.views[idx]
        spec = self.roster.specs.get(view.label)
        if spec is None:
            self.notify(f"pane {view.label}: its model spec is unknown", severity="error")
            return
        self.dismiss(ChatHandoff.of(view, self.runner.panes[idx], spec))
