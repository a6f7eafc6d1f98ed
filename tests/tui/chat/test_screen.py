"""The chat screen owns the chat: its keys apply while it is on top, what is typed is never lost while
a turn is in flight, and a new chat mid-turn leaves the old turn logged and the new chat clean."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ttft.tui.chat import commands as chat_commands
from ttft.tui.chat.app import ChatApp
from ttft.tui.chat.prompt import ChatPrompt
from ttft.tui.screens.help import HelpScreen
from ttft.tui.widgets.transcript import UserMessage

from tests.support.tui_support import ScriptedBackend, TimedBackend, factory_for, said, script, wait_until


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path))
    return tmp_path


async def send(pilot, app: ChatApp, text: str) -> None:  # type: ignore[no-untyped-def]
    app.query_one("#prompt", ChatPrompt).value = text
    await pilot.press("enter")


async def test_the_chat_keys_are_the_screens_and_apply_only_while_it_is_on_top() -> None:
    app_keys = {b.key for b in ChatApp.BINDINGS if not isinstance(b, tuple)}
    assert not app_keys & {b.key for b in chat_commands.BINDINGS if not isinstance(b, tuple)}
    app = ChatApp("fake:timed", factory=factory_for(TimedBackend(first_ms=5, token_ms=1, visible=2)))
    async with app.run_test(size=(120, 40)) as pilot:
        first = app.chat.session.log.session_id
        await pilot.press("f1")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.press("ctrl+n")  # the chat's key, under a dialog: not the chat's to act on
        await pilot.pause(0.1)
        assert isinstance(app.screen, HelpScreen) and app.chat.session.log.session_id == first
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is app.chat)
        await pilot.press("ctrl+n")
        await wait_until(pilot, lambda: app.chat.session.log.session_id != first)


async def test_a_prompt_sent_while_a_turn_is_in_flight_stays_in_the_prompt() -> None:
    app = ChatApp("fake:scripted-1", factory=factory_for(ScriptedBackend(script(visible=3))))  # blocks mid-answer
    async with app.run_test(size=(120, 40)) as pilot:
        await send(pilot, app, "first")
        await wait_until(pilot, lambda: app.chat.drawn.answer is not None)
        assert app.query_one("#prompt", ChatPrompt).value == ""  # taken: it is on its way
        await send(pilot, app, "  second, typed meanwhile ")
        await wait_until(pilot, lambda: said(app, "in flight"))
        assert app.query_one("#prompt", ChatPrompt).value == "  second, typed meanwhile "  # kept as typed
        assert [u.prompt for u in app.query(UserMessage)] == ["first"]
        await pilot.press("escape")
        await wait_until(pilot, lambda: not app.chat.busy and len(app.chat.session.records) == 1)
        assert app.chat.session.records[0].status == "cancelled"


async def test_a_new_chat_mid_turn_logs_the_old_turn_and_starts_clean(data_dir: Path) -> None:
    backend = TimedBackend(first_ms=5, token_ms=20, reasoning=0, visible=200)
    app = ChatApp("fake:timed", factory=factory_for(backend))
    async with app.run_test(size=(120, 40)) as pilot:
        await send(pilot, app, "long one")
        await wait_until(
            pilot, lambda: app.chat.live is not None and app.chat.live.recorder.snapshot().visible_tokens >= 3
        )
        old = app.chat.session.log.path
        await pilot.press("ctrl+n")
        await wait_until(pilot, lambda: app.chat.session.log.path != old and not app.query(UserMessage))
        await pilot.pause(0.2)  # the old turn's end has reached the screen by now: it draws nothing
        assert not app.query(UserMessage) and app.chat.transcript.greeting is not None
        assert app.chat.session.records == [] and app.chat.session.messages == [] and not app.chat.busy
        (logged,) = [json.loads(x) for x in old.read_text().splitlines()]
        assert logged["status"] == "cancelled" and logged["answer"].startswith("w00 w01 w02")
        backend.visible = 2
        await send(pilot, app, "fresh")
        await wait_until(pilot, lambda: not app.chat.busy and len(app.chat.session.records) == 1)
        assert [m.content for m in app.chat.session.messages] == ["fresh", "w00 w01 "]
        assert app.chat.session.records[0].turn_index == 0


async def test_the_app_closing_while_a_turn_end_is_drawn_exits_cleanly_with_the_turn_logged() -> None:
    # SIGTERM's path: the turn is cancelled and handed off, then the app exits at once, while the
    # screen is still drawing that turn's end into widgets that are going
    app = ChatApp("fake:timed", factory=factory_for(TimedBackend(first_ms=5, token_ms=20, reasoning=0, visible=300)))
    async with app.run_test(size=(120, 40)) as pilot:
        await send(pilot, app, "hi")
        await wait_until(pilot, lambda: app.chat.live is not None and len(app.chat.live.recorder.chunks) >= 3)
        log = app.chat.session.log.path
        app.chat.turns.cancel()
        await app.chat.turns.wait_idle(10)
        app.exit(return_code=143)
        await pilot.pause(0.3)
    assert app.return_code == 143  # no MountError from the drawing ended the app instead
    (logged,) = [json.loads(x) for x in log.read_text().splitlines()]
    assert logged["status"] == "cancelled" and logged["answer"].startswith("w00 w01 w02")
