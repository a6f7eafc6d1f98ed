"""ChatScreen: the chat with its live telemetry pane, and everything the chat holds.

One idea, the chat on screen: its layout (header, transcript, prompt, telemetry pane, footer), its
keys and palette entries, and its state (the ``ChatSession``, the turn in flight, the finished turns'
timelines and render lag, the files attached to the next prompt, the prompt being edited).
Attributes down, messages up: the prompt box says ``PromptBox.Submitted`` (:mod:`tui.chat.prompt`),
a prompt in the transcript ``Picked`` (edit it and send it again: a new branch), a code block's
header ``CodeFence.CopyAsked``, the turn driver ``TurnStarted``, ``TurnFinished`` or ``TurnFailed``
(:mod:`tui.chat.turn`), and the handlers here call the widgets' methods. What the handlers route
to, one idea each: the key bindings and palette table (:mod:`tui.chat.commands`), export and
reopening a session (:mod:`tui.chat.sessions`), ``/attach`` (:mod:`tui.chat.attach`), and the
compare screen over the chat (:mod:`tui.chat.compare`).

What is typed is never lost: it stays in the box until a turn takes it, Esc cancels a turn and
never the draft, an edit sets the draft aside and gives it back, and the draft is kept on disk
(:mod:`telemetry.log.drafts`) for ``--resume``.

A turn in flight is painted by the screen's frames (:meth:`ChatScreen.frame`): new text into the answer
every frame, the telemetry pane at ``PANE_FPS`` or on a phase change, both from the recorder's snapshot.
"""

from __future__ import annotations

import contextlib
import shlex
import threading
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
from textual.widgets import Footer, Static, TextArea

from backends.attachments import Attachment
from telemetry.log import drafts
from telemetry.log.branches import branch_pair, links
from telemetry.log.prompt_history import PromptHistory
from telemetry.log.secrets import MASK
from telemetry.settings import PROMPT_LOOKUP, TurnSettings
from telemetry.view.render import RenderLag
from telemetry.view.timeline import Timeline, live_steps_timeline, live_timeline, turn_timeline
from tui.chat import attach as chat_attach
from tui.chat import commands as chat_commands
from tui.chat.attach import Pending
from tui.chat.compare import CompareSpecScreen, CouldNotStart, compare_screen, compare_specs, take_over
from tui.chat.prompt import ChatPrompt
from tui.chat.sessions import RESUME_DRAWN, Reopened, export_session, reopen
from tui.chat.tools import ApprovalAsked, ChatTools, StepBegan, ToolEnded, ToolNotice, ToolSteps, live_steps
from tui.chat.turn import ChatTurns, TurnFailed, TurnFinished, TurnStarted
from tui.format import fmt_settings, short_spec, turn_label, visible_controls
from tui.runner import LiveTurn, collect_between_turns
from tui.session import ChatSession
from tui.target import Target, describe_target
from tui.terminal import visible_text
from tui.tool_servers import ToolServers
from tui.widgets.attachments import AttachmentTray
from tui.widgets.code_blocks import CodeBlock, CodeFence, code_blocks
from tui.widgets.error_card import ErrorCard
from tui.widgets.pastes import Folds
from tui.widgets.prompt_box import PromptBox
from tui.widgets.telemetry_pane import TelemetryPane
from tui.widgets.transcript import AssistantMessage, Picked, Transcript

if TYPE_CHECKING:
    from tui.compare.output import ChatHandoff

