"""The streamed answer: incremental wrapping, block settling, the full render at the end, long chats compacted."""

from __future__ import annotations

import random
import time
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len
from textual.app import App, ComposeResult
from textual.widgets import Markdown
from textual.widgets._markdown import MarkdownFence
from ttft.tui.chat.app import ChatApp
from ttft.tui.widgets.stream import BlockSplitter, StreamingMarkdown, TailText, wrap_line
from ttft.tui.widgets.transcript import KEEP_FULL_TURNS, AssistantMessage, CompactTurn, Transcript, UserMessage

from tests.support.tui_support import SequenceBackend, factory_for, finished, script, wait_until


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path))
    return tmp_path


def wrapped(text: str, width: int) -> list[str]:
    return [text[s:e].rstrip() for s, e in wrap_line(text, 0, len(text), width)]


def test_wrap_line_is_greedy_and_folds_long_words() -> None:
    assert wrapped("aaa bbb ccc dd", 7) == ["aaa bbb", "ccc dd"]
    assert wrapped("abcdefghij xy", 4) == ["abcd", "efgh", "ij", "xy"]
    assert wrapped("", 5) == [""]
    assert all(cell_len(x) <= 4 for x in wrapped("日本語のテキスト", 4))
    assert "".join(wrapped("日本語のテキスト", 4)) == "日本語のテキスト"


@settings(max_examples=60, deadline=None)
@given(
    words=st.lists(st.text(alphabet="abcdefghij é", min_size=0, max_size=14), min_size=1, max_size=40),
    width=st.integers(3, 30),
    seed=st.integers(0, 1000),
)
def test_incremental_wrap_equals_wrapping_everything_at_once(words: list[str], width: int, seed: int) -> None:
    """Appending in arbitrary pieces gives exactly the lines a full wrap gives (only the last line re-wraps)."""
    text = " ".join(words)
    tail = TailText()
    tail._width = width
    rng = random.Random(seed)
    i = 0
    while i < len(text):
        j = min(len(text), i + rng.randint(1, 9))
        tail.text += text[i:j]
        tail._rewrap(max(0, len(tail._lines) - 1), refresh=False)
        i = j
    full = TailText()
    full._width = width
    full.text = text
    full._rewrap(0, refresh=False)
    assert tail._lines == full._lines
    assert all(cell_len(text[s:e].rstrip()) <= width for s, e in tail._lines)


def test_block_splitter_settles_complete_blocks_only() -> None:
    sp = BlockSplitter()
    sp.feed("First para")
    assert sp.settled == 0
    sp.feed("graph.\n\nSecond")
    assert sp.text[: sp.settled] == "First paragraph.\n\n"
    sp.feed(" one\n```python\nx = 1\n\ny = 2\n")  # a blank line inside a fence does not settle it
    assert sp.text[: sp.settled] == "First paragraph.\n\nSecond one\n"
    sp.feed("```\n# Heading\nmore")
    assert sp.text[: sp.settled].endswith("y = 2\n```\n# Heading\n")


class StreamApp(App[None]):
    def compose(self) -> ComposeResult:
        yield StreamingMarkdown()


async def test_settled_blocks_become_markdown_once_and_the_tail_stays_small() -> None:
    app = StreamApp()
    async with app.run_test(size=(60, 30)) as pilot:
        sm = app.query_one(StreamingMarkdown)
        sm.feed("Intro **bold** text.\n\n```python\nprint('hi')\n")
        await pilot.pause(0.2)
        assert [m.source for m in sm.segments] == ["Intro **bold** text.\n\n"]
        assert sm.tail.text == "```python\nprint('hi')\n"  # the open fence: plain text for now
        first = sm.segments[0]
        sm.feed("```\n\nTail words")
        await pilot.pause(0.2)
        assert sm.segments[0] is first  # rendered once, never touched again
        assert len(sm.segments[1].query(MarkdownFence)) == 1  # a closed fence is highlighted at once
        assert sm.tail.text == "Tail words"


