"""ChatScreen: the chat with its live telemetry pane, and everything the chat holds.

One idea, the chat on screen: its layout (header, transcript, prompt, telemetry pane, footer), its
keys and palette entries, and its state (the ``ChatSession``, the turn in flight, the finished turns'
timelines and render lag, the files attached to the next prompt, the prompt being edited).
Attributes down, messages up: the prompt box says ``PromptBox.Submitted`` (:mod:`tui.chat.prompt`),
a prompt in the transcript ``Picked`` (edit it and send it again: a new branch), a code block's
header ``CodeFence.CopyAsked``, the turn driver ``TurnStarted``, ``TurnFinished`` or ``TurnFailed``
(:mod:`tui.chat.turn`), and the handlers here call the widgets' methods. What the handlers route
to, one idea each: the key bindings and palette table (:mod:`tui.chat.commands`), the slash
commands typed in the box (:mod:`tui.chat.slash`), the turn painted (:mod:`tui.chat.paint`), the
files for the next prompt (:mod:`tui.chat.attach`, which says ``AttachmentsChanged``), edit-and-resend
and regenerate (:mod:`tui.chat.branches`), the code blocks' numbers (:mod:`tui.chat.blocks`), the
draft kept for ``--resume`` (:mod:`tui.chat.drafts`), export and reopening a session
(:mod:`tui.chat.sessions`), the compare screen over the chat (:mod:`tui.chat.compare`, which says
``HandedBack``) and a tool-using turn's steps and dialogs (:mod:`tui.chat.tools`).

What is typed is never lost: it stays in the box until a turn takes it, Esc cancels a turn and
never the draft, an edit sets the draft aside and gives it back, and the draft is kept on disk.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult, CSSPathType, SystemCommand
from textual.binding import BindingType
from textual.containers import Container, Vertical
from textual.screen import Screen
from textual.widgets import Footer, Static, TextArea

from ...backends.attachments import Attachment
from ...telemetry.log.prompt_history import PromptHistory
from ...telemetry.settings import PROMPT_LOOKUP, TurnSettings
from ..format import fmt_settings, short_spec, visible_controls
from ..runner import LiveTurn, collect_between_turns
from ..session import ChatSession
from ..target import TargetView, describe_target
from ..terminal import visible_text
from ..tool_servers import ToolServers
from ..widgets.attachments import AttachmentTray
from ..widgets.code_blocks import CodeBlock, CodeFence
from ..widgets.prompt_box import PromptBox
from ..widgets.telemetry_pane import TelemetryPane
from ..widgets.transcript import Picked, Transcript
from . import attach as chat_attach
from . import commands as chat_commands
from . import slash
from .attach import Attachments, AttachmentsChanged, Pending
from .blocks import DrawnBlocks
from .branches import Branches
from .compare import HandedBack, Launcher, take_over
from .drafts import ChatDrafts
from .drawn import DrawnTurns
from .paint import TurnPainter
from .prompt import ChatPrompt
from .sessions import RESUME_DRAWN, Reopened, export_session, reopen
from .tools import ApprovalAsked, ChatTools, StepBegan, ToolEnded, ToolNotice, ToolSteps
from .turn import ChatTurns, TurnFailed, TurnFinished, TurnStarted

if TYPE_CHECKING:
    from ..compare.output import ChatHandoff

EFFORTS = (None, "minimal", "low", "medium", "high")
SETTLE_S = 0.5  # after a resumed session is drawn, before its earlier context is read (the screen settles)


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
        self.blocks = DrawnBlocks()  # the transcript's code blocks, numbered
        self.session = session
        self.clock = clock
        self.fps = fps
        self.resume_path = resume
        self.warm_up_at_start = warm_up
        self.turns = ChatTurns(session, self)
        self.tools = tools if tools is not None else ToolServers()  # the MCP servers (--mcp), started on mount
        self.chat_tools = ChatTools(self.tools, self)  # their tools offered to the model (tui.chat.tools)
        self.turns.agent = self.chat_tools.agent
        self.drawn = DrawnTurns()  # what the painters keep of the turns they drew; the screen reads it
        self.steps = ToolSteps(self, self.drawn, cancel=self.turns.cancel, focus_prompt=self._box.focus)
        self.attachments = Attachments(self, self.attach_target)  # the files for the next prompt (/attach)
        self.branches = Branches(self)  # edit and resend, regenerate: a new branch
        self.drafts = ChatDrafts(self, self._box, session, self.attachments)  # the box kept on disk
        self.launcher = Launcher(self, session, clock, self.prompts, self.tools)  # the comparison over the chat
        self.last_export: list[Path] = []
        self.painter = TurnPainter(self, self.drawn)  # the turn on screen, drawn from the driver's messages

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

    @property
    def edit_bar(self) -> Static:
        return self.query_one("#edit-bar", Static)

    @property
    def pending(self) -> list[Pending]:
        """The files for the next prompt."""
        return self.attachments.pending

    @property
    def editing(self) -> int | None:
        """The turn whose prompt the box holds to send again (a new branch), if any."""
        return self.branches.editing

    async def on_mount(self) -> None:
        self.painter.mounted(self.fps)
        self.update_header()
        self.prompt.focus()
        if self.prompts.error:
            self.notify(visible_controls(self.prompts.error), severity="warning", markup=False)
        if self.resume_path is not None:
            await self.load_session(self.resume_path)
            self.drafts.restore()
        else:
            await self.transcript.show_greeting(self.target())
        self.warm_up()
        self.tools.begin(self, self.session.runner)

    async def on_unmount(self) -> None:
        self.turns.cancel()  # logged with what arrived, as cancelled
        self.drafts.save()
        await self.tools.close(self.session.runner)
        await self.session.close_backend()

    def action_tools(self) -> None:
        from ..screens.tools import ToolsScreen

        self.app.push_screen(ToolsScreen(self.tools.views))

    def warm_up(self) -> None:
        """The backend's start and first use, in the background: the first turn then goes out as fast as
        any later one (its own delay, Enter -> send, holds no process start and no SDK's first use)."""
        if self.warm_up_at_start:
            self.run_worker(self.session.warm_up(), group="warm-up", exit_on_error=False)

    def target(self) -> TargetView:
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
        return self.painter.on_screen

    @property
    def busy(self) -> bool:
        """From Enter until the finished turn's figures are shown: a new prompt waits."""
        return self.turns.busy or self.painter.on_screen is not None

    async def on_prompt_box_submitted(self, event: PromptBox.Submitted) -> None:
        """Enter in the prompt box: a slash command, or the prompt (with any attached files) sent.

        The text leaves the box only when it goes: one that cannot go now (a turn in flight, a file
        the model cannot take) stays, and the user is told why."""
        event.stop()
        command = slash.parse(event.text)
        if command is not None and (command.while_busy or not self.busy):
            self.prompt.take()
            await self.run_command(command)
            return
        if self.busy:
            self.notify("A turn is in flight: Esc cancels it (your prompt stays here).", severity="warning")
            return  # the text stays in the prompt
        refused = self.attachments.refused()
        if refused is not None:
            self.notify(visible_controls(f"Not sent: {refused}. /detach N removes it."), severity="error", markup=False)
            return
        text = self.prompt.take()
        files = self.attachments.take()
        if self.editing is not None:
            await self.branches.branch_from(self.editing)
        await self.send(text, event.submitted_ns, files)

    async def run_command(self, command: slash.Command) -> None:
        """A slash command typed in the box (:mod:`tui.chat.slash`), carried out."""
        match command:
            case slash.Attach(args):
                self.attachments.attach(args)
            case slash.Detach(args):
                self.attachments.detach(args)
            case slash.Tools():
                self.action_tools()
            case slash.Compare(spec):
                await self.action_compare(spec)

    async def send(
        self, prompt: str, submitted_ns: int | None = None, attachments: tuple[Attachment, ...] = ()
    ) -> None:
        """Start a turn; returns once its request is on its way (``TurnStarted`` draws it, ``TurnFinished``
        its end). ``submitted_ns``: the user's Enter (default: now); ttft's own delay runs from it."""
        self.pane.show_message(f"starting {self.session.spec}…")
        await self.turns.start(prompt, self.clock() if submitted_ns is None else submitted_ns, attachments)

    def put_back(self, prompt: str) -> None:
        """A turn that could not start: its prompt and files back where they were typed, unless the
        user has typed on meanwhile (the transcript shows the prompt with the error either way)."""
        if not self.prompt.value.strip():
            self.prompt.load(prompt)
        self.attachments.put_back()

    # The turn driver's messages (tui.chat.turn), painted (tui.chat.paint).
    async def on_turn_failed(self, event: TurnFailed) -> None:
        await self.painter.failed(event)

    async def on_turn_started(self, event: TurnStarted) -> None:
        await self.painter.started(event)

    async def on_turn_finished(self, event: TurnFinished) -> None:
        await self.painter.finished(event)

    def frame(self, force: bool = False, pane: bool = True) -> None:
        """One frame of the turn in flight (:meth:`tui.chat.paint.TurnPainter.frame`)."""
        self.painter.frame(force, pane)

    # --- a tool-using turn (tui.chat.tools) --------------------------------------------
    async def on_step_began(self, event: StepBegan) -> None:
        with self.painter.drawing():
            await self.steps.step_began(event)

    async def on_tool_ended(self, event: ToolEnded) -> None:
        with self.painter.drawing():
            await self.steps.tool_ended(event)

    def on_approval_asked(self, event: ApprovalAsked) -> None:
        self.steps.approval_asked(event)

    def on_tool_notice(self, event: ToolNotice) -> None:
        self.notify(visible_controls(event.text), severity="warning", markup=False, timeout=10)

    # --- actions -------------------------------------------------------------------
    def action_cancel_turn(self) -> None:
        """Esc: the turn in flight stops (what arrived is kept); else an edit in progress ends, the draft
        it set aside back in the box. Never the box's text."""
        if self.turns.cancel():
            return
        if self.editing is not None:
            self.branches.stop_editing()

    async def action_regenerate(self) -> None:
        submitted = self.clock()
        if self.busy:
            self.notify("A turn is in flight: Esc cancels it first.", severity="warning")
            return
        again = self.branches.again()
        if again is not None:
            await self.branches.branch_from(again.turn_index)
            await self.send(again.prompt, submitted, again.files)

    # --- edit and resend: a new branch (tui.chat.branches) ----------------------------------
    def on_picked(self, event: Picked) -> None:
        event.stop()
        self.run_worker(self.action_edit_prompt(event.turn_index), group="edit")

    async def action_edit_prompt(self, turn_index: int) -> None:
        self.branches.edit(turn_index)

    def forget_from(self, turn_index: int, *, drawn: bool) -> None:
        """A new branch replaces ``turn_index``: its code blocks (all of them, when the turns before it
        are not ``drawn`` either) and timeline rows, and those after it, go."""
        if drawn:
            self.blocks.cut_from(turn_index)
        else:
            self.blocks.clear()
        self.drawn.cut_from(turn_index)

    # --- code blocks --------------------------------------------------------------------
    def action_copy_code(self, number: int) -> None:
        block = self.blocks.get(number)
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
        exact = self.blocks.get(event.number) if event.number is not None else None
        self.copy_block(event.number, exact or event.block)  # the record's text, not the shown one

    # --- /attach ------------------------------------------------------------------------
    def attach_target(self) -> tuple[str, str] | None:
        return chat_attach.target_of(self.session.spec, self.session.base_url, self.session.backend)

    async def on_attachments_changed(self, event: AttachmentsChanged) -> None:
        event.stop()
        await self.query_one(AttachmentTray).show([(p.file.name, p.file.size, p.file.media_type) for p in self.pending])
        self.drafts.schedule()

    async def on_attachment_tray_removed(self, event: AttachmentTray.Removed) -> None:
        event.stop()
        await self.action_detach(event.index)

    async def action_detach(self, index: int) -> None:
        self.attachments.detach(str(index + 1))

    def action_attach_file(self) -> None:
        box = self.prompt
        if not box.value.strip():
            box.value = chat_attach.ATTACH + " "
        box.focus()
        self.notify("Type the file's path after /attach (Tab completes it), then Enter.")

    # --- history and drafts ----------------------------------------------------------------
    def action_search_history(self) -> None:
        from ..screens.history_search import HistorySearch

        def picked(text: str | None) -> None:
            if text is not None:
                self.prompt.recall(text)
            self.prompt.focus()

        self.app.push_screen(HistorySearch(self.prompts), picked)

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        if event.text_area is self.prompt:
            self.drafts.schedule()

    async def action_new_chat(self) -> None:
        await self._leave_turn()
        self.drafts.drop()
        self.session.new_chat()
        self.chat_tools.new_chat()
        self.drawn.reset()
        self.blocks.clear()
        self.branches.reset()
        self.pane.set_branches([], [])
        self.drafts.schedule()
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
        self.painter.stop()
        self.painter.forget()

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
        from ..screens.settings import engine_options

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
        from ..screens.settings import SettingsScreen

        def done(result: tuple[str, str | None, TurnSettings] | None) -> None:
            if result is not None:
                spec, base_url, settings = result
                self.apply_settings(settings, spec, base_url)

        self.app.push_screen(
            SettingsScreen(self.session.spec, self.session.base_url, self.session.settings, focus=focus), done
        )

    def action_sessions(self) -> None:
        from ..screens.sessions import SessionsScreen

        def done(path: Path | None) -> None:
            if path is not None:
                self.run_worker(self.load_session(path), group="load")

        self.app.push_screen(SessionsScreen(current=self.session.log.session_id), done)

    def action_help(self) -> None:
        from ..screens.help import HelpScreen

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
        # The earlier context is read once the screen has settled: a year's log read in a thread
        # meanwhile took the interpreter from the drawing (the next turn starts the read if not begun).
        self.set_timer(SETTLE_S, self.session.read_earlier)

    async def show_reopened(self, reopened: Reopened) -> None:
        transcript = self.transcript
        await transcript.remove_children()
        self.branches.reset()
        path = self.session.path  # the branch the log ended on
        drawn = path[-RESUME_DRAWN:]
        self.blocks.clear()
        for r in path[: len(path) - len(drawn)]:  # numbered, not drawn
            self.blocks.add(r.turn_index, r.answer)
        for rec in drawn:
            await transcript.add_record(rec, self.clock, first_block=self.blocks.next_number())
            self.blocks.add(rec.turn_index, rec.answer)
        await transcript.compact()
        self.drawn.reset(reopened.records)
        self.pane.set_timelines(self.drawn.timelines)
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
        await self.launcher.launch(spec)

    async def on_handed_back(self, event: HandedBack) -> None:
        event.stop()
        await self.continue_from(event.handoff)

    async def continue_from(self, handoff: ChatHandoff) -> None:
        """The chat goes on with a compare pane: its model, its conversation, its turns drawn."""
        note = take_over(self.session, handoff)
        self.warm_up()
        await self.transcript.hide_greeting()
        await self.transcript.add_note(note, "ok")
        for rec in handoff.records:  # the pane's turns: another log's, so not this chat's to edit
            await self.transcript.add_record(rec, self.clock, editable=False, first_block=self.blocks.next_number())
            self.blocks.add(None, rec.answer)
        self.update_header()

    # --- command palette -----------------------------------------------------------
    def system_commands(self) -> Iterable[SystemCommand]:
        """The chat's entries in the command palette (``tui.palette``)."""
        return chat_commands.palette(
            self,
            self.session.settings,
            prompts=self.branches.editable_prompts(),
            blocks=self.blocks.titles(),
            files=self.attachments.names(),
        )
