"""The prompt box: Enter sends, three keys make a new line, a paste keeps every character (folded when
long, sent whole), the box grows to a third of the screen, and Up/Down walk the history."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest
from textual import events
from textual.app import App, ComposeResult
from textual.binding import BindingType
from textual.widgets import Static
from ttft.telemetry.log.prompt_history import PromptHistory
from ttft.tui.widgets.pastes import FOLD_LINES, MAX_LINE, Folds, kept_folded, normalize
from ttft.tui.widgets.prompt_box import PromptBox

from tests.support.tui_support import heard, said

PASTE = "def f(x):\r\n\treturn x  # tab\r\n\r\n\r\nnon-ASCII: ünï 漢字 🙂\rlast line\r\n"
EXACT = "def f(x):\n\treturn x  # tab\n\n\nnon-ASCII: ünï 漢字 🙂\nlast line\n"


class BoxApp(App[None]):
    CSS = "Static { height: 1fr; }"

    def __init__(self, history: PromptHistory | None = None) -> None:
        super().__init__()
        self.sent: list[str] = []
        self.history = history

    def compose(self) -> ComposeResult:
        yield Static("transcript")
        yield PromptBox(lambda: 7, placeholder="type here", prompts=self.history, id="p")

    @property
    def box(self) -> PromptBox:
        return self.query_one(PromptBox)

    def on_prompt_box_submitted(self, event: PromptBox.Submitted) -> None:
        assert event.submitted_ns == 7
        self.sent.append(event.box.take())


async def paste(pilot, box: PromptBox, text: str) -> None:  # type: ignore[no-untyped-def]
    box.post_message(events.Paste(text))
    await pilot.pause()


async def test_enter_sends_and_ctrl_j_alt_enter_shift_enter_make_new_lines() -> None:
    app = BoxApp()
    async with app.run_test(size=(80, 30)) as pilot:
        await pilot.press("a", "ctrl+j", "b", "alt+enter", "c", "shift+enter", "d")
        assert app.box.value == "a\nb\nc\nd" and app.sent == []
        await pilot.press("enter")
        assert app.sent == ["a\nb\nc\nd"] and app.box.value == ""
        await pilot.press("space", "enter")  # blank: nothing is sent
        assert app.sent == ["a\nb\nc\nd"]


async def test_a_paste_keeps_every_character_and_crlf_becomes_lf() -> None:
    app = BoxApp()
    async with app.run_test(size=(80, 30)) as pilot:
        await pilot.press("x", "space")
        await paste(pilot, app.box, PASTE)
        assert app.box.value == "x " + EXACT
        await pilot.press("enter")
        assert app.sent == ["x " + EXACT]


async def test_a_long_paste_is_folded_as_one_piece_and_sent_whole() -> None:
    long = "".join(f"line {i}\t{'é' * (i % 3)}\r\n" for i in range(200))
    app = BoxApp()
    async with app.run_test(size=(80, 30)) as pilot:
        await pilot.press("s", "e", "e", ":", "space")
        await paste(pilot, app.box, long)
        value = app.box.value
        assert value.startswith("see: [pasted 200 lines, ") and value.endswith(": ctrl+e to expand]")
        assert "KB" in value and app.box.document.line_count == 1
        assert app.box.text_to_send == "see: " + normalize(long)
        await pilot.press("left", "left", "a")  # typing inside the marker goes after it
        assert app.box.value.endswith("expand]a")
        await pilot.press("backspace", "backspace")  # a deletion that reaches into it takes it whole
        assert app.box.value == "see: "
        await pilot.press("ctrl+z")  # undo brings the paste back
        assert app.box.value.startswith("see: [pasted 200 lines")
        whole = app.box.text_to_send
        assert whole.startswith("see: " + normalize(long))
        await pilot.press("enter")
        assert app.sent == [whole]


async def test_ctrl_e_unfolds_a_paste_and_the_box_grows_to_a_third_of_the_screen() -> None:
    app = BoxApp()
    async with app.run_test(size=(80, 30)) as pilot:
        assert app.box.outer_size.height == 3  # one line and its border
        await pilot.press("a", "ctrl+j", "b", "ctrl+j", "c")
        await pilot.pause()
        assert app.box.outer_size.height == 5
        await paste(pilot, app.box, "\n".join(f"p{i}" for i in range(FOLD_LINES + 5)))
        await pilot.press("ctrl+e")
        await pilot.pause()
        assert app.box.document.line_count == 3 + FOLD_LINES + 4
        assert 30 // 3 - 1 <= app.box.outer_size.height <= 30 // 3  # a third of the screen, then it scrolls
        assert app.box.max_scroll_y > 0
        await pilot.press("ctrl+e")  # nothing folded: the end of the line, as in a shell
        assert app.box.cursor_location[1] == len(app.box.document[app.box.cursor_location[0]])


async def test_a_paste_the_box_cannot_hold_exactly_stays_folded() -> None:
    tricky = "page one\x0cpage two\u2028same paragraph"
    app = BoxApp()
    async with app.run_test(size=(80, 30)) as pilot:
        await paste(pilot, app.box, tricky)
        assert app.box.value.startswith("[pasted ") and app.box.text_to_send == tricky
        await pilot.press("ctrl+e")
        await pilot.pause()
        assert app.box.value.startswith("[pasted ")  # it would have become line breaks
        assert said(app, "stays folded")
        await pilot.press("enter")
        assert app.sent == [tricky]


async def test_a_paste_with_a_line_too_long_to_edit_stays_folded_and_the_rest_unfolds() -> None:
    huge = "0123456789" * (MAX_LINE // 10) + "!"  # one line, one character past what the box edits
    short_lines = "\n".join(["y" * 1500] * 3)  # folded for its size, its lines fine to edit
    app = BoxApp()
    async with app.run_test(size=(80, 30)) as pilot:
        await paste(pilot, app.box, huge)
        marker = app.box.value
        assert marker.startswith("[pasted 1 line, ")
        await pilot.press("space")
        await paste(pilot, app.box, short_lines)
        await pilot.press("ctrl+e")
        await pilot.pause()
        assert app.box.value == marker + " " + short_lines  # the long line stays one folded piece
        notices = heard(app)
        assert any(f"a line of {MAX_LINE + 1:,} characters" in m and "stays folded" in m for m in notices), notices
        await pilot.press("x", "enter")
        assert app.sent == [huge + " " + short_lines + "x"]


def test_kept_folded_says_why_and_lets_a_line_of_max_line_through() -> None:
    assert kept_folded("a" * MAX_LINE + "\n" + "b" * 10) is None
    assert f"a line of {MAX_LINE + 1:,} characters" in (kept_folded("b\n" + "a" * (MAX_LINE + 1)) or "")
    assert "form feed" in (kept_folded("page\x0cpage") or "")


async def test_up_and_down_walk_the_history_from_the_first_and_last_lines(tmp_path: Path) -> None:
    history = PromptHistory(tmp_path / "h.jsonl").load()
    for p in ("oldest", "two\nlines", "newest"):
        history.add(p)
    app = BoxApp(history)
    async with app.run_test(size=(80, 30)) as pilot:
        await pilot.press("d", "r", "a", "f", "t")
        await pilot.press("up")
        assert app.box.value == "newest"
        await pilot.press("up")
        assert app.box.value == "two\nlines" and app.box.cursor_location[0] == 0
        await pilot.press("up")
        assert app.box.value == "oldest"
        await pilot.press("up")  # no older one: stays
        assert app.box.value == "oldest"
        await pilot.press("down")
        assert app.box.value == "two\nlines" and app.box.cursor_location[0] == 1  # forward: on the last line
        await pilot.press("up")  # on the second of two lines: the cursor moves up, no recall
        assert app.box.value == "two\nlines" and app.box.cursor_location[0] == 0
        await pilot.press("down")  # on the first of two lines: the cursor moves down, no recall
        assert app.box.value == "two\nlines" and app.box.cursor_location[0] == 1
        await pilot.press("down")
        assert app.box.value == "newest"
        await pilot.press("down")
        assert app.box.value == "draft"  # past the newest: what was being typed
        await pilot.press("up", "x", "enter")  # an edited recall is a new prompt
        assert app.sent == ["newestx"] and history.entries[-1] == "newestx"


def test_folds_number_markers_that_would_read_alike() -> None:
    folds = Folds()
    a, b = "\n".join("a" * 3 for _ in range(20)), "\n".join("b" * 3 for _ in range(20))
    ma, mb = folds.fold(a), folds.fold(b)
    assert ma != mb and "#2" in mb and folds.fold(a) == ma
    assert folds.expand(f"{ma} and {mb}") == f"{a} and {b}"
    assert folds.expand("[pasted 20 lines, 79 bytes: ctrl+e to expand] typed by hand") != a  # not this box's
    assert normalize("a\r\nb\rc\n") == "a\nb\nc\n"


@pytest.mark.parametrize("key", ["f6", "f7"])
async def test_the_box_leaves_f6_and_f7_to_the_screen(key: str) -> None:
    pressed: list[str] = []

    class Host(BoxApp):
        BINDINGS: ClassVar[list[BindingType]] = [(key, "hit", "hit")]

        def action_hit(self) -> None:
            pressed.append(key)

    app = Host()
    async with app.run_test(size=(80, 30)) as pilot:
        await pilot.press("a", key)
        assert pressed == [key] and app.box.value == "a"
