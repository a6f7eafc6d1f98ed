"""Pilot tests of the chat: a turn through every phase, cancel, errors, settings, export, resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.tui_support import TimedBackend, factory_for, wait_until
from tui.app import ChatApp
from tui.widgets import AssistantMessage


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path))
    return tmp_path


async def send(pilot, app: ChatApp, text: str) -> None:
    app.query_one("#prompt").value = text
    await pilot.press("enter")


async def test_turn_goes_through_phases_and_is_logged() -> None:
    backend = TimedBackend(first_ms=150, token_ms=15, reasoning=8, visible=30)
    app = ChatApp("fake:timed", factory=factory_for(backend))
    shown: list[str] = []
    async with app.run_test(size=(120, 40)) as pilot:
        show_live = app.pane.show_live

        def spy(snap, *a, **k):  # what the pane was asked to draw, frame by frame
            show_live(snap, *a, **k)
            shown.append(str(app.pane.query_one("#live").content).split()[0])

        app.pane.show_live = spy
        await send(pilot, app, "hello")
        await wait_until(pilot, lambda: not app.busy and len(app.session.records) == 1)
        rec = app.session.records[0]
        assert rec["status"] == "ok"
        order = list(dict.fromkeys(shown))
        assert order == ["WAITING", "REASONING", "STREAMING", "OK"], order
        assert rec["answer"].startswith("w00 w01")
        pane = str(app.pane.query_one("#live").content)
        assert pane.startswith(" OK ") and "TTFT" in pane and "TPOT" in pane and "render lag" in pane
        assert rec["diagnosis"][:30] in pane
        lines = app.session.log.path.read_text().splitlines()
        assert json.loads(lines[0])["prompt"] == "hello"
        assert app.lag_by_turn[0]["paints"] >= 1
        msg = app.query_one(AssistantMessage)
        assert msg.reasoning.collapsed and "thought for" in str(msg.reasoning.title)
