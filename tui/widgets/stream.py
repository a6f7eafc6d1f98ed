"""A streamed answer whose paints cost the same at its 100th line as at its first.

While an answer streams, its text is split in two:

- *settled* blocks: everything up to the last block boundary (a blank line, a closed code
  fence, a heading line). Each batch of settled blocks is rendered as Markdown once, in
  its own widget (code highlighted), and never touched again;
- the *open tail*: the block still growing. It is drawn as plain text by ``TailText``,
  which wraps incrementally: appending text re-wraps only its last line, and a repaint
  redraws only the lines that changed. It reserves a few paints' worth of blank lines
  below the text (growing costs a layout pass of the whole screen; a stream that adds
  several lines a paint gets the whole reserve at once), and it is never
  taller than the view: past that, it shows a window on the open block that moves up by
  half a view when the newest line reaches the bottom (like a pager), so the transcript
  does not scroll at every paint and most paints redraw only the lines that changed.
  Given a fixed room before its first token (``TailText.reserve``, the compare panes),
  it is that tall from the start and pages within it: its height never changes mid-stream.

So a paint never re-parses or re-wraps what is already on screen, whether the answer is
one 8000-character paragraph, a long code block or the fiftieth turn. The caller renders
the whole answer as Markdown once it has ended (the streamed split is only an
approximation: a list interrupted by a blank line may look different until then).
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import re
from collections.abc import Iterator

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual.containers import ScrollableContainer, Vertical
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Markdown

from ..format import visible_controls
from .code_blocks import CodeMarkdown

RESERVE_PAINTS = 4  # room for this many more paints at the current pace ...
RESERVE_MAX_LINES = 40  # ... but never more blank lines than this, nor than half the view, under the text
WINDOW_JUMP = 0.5  # a windowed tail that reaches the bottom moves up by this share of its height at once
_INLINE = re.compile(
    r"\*\*(?P<bold>[^*\s](?:[^*]*[^*\s])?)\*\*"
    r"|(?<![*\w])\*(?P<italic>[^*\s](?:[^*]*[^*\s])?)\*(?![*\w])"
    r"|`(?P<code>[^`]+)`"
)
_BOLD, _ITALIC, _CODE, _MARKER = Style(bold=True), Style(italic=True), Style(color="cyan"), Style(dim=True)
_WORD = re.compile(r"\S+\s*|\s+")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r" {0,3}#{1,6}(\s|$)")


def wrap_line(text: str, start: int, end: int, width: int) -> list[tuple[int, int]]:
    """Greedy word wrap of ``text[start:end]`` (no newline inside) into ``(start, end)`` spans of at most
    ``width`` cells (trailing spaces may overhang; they are not drawn). Words longer than a line are folded."""
    if start >= end:
        return [(start, start)]
    width = max(1, width)
    ascii_only = text.isascii()
    out: list[tuple[int, int]] = []
    line_start, col = start, 0
    for m in _WORD.finditer(text, start, end):
        w_s, w_e = m.span()
        word = text[w_s:w_e]
        bare = word.rstrip()
        n = len(bare) if ascii_only else cell_len(bare)
        if col and col + n > width:
            out.append((line_start, w_s))
            line_start, col = w_s, 0
        while n > width:  # a word longer than the line: fold it
            cut = w_s + width if ascii_only else _fold_at(text, w_s, width)
            out.append((line_start, cut))
            line_start = w_s = cut
            bare = text[w_s:w_e].rstrip()
            n = len(bare) if ascii_only else cell_len(bare)
            col = 0
            word = text[w_s:w_e]  # what is left of the word after the fold
        col += len(word) if ascii_only else cell_len(word)
    out.append((line_start, end))
    return out


def _fold_at(text: str, start: int, width: int) -> int:
    used, i = 0, start
    while i < len(text):
        w = cell_len(text[i])
        if used + w > width and i > start:
            break
        used += w
        i += 1
    return i


def inline_segments(line: str, style: Style) -> list[Segment]:
    """A light touch of Markdown for the open block: **bold**, *italic* and `code` spans that
    start and end on this line are styled, their markers dropped (the full render follows)."""
    if "*" not in line and "`" not in line:
        return [Segment(line, style)]
    out: list[Segment] = []
    pos = 0
    for m in _INLINE.finditer(line):
        if m.start() > pos:
            out.append(Segment(line[pos : m.start()], style))
        bold, italic, code = m.group("bold"), m.group("italic"), m.group("code")
        if bold is not None:
            out.append(Segment(bold, style + _BOLD))
        elif italic is not None:
            out.append(Segment(italic, style + _ITALIC))
        else:
            out.append(Segment(code, style + _CODE))
        pos = m.end()
    out.append(Segment(line[pos:], style))
    return out


class TailText(Widget):
    """Plain text that grows at its end, wrapped incrementally and drawn line by line (Textual's Line API)."""

    DEFAULT_CSS = """
    TailText {
        height: auto;
        padding: 0 1;
    }
    """

    def __init__(self, *, classes: str | None = None) -> None:
        super().__init__(classes=f"{classes or ''} -empty".strip())
        self.text = ""
        self._lines: list[tuple[int, int]] = []  # display lines as spans of self.text
        self._width = 0
        self._strips: dict[int, Strip] = {}
        # Growing by a line costs two layout passes of the whole screen (Textual re-lays out a widget
        # whose size changed); when text keeps coming, reserve room for a few paints' worth of lines.
        self._reserved = 0
        self._growing = False
        self._style: Style | None = None
        self._room = 0  # a fixed height set before any text (``reserve``); 0: grow with the text
        self._top = 0  # the first line shown (> 0 once the open block is taller than the view)
        self._fences: list[int] = []  # offsets of complete code-fence lines (``` or ~~~) in self.text
        self._scanned = 0  # self.text[:_scanned] is complete lines, already looked at for fences

    # --- text ------------------------------------------------------------------------
    def reserve(self, lines: int) -> None:
        """Give the open block a fixed room of ``lines`` lines, laid out now, before any text: it fills
        that room and then pages within it, so its height never changes while it streams (each change
        is a layout pass of the whole screen). Below 1, the block grows with its text as usual."""
        self._room = max(0, lines)
        self.set_class(not self.text and not self._room, "-empty")
        self.refresh(layout=True)

    def append(self, fragment: str) -> None:
        if not fragment:
            return
        self.text += fragment
        self._scan_fences()
        if not self._width:  # not laid out yet: wrapped on the first layout
            self.remove_class("-empty")
            self.refresh(layout=True)
            return
        first = max(0, len(self._lines) - 1)  # greedy wrapping: only the last line can change
        self._rewrap(first)

    def drop_prefix(self, n: int) -> None:
        """Forget the first ``n`` characters (they now show elsewhere)."""
        if n <= 0:
            return
        self.text = self.text[n:]
        self._fences = [f - n for f in self._fences if f >= n]
        self._scanned = max(0, self._scanned - n)
        if self._width:
            self._rewrap(0)

    def _scan_fences(self) -> None:
        text = self.text
        while (nl := text.find("\n", self._scanned)) >= 0:
            if _FENCE.match(text, self._scanned, nl):
                self._fences.append(self._scanned)
            self._scanned = nl + 1

    def clear(self) -> None:
        self.drop_prefix(len(self.text))

    def _rewrap(self, first: int, *, refresh: bool = True) -> None:
        before = len(self._lines)
        start = self._lines[first][0] if first < len(self._lines) else 0
        del self._lines[first:]
        if first == 0:  # new text from the start (resized, or a block moved out): the window too
            self._top = 0
        for k in [k for k in self._strips if k >= first]:
            del self._strips[k]
        text, end = self.text, len(self.text.rstrip("\n"))  # no empty last line while a line is only begun
        pos = start
        while pos <= end and end > 0:
            nl = text.find("\n", pos, end)
            stop = end if nl < 0 else nl
            self._lines += wrap_line(text, pos, stop, self._width)
            if nl < 0:
                break
            pos = nl + 1
        self.set_class(not self._lines and not self._room, "-empty")
        n = len(self._lines)
        if n < before or not refresh:
            self._reserved = n
        if not refresh:
            return
        if n > self._reserved:
            grown = n - before
            extra = 0
            if grown > 1:  # a fast stream (lines a paint): room for the rest of the reserve at once
                extra = self._reserve_cap()
            elif grown > 0 and self._growing:
                extra = min(self._reserve_cap(), grown * RESERVE_PAINTS)
            self._growing = grown > 0
            self._reserved = n + extra
        if self._height() != self.size.height:
            self.refresh(layout=True)
            return
        top = self._top
        if n > self.size.height and (self._place_window() != top or first < top):
            self.refresh()  # windowed, and the window moved: every shown line
            return
        changed = max(n, before) - first  # the lines rewrapped, and those that are gone (now blank)
        if changed > 0:
            pad = self.styles.padding.top
            self.refresh(Region(0, pad + first - self._top, self.outer_size.width, changed))

    def _view_height(self) -> int:
        """The height of the scrolling view this text is in (0 while unknown)."""
        views = (a for a in self.ancestors if isinstance(a, ScrollableContainer))
        return next((a.scrollable_content_region.height for a in views), 0)

    def _reserve_cap(self) -> int:
        return min(RESERVE_MAX_LINES, self._view_height() // 2)

    def _height(self) -> int:
        """The room if one was reserved; else lines of text plus the reserve, but never taller than the
        view: beyond that, a window on the last lines."""
        if self._room:
            return self._room
        n = max(len(self._lines), self._reserved)
        view = self._view_height()
        return min(n, view) if view > 0 else n

    def _place_window(self) -> int:
        """The first line shown. Past the view's height the text scrolls like a pager: when the last
        line would fall below the bottom, the window moves up by ``WINDOW_JUMP`` of its height at
        once, so most paints redraw only the lines that changed, not every shown line."""
        n, h = len(self._lines), self.size.height
        if n <= h or h <= 0:
            self._top = 0
        elif n > self._top + h or self._top >= n:
            self._top = min(n - 1, n - h + int(h * WINDOW_JUMP))
        return self._top

    @property
    def first_shown(self) -> int:
        """Index of the line drawn at the top (> 0 when the open block is taller than the view)."""
        return self._place_window()

    # --- Textual ---------------------------------------------------------------------
    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        if width != self._width:
            self._width = width
            self._strips.clear()
            self._rewrap(0, refresh=False)  # called by the layout pass itself: no second pass
        return self._height()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()
        self._style = None

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        i = self.first_shown + y
        strip = self._strips.get(i)
        if strip is None or strip.cell_length != width:
            style = self._style
            if style is None:  # rich_style walks every ancestor: once per style change, not once per line
                style = self._style = self.rich_style
            if i < len(self._lines):
                strip = Strip(self._segments(i, style)).adjust_cell_length(width, style)
            else:
                strip = Strip.blank(width, style)
            self._strips[i] = strip
        return strip

    def _segments(self, i: int, style: Style) -> list[Segment]:
        """Display line ``i``, lightly styled by the source line it belongs to: a code fence's marker
        lines dimmed and its body as code, a heading bold, inline spans elsewhere."""
        s, e = self._lines[i]
        text = self.text
        line = text[s:e].rstrip()
        start = text.rfind("\n", 0, s) + 1  # the source line this display line wraps
        k = bisect.bisect_right(self._fences, start)
        if k and self._fences[k - 1] == start:
            return [Segment(line, style + _MARKER)]
        if k % 2:  # after an opening fence and before its closing one
            return [Segment(line, style + _CODE)]
        if _HEADING.match(text, start):
            return [Segment(line, style + _BOLD)]
        return inline_segments(line, style)


class BlockSplitter:
    """Finds where the settled blocks end in streamed Markdown; each complete line is scanned once."""

    def __init__(self) -> None:
        self.text = ""
        self._scan = 0  # first character of the first line not scanned yet
        self._fence: str | None = None  # the open fence's marker
        self.settled = 0  # text[:settled] is complete blocks

    def feed(self, fragment: str) -> None:
        self.text += fragment
        text = self.text
        while True:
            nl = text.find("\n", self._scan)
            if nl < 0:
                return
            line, line_start = text[self._scan : nl], self._scan
            self._scan = nl + 1
            if self._fence is not None:
                stripped = line.strip()
                if stripped.startswith(self._fence) and not stripped.strip(self._fence[0]):
                    self._fence = None
                    self.settled = self._scan
                continue
            fence = _FENCE.match(line)
            if fence:
                self._fence = fence.group(1)
                self.settled = line_start  # a fence ends the paragraph before it
            elif not line.strip() or _HEADING.match(line):  # a blank line or a heading ends a block
                self.settled = self._scan


class StreamingMarkdown(Vertical):
    """Settled blocks as Markdown widgets (rendered once each) above the open tail as ``TailText``."""

    DEFAULT_CSS = """
    StreamingMarkdown {
        height: auto;
    }
    """

    def __init__(self, *, classes: str | None = None, settle: bool = True) -> None:
        super().__init__(classes=classes)
        # settle=False: the whole answer stays in the tail until the final render (no widget is
        # mounted mid-stream, so nothing is laid out again while it streams: the compare panes).
        self.settle = settle
        self.splitter = BlockSplitter()
        self.tail = TailText(classes="answer-tail")
        self._rendered = 0  # text[:_rendered] is in Markdown segments (and no longer in the tail)
        self._settle_task: asyncio.Task[None] | None = None

    def compose(self) -> Iterator[Widget]:
        yield self.tail

    @property
    def segments(self) -> list[Markdown]:
        return [w for w in self.children if isinstance(w, Markdown)]

    def feed(self, fragment: str) -> None:
        """New text: on screen in the tail at the next refresh; complete blocks move to Markdown in the background.

        Its control characters are made visible here, once per fragment: the tail, the blocks and
        their Markdown only ever hold the shown text, and a repaint never scans it again. A tab
        becomes 4 spaces (as Markdown reads it): painted as is, it would move the cursor.
        """
        fragment = visible_controls(fragment).replace("\t", "    ")
        self.tail.append(fragment)
        if not self.settle:
            return
        self.splitter.feed(fragment)
        if self.splitter.settled > self._rendered and self._settle_task is None and self.is_attached:
            self._settle_task = asyncio.create_task(self._settle())

    async def _settle(self) -> None:
        try:
            while self.splitter.settled > self._rendered and self.is_attached:
                start, end = self._rendered, self.splitter.settled
                md = CodeMarkdown(self.splitter.text[start:end], classes="answer-segment")
                await self.mount(md, before=self.tail)  # parsed and rendered by the time this returns
                with self.app.batch_update():  # the block leaves the tail in the frame it shows as Markdown
                    self.tail.drop_prefix(end - start)
                    self._rendered = end
        finally:
            self._settle_task = None

    async def stop(self) -> None:
        """Wait for a settle in progress (before the final full render replaces everything)."""
        task = self._settle_task
        if task is not None:
            with contextlib.suppress(Exception):  # the full render follows anyway
                await task
