"""Snapshots of the prompt's own states: several lines with a folded paste and files attached above
it, and an earlier prompt being edited, then the two branches side by side in the pane.

Deterministic as the chat's other snapshots: scripted turns with fixed stamps, a frozen clock, the
frame timer parked, no blinking cursor.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual import events
from ttft.tui.chat.app import ChatApp

from tests.support.tui_support import MS, T0, SequenceBackend, factory_for, finished, script, wait_until

PARKED_FPS = 1e-4
SIZE = (120, 36)


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path))
    return tmp_path


def app_for(turns: int = 3) -> ChatApp:
    answers = [finished(script(visible=12 + 4 * i, first_ms=200 + 50 * i, token_ms=9)) for i in range(turns)]
    return ChatApp(
        "fake:scripted-1",
        factory=factory_for(SequenceBackend(answers)),
        session_id="20260101-120000-snap",
        clock=lambda: T0 + 10_000 * MS,
        fps=PARKED_FPS,
    )


def test_a_folded_paste_and_files_attached_above_the_prompt(snap_compare, data_dir: Path) -> None:
    (data_dir / "notes.md").write_text("# notes\n" * 40)
    (data_dir / "trace.log").write_text("line\n" * 300)
    app = app_for()

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        box = app.query_one("#prompt")
        box.cursor_blink = False
        box.value = f"/attach {data_dir}/notes.md {data_dir}/trace.log"
        await pilot.press("enter")
        await wait_until(pilot, lambda: len(app.chat.pending) == 2)
        await pilot.press(*"Why does this fail?", "ctrl+j", "ctrl+j", *"The trace:", "space")
        box.post_message(events.Paste("".join(f"  at frame {i}\tfile_{i}.py:{10 + i}\r\n" for i in range(212))))
        await pilot.press("ctrl+j", *"Thanks")
        await pilot.pause(0.2)
        app.clear_notifications()
        await pilot.pause(0.1)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_an_edited_prompt_and_the_two_branches_side_by_side(snap_compare) -> None:
    app = app_for(4)

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        box = app.query_one("#prompt")
        box.cursor_blink = False
        for i, prompt in enumerate(["What is TTFT?", "And TPOT?", "Which matters more?"]):
            box.value = prompt
            await pilot.press("enter")
            await wait_until(pilot, lambda n=i: len(app.chat.session.records) == n + 1 and not app.chat.busy)
        await app.chat.action_edit_prompt(1)
        box.value = "And TPOT, for a chat?"
        await pilot.press("enter")
        await wait_until(pilot, lambda: len(app.chat.session.records) == 4 and not app.chat.busy)
        await pilot.pause(0.2)
        app.clear_notifications()
        await pilot.pause(0.1)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_editing_an_earlier_prompt(snap_compare) -> None:
    app = app_for(2)

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        box = app.query_one("#prompt")
        box.cursor_blink = False
        for i, prompt in enumerate(["What is TTFT?", "And TPOT?"]):
            box.value = prompt
            await pilot.press("enter")
            await wait_until(pilot, lambda n=i: len(app.chat.session.records) == n + 1 and not app.chat.busy)
        await app.chat.action_edit_prompt(0)
        await pilot.pause(0.2)
        app.clear_notifications()
        await pilot.pause(0.1)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)
