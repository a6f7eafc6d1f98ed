"""The conversation: user messages, streamed Markdown answers with a reasoning block, notes, error cards."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Collapsible, Markdown, Static

from telemetry.recorder import Snapshot, TurnRecorder
from telemetry.render import RenderLag
from tui.format import fmt_ms
from tui.widgets.error_card import ErrorCard
from tui.widgets.stream import StreamingMarkdown

REASONING_TAIL_CHARS = 480  # while thinking streams, only its tail is shown
PAINT_PACING = 0.5  # after a paint that took X, wait X/2 before the next (painting at most 2/3 of the UI thread)


class UserMessage(Static):
    def __init__(self, text: str) -> None:
        super().__init__(Text(text), classes="user-message")


class NoteMessage(Static):
    """A one-line system note (export paths, cancelled, settings changed)."""

    def __init__(self, text: str, kind: str = "info") -> None:
        super().__init__(Text(text), classes=f"note note-{kind}")


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
    next waits X * PAINT_PACING. When a paint is on screen, the arrival stamp of the oldest
    chunk it showed goes into ``RenderLag``. ``finalize`` renders the whole answer as Markdown.
    """

    def __init__(self, clock: Callable[[], int], lag: RenderLag | None = None) -> None:
        super().__init__(classes="assistant-message -live")
        self.clock = clock
        self.lag = lag if lag is not None else RenderLag()
        self.reasoning = ReasoningBlock()
        self.reasoning.display = False
        self.stream = StreamingMarkdown(classes="answer-stream")
        self.answer = Markdown("", classes="answer")
        self.answer.display = False
        self._reasoning_text = ""
        self._r_idx = self._t_idx = 0
        self._seen_chunks = 0
        self._pending: list[str] = []
        self._pending_batches: list[tuple[int, int]] = []  # (oldest arrival ns, chunk count) awaiting paint
        self._painting = False
        self._next_paint_ns = 0
        self.final = False

    def compose(self):  # type: ignore[override]
        yield self.reasoning
        yield self.stream
        yield self.answer

    # --- live ----------------------------------------------------------------------
    def pump(self, recorder: TurnRecorder, snap: Snapshot) -> None:
        if self.final:
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
            self._reasoning_text = (self._reasoning_text + "".join(r_parts))[-REASONING_TAIL_CHARS * 2 :]
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
            # Pace painting to at most 1 / (1 + PAINT_PACING) of the UI thread's time.
            self._next_paint_ns = done + int((done - started) * PAINT_PACING)
            self._painting = False

        self.call_after_refresh(painted)

    # --- the end -------------------------------------------------------------------
    async def finalize(self, record: dict[str, Any]) -> None:
        """Full render of the answer, reasoning folded to one line, an error card if it failed."""
        self.final = True
        self.remove_class("-live")
        await self.stream.stop()
        unpainted, self._pending_batches = self._pending_batches, []
        answer = record.get("answer") or ""
        await self.answer.update(answer)
        with self.app.batch_update():  # the full render replaces the streamed one in a single frame
            self.answer.display = bool(answer)
            self.stream.display = False
        await self.stream.remove()
        if unpainted:  # text that arrived while painting was paced: on screen with the full render

            def painted() -> None:
                self.lag.add(unpainted[0][0], self.clock(), 0)

            self.call_after_refresh(painted)
        self.show_reasoning_summary(record)

    def show_reasoning_summary(self, record: dict[str, Any]) -> None:
        reasoning = record.get("reasoning") or ""
        m = record.get("metrics") or {}
        n = (record.get("tokens") or {}).get("reasoning")
        if not reasoning and not n:
            self.reasoning.display = False
            return
        delay = m.get("reasoning_delay_ms")
        est = " (estimated)" if m.get("reasoning_delay_estimated") else ""
        title = f"thought for {fmt_ms(delay)}{est}" if delay is not None else "thought"
        if n:
            title += f", {n} tokens"
        if not reasoning:
            title += " (hidden by the provider)"
        self.reasoning.display = True
        self.reasoning.title = title
        self.reasoning.body.update(Text(reasoning or "The provider did not return the reasoning text.", style="dim"))
        self.reasoning.collapsed = True


class Transcript(VerticalScroll):
    """Scrolls with the newest message while the user has not scrolled away."""

    def on_mount(self) -> None:
        self.anchor()

    async def add_user(self, text: str) -> UserMessage:
        w = UserMessage(text)
        await self.mount(w)
        return w

    async def add_assistant(self, clock: Callable[[], int], lag: RenderLag | None = None) -> AssistantMessage:
        w = AssistantMessage(clock, lag)
        await self.mount(w)
        return w

    async def add_note(self, text: str, kind: str = "info") -> NoteMessage:
        w = NoteMessage(text, kind)
        await self.mount(w)
        return w

    async def add_error(self, record: dict[str, Any]) -> ErrorCard:
        w = ErrorCard(record)
        await self.mount(w)
        return w

    async def add_record(self, record: dict[str, Any], clock: Callable[[], int]) -> None:
        """A finished (e.g. resumed) turn, drawn as if it had just ended."""
        await self.add_user(record.get("prompt") or "")
        msg = await self.add_assistant(clock)
        await msg.finalize(record)
        await self.add_outcome(record)

    async def add_outcome(self, record: dict[str, Any]) -> None:
        if record.get("status") == "error":
            await self.add_error(record)
        elif record.get("status") == "cancelled":
            kept = "the partial answer is kept" if record.get("answer") else "nothing had arrived"
            total = (record.get("metrics") or {}).get("total_ms")
            await self.add_note(f"■ cancelled after {fmt_ms(total)}; {kept}", "warn")