async def test_final_render_replaces_the_stream_with_full_markdown() -> None:
    answer = "Some text\n\n```python\ndef f():\n    return 1\n```\n\n- a\n- b\n"
    events = finished([*script(visible=0), _text(answer)])
    app = ChatApp("fake:x", factory=factory_for(SequenceBackend([events])))
    async with app.run_test(size=(100, 30)) as pilot:
        app.query_one("#prompt").value = "code please"
        await pilot.press("enter")
        await wait_until(pilot, lambda: len(app.chat.session.records) == 1 and not app.chat.busy)
        msg = app.query_one(AssistantMessage)
        assert not msg.query(StreamingMarkdown)  # the streamed view is gone
        assert msg.answer.display and msg.answer.source == answer
        assert len(msg.answer.query(MarkdownFence)) == 1  # code highlighted after the final render


def _text(text: str):  # type: ignore[no-untyped-def]
    from ttft.telemetry import events as ev

    from tests.support.tui_support import MS, T0

    return ev.TextDelta(T0 + 500 * MS, text)


async def test_a_paint_stays_cheap_in_a_long_answer() -> None:
    """Feeding the 200th line of an open paragraph costs about what the 2nd did (no re-wrap of the rest)."""
    app = StreamApp()
    async with app.run_test(size=(80, 30)) as pilot:
        sm = app.query_one(StreamingMarkdown)
        sm.feed("w ")
        await pilot.pause(0.05)

        def feed_cost(n: int) -> float:
            t0 = time.perf_counter()
            for _ in range(n):
                sm.feed("word " * 4)
            return (time.perf_counter() - t0) / n

        early = feed_cost(20)
        for _ in range(200):
            sm.feed("word " * 20)  # ~ 200 more lines
        late = feed_cost(20)
        assert len(sm.tail._lines) > 200
        assert late < early * 5 + 0.0005, (early, late)


class ScrollStreamApp(App[None]):
    def compose(self) -> ComposeResult:
        with Transcript():
            yield StreamingMarkdown()


async def test_an_open_block_taller_than_the_view_pages_up_by_half_a_view() -> None:
    """Past the view's height the newest line stays on screen, and the window moves in jumps
    (so most paints redraw only the lines that changed), not at every new line."""
    app = ScrollStreamApp()
    async with app.run_test(size=(40, 12)) as pilot:
        sm = app.query_one(StreamingMarkdown)
        tail = sm.tail
        tops: list[int] = []
        for i in range(40):
            sm.feed(f"line {i}\n")
            await pilot.pause(0.02)
            n, h, top = len(tail._lines), tail.size.height, tail.first_shown
            assert top <= n - 1 < top + h, (n, h, top)  # the newest line is on screen ...
            assert f"line {i}" in tail.render_line(n - 1 - top).text  # ... drawn where it belongs
            tops.append(top)
        h = tail.size.height
        assert tops[-1] > 0 and h >= 4
        moves = sum(a != b for a, b in pairwise(tops))
        assert moves <= 40 // (h // 2) + 1, (h, tops)


async def test_long_chat_keeps_a_bounded_number_of_widgets() -> None:
    answer = "Para one.\n\n- item\n- item\n\n```python\nx = 1\n```\n"
    turn = finished([*script(visible=0), _text(answer)])
    app = ChatApp("fake:x", factory=factory_for(SequenceBackend([turn])))
    async with app.run_test(size=(100, 30)) as pilot:
        counts = []
        for i in range(12):
            app.query_one("#prompt").value = f"q{i}"
            await pilot.press("enter")
            await wait_until(pilot, lambda n=i: len(app.chat.session.records) == n + 1 and not app.chat.busy)
            counts.append(len(list(app.query_one(Transcript).walk_children())))
        compact = app.query(CompactTurn)
        # every turn but the last KEEP_FULL_TURNS (+ the one just sent) is one widget
        assert len(compact) == 12 - KEEP_FULL_TURNS - 1
        per_turn_late = counts[-1] - counts[-2]
        assert per_turn_late <= 2, counts  # a new turn adds about one widget, not one per Markdown block
        assert [u.prompt for u in app.query(UserMessage)][-1] == "q11"
        # a compacted turn shows its prompt and answer, and a click shows it in full again
        first = compact.first()
        assert first.prompt == "q0" and first.record.answer == answer
        await first.on_click()
        await pilot.pause(0.1)
        assert next(u.prompt for u in app.query(UserMessage)) == "q0"
        full = app.query(AssistantMessage).first()
        assert isinstance(full.answer, Markdown) and full.answer.source == answer


