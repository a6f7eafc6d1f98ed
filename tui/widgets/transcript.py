"""The conversation: user messages, streamed Markdown answers with a reasoning block and tool calls, notes,
error cards.

A finished turn is drawn from its typed ``TurnRecord``, whether it just ended or was read back from a
session log (typed where the log is read, ``tui.session``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rich.console import Group
from rich.markdown import Markdown as RichMarkdown
from rich.panel import Panel
from rich.syntax import Syntax
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.events import Click
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Collapsible, Static

from ...telemetry import json_guard
from ...telemetry.duration import fmt_ms
from ...telemetry.json_guard import JsonRefused
from ...telemetry.log.secrets import mask
from ...telemetry.record import TurnRecord
from ...telemetry.recorder import Snapshot, TurnRecorder
from ...telemetry.view.render import RenderLag
from ..format import kept_after_cancel, visible_controls
from ..target import TargetView
from .code_blocks import CodeMarkdown
from .error_card import ErrorCard
from .greeting import Greeting
from .stream import StreamingMarkdown
from .tool_steps import ToolRun, logged_results

KEEP_FULL_TURNS = 2  # the last turns stay full widgets; older ones are drawn as one widget each
CODE_THEME = "monokai"
REASONING_TAIL_CHARS = 480  # while thinking streams, only its tail is shown
PAINT_PACING = 0.5  # after a paint that took X, wait X/2 before the next (painting at most 2/3 of the UI thread)
# ... and start paints at most at this rate: a paint's compositor pass costs about the same for one token as
# for a hundred, so at thousands of tokens/s painting as soon as the last paint was on screen (60 a second)
# cost the UI thread a third more CPU per token, for ~14 ms less render lag at the median (issue 33).
PAINT_FPS = 30


def reasoning_title(record: TurnRecord) -> str | None:
    """ "thought for 4.2 s, 312 tokens", or None when the turn did not reason."""
    reasoning = record.reasoning
    n = record.tokens.reasoning
    if not reasoning and not n:
        return None
    delay = record.metrics.reasoning_delay_ms
    est = " (estimated)" if record.metrics.reasoning_delay_estimated else ""
    title = f"thought for {fmt_ms(delay)}{est}" if delay is not None else "thought"
    if n:
        title += f", {n} tokens"
    if not reasoning:
        title += " (hidden by the provider)"
    return title


class Picked(Message):
    """A click on a prompt: the chat offers to edit it and send it again (a new branch)."""

    def __init__(self, turn_index: int, prompt: str) -> None:
        super().__init__()
        self.turn_index = turn_index
        self.prompt = prompt


def _prompt_text(text: str, files: tuple[str, ...]) -> Text:
    shown = Text(visible_controls(text))
    if files:
        shown.append("\n" + " · ".join(f"▣ {visible_controls(f)}" for f in files), style="dim")
    return shown


class UserMessage(Static):
    """A prompt as sent. ``turn_index``: its turn in the session's log (None: not this log's, e.g. a
    compare pane's); a click on such a prompt asks to edit it (``Picked``)."""

    def __init__(self, text: str, turn_index: int | None = None, files: tuple[str, ...] = ()) -> None:
        super().__init__(_prompt_text(text, files), classes="user-message")
        self.prompt = text  # as typed: it is sent again on regenerate
        self.turn_index = turn_index
        self.files = files

    def on_click(self, event: Click) -> None:
        if self.turn_index is not None:
            event.stop()
            self.post_message(Picked(self.turn_index, self.prompt))


class NoteMessage(Static):
    """A one-line system note (export paths, cancelled, settings changed)."""

    def __init__(self, text: str, kind: str = "info", *, outcome: bool = False) -> None:
        super().__init__(Text(visible_controls(text)), classes=f"note note-{kind}")
        self.outcome = outcome  # says how a turn ended (part of that turn when it is compacted)


TOOL_ARGS_SHOWN = 2_000  # characters of arguments shown when they cannot be indented; the record keeps all
TOOL_ARGS_PRETTY_BYTES = 256 * 1024  # larger arguments are shown as sent: indenting and colouring MBs stalls a paint