EFFORTS = (None, "minimal", "low", "medium", "high")
PANE_FPS = 10  # the figures change slower than the text; a layout-free repaint at 10 fps reads as live
DRAFT_SAVE_S = 1.0  # a draft is written this long after the last keystroke (and when the chat closes)
EDIT_TITLE_W = 60


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
        prompts: PromptHistory | None = None,
        tools: ToolServers | None = None,
    ) -> None:
        """``warm_up``: start the backend and pay its first-use costs once the chat is shown, while the
        user types; ``resume``: a session log to reopen instead of the greeting; ``prompts``: the prompt
        history Up/Down and ctrl+r recall (default: the one beside the logs)."""
        super().__init__()
        self.prompts = prompts if prompts is not None else PromptHistory().load()
        # Held here, not only queried: the draft is read from it as the screen closes, its widgets gone.
        self._box = ChatPrompt(clock, prompts=self.prompts, id="prompt")
        self.pending: list[Pending] = []  # files for the next prompt (/attach)
        self.editing: int | None = None  # the turn whose prompt the box holds to send again (a new branch)
        self._stash: tuple[str, dict[str, str]] | None = None  # the draft set aside while editing
        self._draft_timer: Timer | None = None
        self._draft_lock = threading.Lock()  # drafts are written on a thread while typing, here on closing
        self._draft_taken = self._draft_written = 0  # which draft, in the order taken from the box
        self._branch: int | None = None  # the first turn of the newest branch, for the pane's side by side
        # Each drawn answer's turn (None: not this log's) and code blocks, in transcript order: they number them.
        self._blocks: list[tuple[int | None, tuple[CodeBlock, ...]]] = []
        self._sending: list[Pending] = []  # the files of the turn being started
        self.session = session
        self.clock = clock
        self.fps = fps
        self.resume_path = resume
        self.warm_up_at_start = warm_up
        self.turns = ChatTurns(session, self)
        self.tools = tools if tools is not None else ToolServers()  # the MCP servers (--mcp), started on mount
        self.chat_tools = ChatTools(self.tools, self)  # their tools offered to the model (tui.chat.tools)
        self.turns.agent = self.chat_tools.agent
        self.steps = ToolSteps(self)  # a tool-using turn's steps, drawn
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
                yield Static(id="edit-bar", classes="-empty")
                yield AttachmentTray(id="attachments")
                yield self._box
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
        return self._box

    async def on_mount(self) -> None:
        self._frames = self.set_interval(1 / self.fps, self.frame, pause=True)
        self.update_header()
        self.prompt.focus()
        if self.prompts.error:
            self.notify(visible_controls(self.prompts.error), severity="warning", markup=False)
        if self.resume_path is not None:
            await self.load_session(self.resume_path)
            await self.restore_draft()
        else:
            await self.transcript.show_greeting(self.target())
        self.warm_up()
        self.tools.begin(self, self.session.runner)

    async def on_unmount(self) -> None:
        self.turns.cancel()  # logged with what arrived, as cancelled
        self.save_draft()
        await self.tools.close(self.session.runner)
        await self.session.close_backend()

    def action_tools(self) -> None:
        from tui.screens.tools import ToolsScreen

        self.app.push_screen(ToolsScreen(self.tools.views))

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
    def on_screen(self) -> LiveTurn | None:
        """The turn being drawn: from ``TurnStarted`` until its figures are shown."""
        return self._on_screen

    @property
    def busy(self) -> bool:
        """From Enter until the finished turn's figures are shown: a new prompt waits."""
        return self.turns.busy or self._on_screen is not None

    async def on_prompt_box_submitted(self, event: PromptBox.Submitted) -> None:
        """Enter in the prompt box: a slash command, or the prompt (with any attached files) sent.

        The text leaves the box only when it goes: one that cannot go now (a turn in flight, a file
        the model cannot take) stays, and the user is told why."""
        event.stop()
        text = event.text
        word, _, args = text.strip().partition(" ")
        if word == chat_attach.ATTACH:
            self.prompt.take()
            await self.attach(args)
            return
        if word == chat_attach.DETACH:
            self.prompt.take()
            self.notify(chat_attach.detach(args, self.pending))
            await self.show_pending()
            return
        if word == "/tools":  # only a list: fine while a turn runs
            self.prompt.take()
            self.action_tools()
            return
        if self.busy:
            self.notify("A turn is in flight: Esc cancels it (your prompt stays here).", severity="warning")
            return  # the text stays in the prompt
        if word == "/compare":
            self.prompt.take()
            await self.action_compare(args.strip() or None)
            return
        refused = chat_attach.recheck([p.file for p in self.pending], self.attach_target())
        if refused is not None:
            self.notify(visible_controls(f"Not sent: {refused}. /detach N removes it."), severity="error", markup=False)
            return
        text = self.prompt.take()
        self._sending, self.pending = self.pending, []
        files = tuple(p.file for p in self._sending)
        await self.show_pending()
        if self.editing is not None:
            await self.branch_from(self.editing)
        await self.send(text, event.submitted_ns, files)

    async def send(
        self, prompt: str, submitted_ns: int | None = None, attachments: tuple[Attachment, ...] = ()
    ) -> None:
        """Start a turn; returns once its request is on its way (``TurnStarted`` draws it, ``TurnFinished``
        its end). ``submitted_ns``: the user's Enter (default: now); ttft's own delay runs from it."""
        self.pane.show_message(f"starting {self.session.spec}…")
        await self.turns.start(prompt, self.clock() if submitted_ns is None else submitted_ns, attachments)

    def _put_back(self, prompt: str) -> None:
        """A turn that could not start: its prompt and files back where they were typed, unless the
        user has typed on meanwhile (the transcript shows the prompt with the error either way)."""
        files, self._sending = self._sending, []
        if not self.prompt.value.strip():
            self.prompt.load(prompt)
        if files and not self.pending:
            self.pending = files
            self.run_worker(self.show_pending(), group="attach")

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
            self._put_back(event.prompt)
            self.pane.show_message(f"could not start {event.spec}: {event.error.message}")

    async def on_turn_started(self, event: TurnStarted) -> None:
        """The request is on its way: the pane goes live at once, and the prompt and the answer's widgets
        are mounted while it travels (10-30 ms), not before it leaves, where they were ttft's own delay."""
        self._on_screen, self.lag = event.live, event.lag
        self._sending = []
        if self._frames is not None:
            self._frames.resume()
        with self._drawing():
            self.frame(force=True)  # the phase and the wait so far
            transcript = self.transcript
            await transcript.hide_greeting()
            await transcript.compact()  # a paint must not cost more the longer the chat
            await transcript.add_user(event.prompt, event.turn_index, event.files)
            self.answer = await transcript.add_assistant(self.clock, event.lag)
            self.answer.first_block = self._next_block()
            self.update_header()

    async def on_turn_finished(self, event: TurnFinished) -> None:
        """The answer's full render and how the turn ended; its figures once that render is on screen."""
        if event.live is not self._on_screen:
            return  # the chat moved on (a new chat, another session): the turn is logged, not drawn
        self._stop_frames()
        with self._drawing():
            self.frame(force=True, pane=False)  # every chunk painted before the full render; the pane's figures follow
            record, transcript = event.record, self.transcript
            if not await self.steps.finalize(event.live, record) and self.answer is not None:
                await self.answer.finalize(record)
            self._blocks.append((record.turn_index, code_blocks(record.answer)))
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
            if record.branch_of is not None:
                self._branch = record.turn_index
            self.show_branches()
        self._on_screen = self.answer = None
        self.call_after_refresh(collect_between_turns)

    def _stop_frames(self) -> None:
        if self._frames is not None:
            self._frames.pause()

    def frame(self, force: bool = False, pane: bool = True) -> None:
        """One frame: new text into the answer every frame; the pane at PANE_FPS or on a phase change
        (``force``: now; not at all without ``pane``)."""
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
            if snap.phase == "ok":  # the stream is over and its text whole: the full render need not wait
                answer.finish_early(rec, snap)
        if pane and (force or snap.phase != self._pane_phase or now - self._pane_ns >= 1e9 / PANE_FPS):
            self._pane_phase, self._pane_ns = snap.phase, now
            steps = live_steps(live, now)  # a tool-using turn's steps so far
            self.pane.show_live(snap, rec.attempts, self.lag.summary(), steps)
            now_row = live_steps_timeline(steps, snap.own_delay_ms, snap.phase) if steps else None
            self.pane.set_timelines([*self.timelines, ("now", now_row or live_timeline(snap, rec.attempts))])

    # --- a tool-using turn (tui.chat.tools) --------------------------------------------
    async def on_step_began(self, event: StepBegan) -> None:
        with self._drawing():
            await self.steps.step_began(event)

    async def on_tool_ended(self, event: ToolEnded) -> None:
        with self._drawing():
            await self.steps.tool_ended(event)

    def on_approval_asked(self, event: ApprovalAsked) -> None:
        self.steps.approval_asked(event)

    def on_tool_notice(self, event: ToolNotice) -> None:
        self.notify(visible_controls(event.text), severity="warning", markup=False, timeout=10)

    def cancel_turn(self) -> bool:
        return self.turns.cancel()

    def focus_prompt(self) -> None:
        self.prompt.focus()

    # --- actions -------------------------------------------------------------------
    def action_cancel_turn(self) -> None:
        """Esc: the turn in flight stops (what arrived is kept); else an edit in progress ends, the draft
        it set aside back in the box. Never the box's text."""
        if self.turns.cancel():
            return
        if self.editing is not None:
            self.stop_editing()

    async def action_regenerate(self) -> None:
        submitted = self.clock()
        if self.busy:
            self.notify("A turn is in flight: Esc cancels it first.", severity="warning")
            return
        last = self.session.path[-1] if self.session.path else None
        if last is None:
            self.notify("Nothing to regenerate yet.")
            return
        files = self.session.files_sent_with(last.turn_index)
        refused = chat_attach.recheck(files, self.attach_target())
        if refused is not None:  # the model changed since: say so, and change nothing
            self.notify(visible_controls(f"Not regenerated: {refused}."), severity="error", markup=False)
            return
        if len(files) < len(last.attachments):  # a resumed turn's, or one that failed: no contents to resend
            n = len(last.attachments)
            self.notify(
                f"Regenerating without the {n} file{'s' if n != 1 else ''} the prompt was sent with (a log keeps "
                "no contents): /attach them and send the prompt to include them.",
                severity="warning",
                timeout=10,
            )
        await self.branch_from(last.turn_index)
        await self.send(last.prompt, submitted, files)

    # --- edit and resend: a new branch ----------------------------------------------------
    def editable_prompts(self) -> list[tuple[int, str]]:
        """(turn_index, first line) of each prompt on the chat's branch that can be edited and sent again."""
        out = []
        for r in self.session.path:
            first = next((ln for ln in r.prompt.split("\n") if ln.strip()), "")
            out.append((r.turn_index, visible_controls(first[:EDIT_TITLE_W])))
        return out

    def on_picked(self, event: Picked) -> None:
        event.stop()
        self.run_worker(self.action_edit_prompt(event.turn_index), group="edit")

    async def action_edit_prompt(self, turn_index: int) -> None:
        """Put prompt ``turn_index`` in the box to change and send again: the conversation from there
        becomes a new branch. What the box held is set aside, and back once the edit is sent or dropped."""
        rec = next((r for r in self.session.path if r.turn_index == turn_index), None)
        if rec is None:
            self.notify("That prompt is not on this branch of the chat any more.", severity="warning")
            return
        if self.editing is None:
            box = self.prompt
            self._stash = (box.value, dict(box.folds.texts))
        self.editing = turn_index
        self.prompt.load(rec.prompt)
        self.prompt.focus()
        bar = self.query_one("#edit-bar", Static)
        label = turn_label(turn_index, "prompt ")
        bar.update(
            Text.assemble(
                (f"✎ editing {label}", "bold"),
                " · Enter sends it as a new branch from there (the old one stays in the log) · Esc stops editing",
            )
        )
        bar.remove_class("-empty")

    def stop_editing(self) -> None:
        """The edit dropped: the draft set aside comes back. An edit already changed stays in the box
        (never lost), and the draft goes to the prompt history (Up brings it back), as the user is told."""
        turn, self.editing = self.editing, None
        self.query_one("#edit-bar", Static).add_class("-empty")
        stash, self._stash = self._stash, None
        if stash is None or not (stash[0] or stash[1]):
            return
        box = self.prompt
        before = next((r.prompt for r in self.session.path if r.turn_index == turn), None)
        if box.text_to_send.strip() and box.text_to_send != before:
            self.prompts.add(Folds(dict(stash[1])).expand(stash[0]))
            self.notify("Your edit stays in the box; the draft you had is in the history (↑).")
            return
        box.folds.texts.update(stash[1])
        box.value = stash[0]

    async def branch_from(self, turn_index: int) -> None:
        """The next turn replaces ``turn_index``: its context goes back to before it, and the transcript
        from there on makes room for the new branch (the old one stays in the log and the history)."""
        sent_edit = self.editing is not None
        if self.session.branch_at(turn_index) is None:
            return
        if await self.transcript.remove_from(turn_index):
            cut = next((k for k, (i, _) in enumerate(self._blocks) if i == turn_index), len(self._blocks))
            del self._blocks[cut:]
        else:  # older than the turns drawn: none of them stays on screen
            await self.transcript.remove_children()
            self._blocks = []
            label = turn_label(turn_index, "turn ")
            await self.transcript.add_note(
                f"a new branch from before {label}: the turns before it are in the log", "ok"
            )
        self.timelines = [(label, t) for label, t in self.timelines if not _is_after(label, turn_index)]
        if sent_edit:
            self.editing = None
            self.query_one("#edit-bar", Static).add_class("-empty")
            self.call_after_refresh(self._restore_stash)

    def _restore_stash(self) -> None:
        stash, self._stash = self._stash, None
        if stash is not None and (stash[0] or stash[1]) and not self.prompt.value:
            self.prompt.folds.texts.update(stash[1])
            self.prompt.value = stash[0]

    def show_branches(self) -> None:
        """The newest edit's two branches side by side in the pane (hidden while there is none)."""
        nodes = links({"turn_index": r.turn_index, "branch_of": r.branch_of} for r in self.session.records)
        pair = branch_pair(nodes, self._branch) if self._branch is not None else None
        if pair is None:
            self.pane.set_branches([], [])
            return
        by_index = {r.turn_index: r for r in self.session.records}
        old, new = ([by_index[i] for i in side if i in by_index] for side in pair)
        self.pane.set_branches(old, new)

    # --- code blocks --------------------------------------------------------------------
    def _next_block(self) -> int:
        """The number the next drawn answer's first code block gets."""
        return 1 + sum(len(b) for _, b in self._blocks)

    def numbered_blocks(self) -> list[tuple[int, CodeBlock]]:
        """Every code block of the answers in the transcript, numbered from 1 in the order drawn."""
        return list(enumerate((b for _, blocks in self._blocks for b in blocks), start=1))

    def code_block_titles(self) -> list[tuple[int, str]]:
        return [(n, b.describe()) for n, b in self.numbered_blocks()]

    def action_copy_code(self, number: int) -> None:
        blocks = dict(self.numbered_blocks())
        block = blocks.get(number)
        if block is None:
            self.notify(f"No code block {number}.", severity="warning")
            return
        self.copy_block(number, block)

    def copy_block(self, number: int | None, block: CodeBlock) -> None:
        self.app.copy_to_clipboard(block.code)  # OSC 52: the terminal's clipboard, over SSH too
        which = f"code block {number}" if number is not None else "the code block"
        self.notify(f"Copied {which} ({block.describe()}, {len(block.code)} characters).")

    def on_code_fence_copy_asked(self, event: CodeFence.CopyAsked) -> None:
        event.stop()
        self.prompt.focus()  # the click focused the block: typing goes on in the prompt
        exact = dict(self.numbered_blocks()).get(event.number) if event.number is not None else None
        self.copy_block(event.number, exact or event.block)  # the record's text, not the shown one

    # --- /attach ------------------------------------------------------------------------
    def attach_target(self) -> tuple[str, str] | None:
        return chat_attach.target_of(self.session.spec, self.session.base_url, self.session.backend)

    async def attach(self, args: str) -> None:
        done = chat_attach.attach(args, self.pending, self.attach_target())
        self.pending += done.added
        for sentence in done.refused:
            self.notify(visible_controls(f"/attach {sentence}"), severity="error", markup=False, timeout=10)
        if done.added:
            names = ", ".join(p.file.name for p in done.added)
            self.notify(visible_controls(f"Attached {names}: it goes with the next prompt."), markup=False)
        await self.show_pending()

    async def show_pending(self) -> None:
        await self.query_one(AttachmentTray).show([(p.file.name, p.file.size, p.file.media_type) for p in self.pending])
        self._schedule_draft()

    async def on_attachment_tray_removed(self, event: AttachmentTray.Removed) -> None:
        event.stop()
        await self.action_detach(event.index)

    async def action_detach(self, index: int) -> None:
        self.notify(chat_attach.detach(str(index + 1), self.pending))
        await self.show_pending()

    def attached_names(self) -> list[str]:
        return [p.file.name for p in self.pending]

    def action_attach_file(self) -> None:
        box = self.prompt
        if not box.value.strip():
            box.value = chat_attach.ATTACH + " "
        box.focus()
        self.notify("Type the file's path after /attach (Tab completes it), then Enter.")

    # --- history and drafts ----------------------------------------------------------------
    def action_search_history(self) -> None:
        from tui.screens.history_search import HistorySearch

        def picked(text: str | None) -> None:
            if text is not None:
                self.prompt.recall(text)
            self.prompt.focus()

        self.app.push_screen(HistorySearch(self.prompts), picked)

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        if event.text_area is self.prompt:
            self._schedule_draft()

    def _schedule_draft(self) -> None:
        if self._draft_timer is not None:
            self._draft_timer.stop()
        self._draft_timer = self.set_timer(DRAFT_SAVE_S, self._save_draft_aside)

    def save_draft(self) -> None:
        """What the box holds (folded pastes whole) and the attached files' paths, kept for ``--resume``;
        written before this returns (the chat closing, its terminal gone)."""
        self._write_draft(*self._take_draft())

    def _save_draft_aside(self) -> None:
        """The same, written on a thread: masking the secrets of a large paste (every URL of a pasted
        access log) takes a while, and typing goes on meanwhile."""
        taken = self._take_draft()
        self.run_worker(lambda: self._write_draft(*taken), thread=True, group="draft", exit_on_error=False)

    def _take_draft(self) -> tuple[int, str, drafts.Draft]:
        self._draft_taken += 1
        draft = drafts.Draft(self.prompt.text_to_send, tuple(p.path for p in self.pending))
        return self._draft_taken, self.session.log.session_id, draft

    def _write_draft(self, taken: int, session_id: str, draft: drafts.Draft) -> None:
        with self._draft_lock:  # one at a time, and never an older one after a newer
            if taken < self._draft_written:
                return
            self._draft_written = taken
            with contextlib.suppress(OSError, ValueError):  # the chat goes on; the box still holds it
                drafts.save(session_id, draft)

    async def restore_draft(self) -> None:
        """The draft left in this session (or, newest, in a chat quit before its first turn) back in the box."""
        sid = self.session.log.session_id
        draft = drafts.load(sid)
        if draft is None:
            try:
                since = self.session.log.path.stat().st_mtime
            except OSError:
                since = 0.0
            found = drafts.orphan(since)
            if found is None:
                return
            old_sid, draft = found
            drafts.drop(old_sid)
        if draft.text and not self.prompt.value:
            self.prompt.load(draft.text)
        if draft.attachments:
            await self.attach(" ".join(shlex.quote(p) for p in draft.attachments))
        masked = " Secrets in it were kept as *** (URL credentials, query values, keys): type them again." * (
            MASK in draft.text
        )
        self.notify(f"Your unsent prompt is back in the box.{masked}")

    async def action_new_chat(self) -> None:
        await self._leave_turn()
        with self._draft_lock:  # after a draft being written, and no older one written after it
            self._draft_taken += 1
            self._draft_written = self._draft_taken
            drafts.drop(self.session.log.session_id)  # the box's text goes with the new chat
        self.session.new_chat()
        self.chat_tools.new_chat()
        self.timelines, self.lag_by_turn = [], {}
        self._blocks, self._branch = [], None
        if self.editing is not None:
            self.stop_editing()
        self.pane.set_branches([], [])
        self._schedule_draft()
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
        from tui.screens.settings import engine_options

        reload = engine_options(settings) != engine_options(self.session.settings)
        self.session.settings = settings
        if spec and (spec != self.session.spec or base_url != self.session.base_url):
            self.session.switch_model(spec, base_url)
            self.warm_up()  # the new model's first use, too, while the user types
        elif reload:
            self.warm_up()  # a local model loads again where it is now asked to run, while the user types
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
        if self.editing is not None:
            self.stop_editing()
        path = self.session.path  # the branch the log ended on
        drawn = path[-RESUME_DRAWN:]
        self._branch = None
        self._blocks = [(r.turn_index, code_blocks(r.answer)) for r in path[: len(path) - len(drawn)]]
        for rec in drawn:
            await transcript.add_record(rec, self.clock, first_block=self._next_block())
            self._blocks.append((rec.turn_index, code_blocks(rec.answer)))
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
        opened = await compare_screen(self.session, specs, self.clock, self.prompts, self.tools)
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
        for rec in handoff.records:  # the pane's turns: another log's, so not this chat's to edit
            await self.transcript.add_record(rec, self.clock, editable=False, first_block=self._next_block())
            self._blocks.append((None, code_blocks(rec.answer)))
        self.update_header()

    # --- command palette -----------------------------------------------------------
    def system_commands(self) -> Iterable[SystemCommand]:
        """The chat's entries in the command palette (``tui.palette``)."""
        return chat_commands.palette(self, self.session.settings)


def _is_after(label: str, turn_index: int) -> bool:
    """Whether a timeline row's label (``turn_label``) names turn ``turn_index`` or a later one."""
    digits = label.lstrip("#").strip()
    return digits.isdigit() and int(digits) - 1 >= turn_index