def test_open_block_gets_a_light_touch_of_markdown() -> None:
    from rich.style import Style
    from ttft.tui.widgets.stream import inline_segments

    segs = inline_segments("a **bold** and *it* and `code`, 2 * 3 * 4", Style())
    assert "".join(s.text for s in segs) == "a bold and it and code, 2 * 3 * 4"  # markers dropped, arithmetic kept
    styled = {s.text: s.style for s in segs}
    assert styled["bold"].bold and styled["it"].italic and styled["code"].color is not None
    assert [s.text for s in inline_segments("**not closed yet", Style())] == ["**not closed yet"]


class TailApp(App[None]):
    def compose(self) -> ComposeResult:
        with Transcript():
            yield TailText()


async def test_an_open_block_that_keeps_every_block_shows_fences_and_headings() -> None:
    """Without settling (the compare panes), code and headings stay recognisable until the full render."""
    app = TailApp()
    async with app.run_test(size=(60, 20)) as pilot:
        tail = app.query_one(TailText)
        for piece in ["# Title\n", "text with `x`\n", "```py\n", "a = 1\n", "  b = 2\n", "```\n", "after\n", "~~~"]:
            tail.append(piece)
        await pilot.pause()
        lines = {tail.render_line(y).text.rstrip(): tail.render_line(y) for y in range(len(tail._lines))}

        def style(text: str):  # type: ignore[no-untyped-def]
            return next(seg.style for seg in lines[text] if seg.text.strip())

        assert style("# Title").bold
        assert style("```py").dim and style("```").dim  # the fence markers, dimmed
        assert style("a = 1").color is not None and style("  b = 2").color == style("a = 1").color  # code
        assert style("after") == style("text with x") != style("a = 1")  # after the closing fence: plain again
        assert not style("~~~").dim  # a marker line counts once complete (its newline arrived)
        # Moving a settled prefix out keeps the styling right for what stays.
        tail.drop_prefix(len("# Title\ntext with `x`\n"))
        await pilot.pause()
        assert tail.render_line(0).text.startswith("```py") and tail._fences == [0, len("```py\na = 1\n  b = 2\n")]


async def test_a_reserved_room_keeps_its_height_and_repaints_lines_that_go() -> None:
    app = TailApp()
    async with app.run_test(size=(40, 20)) as pilot:
        tail = app.query_one(TailText)
        tail.reserve(8)
        await pilot.pause()
        assert tail.size.height == 8 and not tail.has_class("-empty")  # laid out before any text
        heights = set()
        for i in range(30):
            tail.append(f"line {i}\n")
            await pilot.pause(0.01)
            heights.add(tail.size.height)
        assert heights == {8} and tail.first_shown > 0  # paged within the room
        repainted = []
        original = tail.refresh

        def spy(*regions, **kw):  # type: ignore[no-untyped-def]
            repainted.extend(regions)
            return original(*regions, **kw)

        tail.refresh = spy  # type: ignore[method-assignment]
        tail.drop_prefix(len("".join(f"line {i}\n" for i in range(27))))  # 3 lines left of 30
        assert len(tail._lines) == 3
        # The room does not shrink, so no layout pass repaints it: the lines now blank must be repainted.
        assert any(r.y <= 0 and r.bottom >= 8 for r in repainted), repainted
        await pilot.pause()
        assert [tail.render_line(y).text.strip() for y in range(8)] == ["line 27", "line 28", "line 29"] + [""] * 5