def shown_arguments(arguments: str, *, pretty: bool = True) -> tuple[str, str | None]:
    """A call's arguments as a person reads them, and a notice when they are not all shown as they are.

    JSON is indented (``pretty``) when the guard reads it (``telemetry.json_guard``); anything else is
    shown exactly as streamed (a call still arriving, a model's broken JSON), its first
    ``TOOL_ARGS_SHOWN`` characters when longer. JSON nested past the guard's depth or larger than
    ``TOOL_ARGS_PRETTY_BYTES`` is said in the notice, never a traceback; the record keeps it whole.
    """
    notice: str | None = None
    if pretty and arguments.strip():
        try:
            value = json_guard.loads(arguments, "the arguments", max_bytes=TOOL_ARGS_PRETTY_BYTES)
            return json.dumps(value, indent=2, ensure_ascii=False), None
        except JsonRefused as exc:
            if exc.reason != "not_json":
                notice = f"{exc}: shown as sent"
    if len(arguments) > TOOL_ARGS_SHOWN:
        fold = f"the first {TOOL_ARGS_SHOWN:,} of {len(arguments):,} characters shown; the log keeps them all"
        notice = f"{notice}, {fold}" if notice else fold
        arguments = arguments[:TOOL_ARGS_SHOWN] + " …"
    return arguments, notice


def tool_arguments(arguments: str, *, pretty: bool = True) -> str:
    """A call's arguments as shown (:func:`shown_arguments`), without its notice."""
    return shown_arguments(arguments, pretty=pretty)[0]


def tool_calls_view(
    calls: Sequence[Mapping[str, str]],
    stop_reason: str | None,
    *,
    final: bool,
    results: Sequence[Any | None] | None = None,
) -> Group:
    """Each tool call the model asked for as a block of the answer (its name, then its arguments),
    and, once the turn has ended, why the answer stopped (``finish_reason: tool_calls``, Anthropic's
    ``tool_use``): the answer to a tool-only turn is these calls, not an empty message. ``results``:
    what each call gave back, drawn under it (a logged tool-using turn's, ``tui.widgets.tool_steps``).

    While the turn streams (``final`` False) the arguments show as they arrive; at the end, as
    indented JSON. The record keeps them exact; everything shown here is made visible first.
    """
    parts: list[Any] = []
    for i, call in enumerate(calls, 1):
        name = visible_controls(call.get("name") or "") or "(no name)"
        text, notice = shown_arguments(call.get("arguments") or "", pretty=final)
        args = visible_controls(text)
        title = Text.assemble(
            ("⚙ tool call", "bold"), (f" {i}" if len(calls) > 1 else "", "bold"), ": ", (name, "bold cyan")
        )
        body: Any = Text(args or "(no arguments)", style="" if args else "dim italic")
        if final and args and notice is None:
            body = Syntax(args, "json", theme=CODE_THEME, background_color="default", word_wrap=True)
        if notice is not None:  # below the arguments: the chat follows an answer's end, where it is seen
            body = Group(body, Text(f"⚠ {visible_controls(notice)}", style="yellow"))
        parts.append(Panel(body, title=title, title_align="left", border_style="cyan", padding=(0, 1)))
        if results is not None and i - 1 < len(results) and results[i - 1] is not None:
            parts.append(results[i - 1])
    if final and stop_reason:
        parts.append(Text(f"finish_reason: {visible_controls(stop_reason)}", style="dim"))
    return Group(*parts)


class ToolCalls(Static):
    """The tool calls of one answer (:func:`tool_calls_view`), drawn below its text."""

    DEFAULT_CSS = """
    ToolCalls {
        height: auto;
        padding: 0 1;
        margin: 0 0 1 0;
    }
    """

    def __init__(self) -> None:
        super().__init__("", classes="tool-calls")
        self.display = False

    def show(
        self,
        calls: Sequence[Mapping[str, str]],
        stop_reason: str | None = None,
        *,
        final: bool,
        results: Sequence[Any | None] | None = None,
    ) -> None:
        self.display = bool(calls)
        if calls:
            self.update(tool_calls_view(calls, stop_reason, final=final, results=results))


