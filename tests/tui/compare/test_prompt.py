"""Compare's prompt is the chat's prompt box: a two-line prompt goes to every pane whole, a prompt sent
while one is in flight stays in the box, Esc cancels the panes and never the box, and Up recalls."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual import events
from ttft.tui.compare.app import CompareApp
from ttft.tui.widgets.prompt_box import PromptBox

from tests.support.compare_fakes import ScheduledBackend
from tests.support.tui_support import wait_until

SIZE = (160, 48)


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


async def test_a_multi_line_prompt_reaches_every_pane_and_the_box_keeps_what_waits() -> None:
    # streams that outlast any pilot: late in a full run on 2 cores, eight key presses once took 10 s
    a = ScheduledBackend("a", ttft_s=0.01, gap_s=0.02, tokens=10**6, word="alpha")
    b = ScheduledBackend("b", ttft_s=0.01, gap_s=0.02, tokens=10**6, word="beta")
    app = CompareApp([a, b], session_id="s-prompt")
    async with app.run_test(size=SIZE) as pilot:
        box = app.query_one("#prompt", PromptBox)
        await pilot.press(*"first", "ctrl+j", *"second")
        box.post_message(events.Paste("\tpasted\r\nlines ü\r\n"))
        await pilot.pause()
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.in_flight)
        assert box.value == ""
        await pilot.press(*"next one")
        await pilot.press("enter")  # in flight: it stays
        assert box.value == "next one"
        await pilot.press("escape")  # cancels the panes, not the box
        await wait_until(pilot, lambda: not app.in_flight, timeout=15)
        assert box.value == "next one"
        sent = [v.transcript.query("UserMessage").first().prompt for v in app.views]
        assert sent == ["first\nsecond\tpasted\nlines ü\n"] * 2
        box.value = ""
        await pilot.press("up")
        assert box.value == "first\nsecond\tpasted\nlines ü\n"  # the compare screen keeps the history too