class ReasoningBlock(Collapsible):
    def __init__(self) -> None:
        self.body = Static("", classes="reasoning-text")
        super().__init__(self.body, title="thinking…", collapsed=False, classes="reasoning")


class AssistantMessage(Vertical):
    """One answer. While live, ``pump`` pulls new text from the recorder each frame and paints it.

    The streamed text goes into a ``StreamingMarkdown`` (complete blocks rendered as Markdown
    once, the open block as incrementally wrapped plain text), so a paint costs the same
    whatever the answer's length. One paint is in flight at a time: text arriving meanwhile
    waits for the next, and after a paint that took X (from the change to the screen) the
    next waits X * PAINT_PACING, and (chained) starts no sooner than 1 / PAINT_FPS after
    the last one started. When a paint is on screen, the arrival stamp of the oldest chunk it showed
    goes into ``RenderLag``. ``finalize`` renders the whole answer as Markdown.
    """

    def __init__(
        self, clock: Callable[[], int], lag: RenderLag | None = None, *, chain: bool = True, settle: bool = True
    ) -> None:
        super().__init__(classes="assistant-message -live")
        self.clock = clock
        # chain: paint again as soon as pacing allows (one answer on screen); without, paint on the
        # caller's frame ticks only, so several answers (compare panes) share each screen update.
        # settle: complete blocks become Markdown while streaming (see StreamingMarkdown).
        self.chain = chain
        self.lag = lag if lag is not None else RenderLag()
        self.reasoning = ReasoningBlock()
        self.reasoning.display = False
        self.stream = StreamingMarkdown(classes="answer-stream", settle=settle)
        self.answer = CodeMarkdown("", classes="answer")
        self.first_block = 1  # the number of this answer's first code block in the transcript
        self.answer.display = False
        self.tools = ToolCalls()
        self._tool_pieces = 0
        self._reasoning_text = ""
        self._r_idx = self._t_idx = 0
        self._seen_chunks = 0
        self._pending: list[str] = []
        self._pending_batches: list[tuple[int, int]] = []  # (oldest arrival ns, chunk count) awaiting paint
        self._painting = False
        self._next_paint_ns = 0
        self.final = False
        self.record: TurnRecord | None = None
        # The whole turn's record: this answer's own, or, for the last step of a tool-using turn, the
        # joined one (its steps), which a compacted turn draws.
        self.turn: TurnRecord | None = None
        self._early: asyncio.Future[None] | None = None  # the full render begun when the stream ended
        self._drawn: str | None = None  # the text the full render shows

    def compose(self) -> ComposeResult:
        yield self.reasoning
        yield self.stream
        yield self.answer
        yield self.tools

    # --- live ----------------------------------------------------------------------
    def pump(self, recorder: TurnRecorder, snap: Snapshot) -> None:
        if self.final or self._early is not None:
            return
        n = snap.chunk_count
        if n > self._seen_chunks:
            self._collect(recorder, snap, n)
        if self._pending_batches and not self._painting and time.monotonic_ns() >= self._next_paint_ns:
            self._paint(recorder)

    def _collect(self, recorder: TurnRecorder, snap: Snapshot, n: int) -> None:
        oldest_ns = recorder.chunks[self._seen_chunks].t_ns
        self._seen_chunks = n
        r_parts = recorder.reasoning_parts(self._r_idx)
        if r_parts:
            self._r_idx += len(r_parts)
            shown = visible_controls("".join(r_parts))  # once per new part, not per repaint of the tail
            self._reasoning_text = (self._reasoning_text + shown)[-REASONING_TAIL_CHARS * 2 :]
            self.reasoning.display = True
            self.reasoning.body.update(Text("…" + self._reasoning_text[-REASONING_TAIL_CHARS:], style="dim italic"))
        if snap.reasoning_tokens:
            label = "thinking" if snap.phase == "reasoning" else "thought"
            self.reasoning.title = f"{label} · {snap.reasoning_tokens} tokens"
        t_parts = recorder.text_parts(self._t_idx)
        if t_parts:
            self._t_idx += len(t_parts)
            self._pending.append("".join(t_parts))
            if snap.phase == "streaming" and not self.reasoning.collapsed and self.reasoning.display:
                self.reasoning.collapsed = True
        if recorder.tool_pieces != self._tool_pieces:  # a tool call began or grew
            self._tool_pieces = recorder.tool_pieces
            self.tools.show(recorder.tool_calls, final=False)
            if not self.reasoning.collapsed and self.reasoning.display:
                self.reasoning.collapsed = True
        self._pending_batches.append((oldest_ns, n))

    def _paint(self, recorder: TurnRecorder) -> None:
        fragment = "".join(self._pending)
        self._pending.clear()
        batches, self._pending_batches = self._pending_batches, []
        started = time.monotonic_ns()
        self._painting = True
        self.stream.feed(fragment)

        def painted() -> None:
            now = self.clock()
            backlog = max(0, len(recorder.chunks) - batches[-1][1])
            done = time.monotonic_ns()
            self.lag.add(batches[0][0], now, backlog, paint_ms=(done - started) / 1e6)
            # Pace painting to at most 1 / (1 + PAINT_PACING) of the UI thread's time, and a chain to PAINT_FPS
            # (unchained, the caller's frame ticks pace it: a floor of one tick would skip every other one) ...
            self._next_paint_ns = done + int((done - started) * PAINT_PACING)
            if self.chain:
                self._next_paint_ns = max(self._next_paint_ns, started + 1_000_000_000 // PAINT_FPS)
            pause = (self._next_paint_ns - done) / 1e9
            self._painting = False
            if self.chain:  # ... and paint again as soon as that allows, not at the next frame tick.
                self.set_timer(
                    pause, lambda: None if self.final else self.pump(recorder, recorder.snapshot(self.clock()))
                )

        self.call_after_refresh(painted)

    # --- the end -------------------------------------------------------------------
    def finish_early(self, recorder: TurnRecorder, snap: Snapshot) -> None:
        """The stream has ended well, its text whole: the full render starts now, while the stream thread
        makes and logs the turn's record (tens of ms), and ``finalize`` then only checks that it drew the
        record's text. Once only; an answer that failed or was cancelled waits for its record."""
        if self.final or self._early is not None:
            return
        if snap.chunk_count > self._seen_chunks:
            self._collect(recorder, snap, snap.chunk_count)  # every chunk counted for the render lag
        self._early = asyncio.ensure_future(self._render_full(recorder.answer))

    async def _render_full(self, answer: str) -> None:
        """The whole answer as Markdown in place of the streamed one, in one frame."""
        self.remove_class("-live")
        await self.stream.stop()
        unpainted, self._pending_batches = self._pending_batches, []
        await self.answer.update(visible_controls(answer))  # the record keeps the exact text
        self.answer.number_blocks(self.first_block)
        with self.app.batch_update():  # the full render replaces the streamed one in a single frame
            self.answer.display = bool(answer)
            self.stream.display = False
        self._drawn = answer
        # The streamed widgets go after that frame: removing them now is one more layout pass before it.
        self.call_after_refresh(self._drop_stream)
        if unpainted:  # text that arrived while painting was paced: on screen with the full render

            def painted() -> None:
                self.lag.add(unpainted[0][0], self.clock(), 0)

            self.call_after_refresh(painted)

    async def finalize(self, record: TurnRecord, first_block: int | None = None) -> None:
        """Full render of the answer (unless it is drawn already), reasoning folded to one line.
        ``first_block``: the number of its first code block in the transcript (default: as set)."""
        self.final = True
        self.record = record
        early, self._early = self._early, None
        if early is not None:
            with contextlib.suppress(Exception):  # drawn again below if it did not finish
                await early
        if first_block is not None and first_block != self.first_block:
            self.first_block = first_block
            self.answer.number_blocks(first_block)
        if self.turn is None:
            self.turn = record
        if self._drawn != record.answer:
            await self._render_full(record.answer)
        results = logged_results(record.steps, len(record.tool_calls)) if record.steps else None
        self.tools.show(record.tool_calls, record.stop_reason, final=True, results=results)
        self.show_reasoning_summary(record)

    def _drop_stream(self) -> None:
        if self.stream.is_attached:
            self.stream.remove()

    def show_reasoning_summary(self, record: TurnRecord) -> None:
        reasoning = record.reasoning
        title = reasoning_title(record)
        if title is None:
            self.reasoning.display = False
            return
        self.reasoning.display = True
        self.reasoning.title = title
        shown = visible_controls(reasoning) or "The provider did not return the reasoning text."
        self.reasoning.body.update(Text(shown, style="dim"))
        self.reasoning.collapsed = True


class CompactTurn(Static):
    """A finished turn in one widget: the prompt, the reasoning summary, the answer (Rich Markdown,
    code highlighted) and how it ended. Clicking it shows the turn in full again."""

    def __init__(self, prompt: str, record: TurnRecord, first_block: int = 1, *, editable: bool = True) -> None:
        self.prompt = prompt
        self.record = record
        self.first_block = first_block
        self.editable = editable
        super().__init__(self._content(prompt, record), classes="compact-turn")

    @staticmethod
    def _content(prompt: str, rec: TurnRecord) -> Group:
        parts: list[Any] = [Text.assemble(("▌ ", "bold blue"), (visible_controls(prompt), "bold"))]
        reasoning = reasoning_title(rec)
        if reasoning:
            parts.append(Text(f"▶ {reasoning}", style="dim"))
        if rec.answer:
            parts.append(RichMarkdown(visible_controls(rec.answer), code_theme=CODE_THEME))
        if rec.tool_calls:
            results = logged_results(rec.steps, len(rec.tool_calls)) if rec.steps else None
            parts.append(tool_calls_view(rec.tool_calls, rec.stop_reason, final=True, results=results))
        if rec.status == "error":
            err = rec.error
            code = f" · HTTP {err.status_code}" if err is not None and err.status_code else ""
            msg = visible_controls(mask(err.message) if err is not None else "").strip().splitlines()
            kind = (err.type if err is not None else None) or "error"
            parts.append(Text(f"✗ {kind}{code}: {msg[0] if msg else ''}", style="red"))
        elif rec.status == "cancelled":
            kept = kept_after_cancel(rec)
            parts.append(Text(f"■ cancelled; {kept}", style="yellow"))
        return Group(*parts)

    async def on_click(self) -> None:
        transcript = self.parent
        if not isinstance(transcript, Transcript):
            return
        with self.app.batch_update():
            index = self.record.turn_index if self.editable else None
            user = UserMessage(self.prompt, index, tuple(a.name for a in self.record.attachments))
            await transcript.mount(user, before=self)
            msg = AssistantMessage(lambda: 0)
            await transcript.mount(msg, before=self)
            await msg.finalize(self.record, self.first_block)
            if self.record.status == "error":
                await transcript.mount(ErrorCard.of(self.record), before=self)
            await self.remove()


class Transcript(VerticalScroll):
    """Scrolls with the newest message while the user has not scrolled away."""

    _greeting: Greeting | None = None

    def on_mount(self) -> None:
        self.anchor()

    # --- the empty chat's greeting ---------------------------------------------------------
    @property
    def greeting(self) -> Greeting | None:
        g = self._greeting
        return g if g is not None and g.is_attached else None  # remove_children() may have taken it

    async def show_greeting(self, target: TargetView) -> None:
        """The greeting, first in the transcript (updated in place if it is there already)."""
        if (g := self.greeting) is not None:
            g.set_target(target)
            return
        self._greeting = Greeting(target)
        if self.children:
            await self.mount(self._greeting, before=self.children[0])
        else:
            await self.mount(self._greeting)

    async def hide_greeting(self) -> None:
        if (g := self.greeting) is not None:
            await g.remove()
        self._greeting = None

    async def add_user(self, text: str, turn_index: int | None = None, files: tuple[str, ...] = ()) -> UserMessage:
        w = UserMessage(text, turn_index, files)
        await self.mount(w)
        return w

    async def add_assistant(self, clock: Callable[[], int], lag: RenderLag | None = None) -> AssistantMessage:
        w = AssistantMessage(clock, lag)
        await self.mount(w)
        return w

    async def add_note(self, text: str, kind: str = "info", *, outcome: bool = False) -> NoteMessage:
        w = NoteMessage(text, kind, outcome=outcome)
        await self.mount(w)
        return w

    async def add_error(self, card: ErrorCard) -> ErrorCard:
        await self.mount(card)
        return card

    async def add_record(
        self, record: TurnRecord, clock: Callable[[], int], *, editable: bool = True, first_block: int = 1
    ) -> None:
        """A finished turn (a resumed session's, a compare pane's handed over), drawn as if it had just
        ended. ``editable``: a turn of this chat's log, whose prompt a click may edit."""
        files = tuple(a.name for a in record.attachments)
        await self.add_user(record.prompt, record.turn_index if editable else None, files)
        msg = await self.add_assistant(clock)
        await msg.finalize(record, first_block)
        await self.add_outcome(record)

    async def remove_from(self, turn_index: int) -> bool:
        """Take turn ``turn_index`` and everything drawn after it off the transcript (an edited prompt's
        new branch follows); False when that turn is not drawn."""
        children = list(self.children)
        start = next(
            (
                k
                for k, w in enumerate(children)
                if (isinstance(w, UserMessage) and w.turn_index == turn_index)
                or (isinstance(w, CompactTurn) and w.editable and w.record.turn_index == turn_index)
            ),
            None,
        )
        if start is None:
            return False
        await self.remove_children(children[start:])
        return True

    async def add_outcome(self, record: TurnRecord) -> None:
        if record.status == "error":
            await self.add_error(ErrorCard.of(record))
        elif record.status == "cancelled":
            kept = kept_after_cancel(record)
            total = record.metrics.total_ms
            await self.add_note(f"■ cancelled after {fmt_ms(total)}; {kept}", "warn", outcome=True)

    # --- long conversations ------------------------------------------------------------
    def turns(self) -> list[list[Widget]]:
        """The widgets of each turn: its prompt, then its answer and how it ended."""
        groups: list[list[Widget]] = []
        current: list[Widget] | None = None
        for w in self.children:
            if isinstance(w, UserMessage):
                current = [w]
                groups.append(current)
            elif current is not None and (
                isinstance(w, AssistantMessage | ErrorCard | ToolRun)
                or w.has_class("pane-turn")
                or (isinstance(w, NoteMessage) and w.outcome)
            ):
                current.append(w)
            else:
                current = None  # a note between turns stays as it is
        return groups

    async def compact(self, keep: int = KEEP_FULL_TURNS) -> int:
        """Draw every finished turn but the last ``keep`` as one widget (``CompactTurn``).

        A Markdown answer is a widget per block (per list item, per code block), and every
        layout pass visits every widget: without this, each paint of a streamed answer
        would cost more the longer the conversation. Returns how many turns were compacted.
        """
        done = 0
        groups = self.turns()
        for group in groups[: max(0, len(groups) - keep)]:
            messages = [
                m for w in group for m in ([w] if isinstance(w, AssistantMessage) else w.query(AssistantMessage))
            ]
            # One answer, or a tool-using turn's steps whose last holds the joined record.
            turn = messages[-1].turn if messages and (len(messages) == 1 or messages[-1].turn) else None
            if turn is None or (len(messages) > 1 and not turn.steps):
                continue
            user = group[0]
            assert isinstance(user, UserMessage)
            first = messages[0].first_block
            compact = CompactTurn(user.prompt, turn, first, editable=user.turn_index is not None)
            with self.app.batch_update():
                await self.mount(compact, before=user)
                await self.remove_children(group)
            done += 1
        return done
