"""The turn driver: a turn's steps reach its host as messages, in order, with the typed record.

The host here is a bare screen that only keeps what it is told: the driver touches no widget, so
nothing else is needed to drive a turn from start to hand-off.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.app import App
from textual.message import Message
from textual.screen import Screen
from ttft.telemetry import events as ev
from ttft.telemetry.log.turns import SessionLog, read_records
from ttft.telemetry.record import TurnRecord
from ttft.tui.chat.turn import ChatTurns, TurnFailed, TurnFinished, TurnStarted
from ttft.tui.runner import LoopThread
from ttft.tui.session import ChatSession

from tests.support.tui_support import TimedBackend, factory_for, wait_until


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path))
    return tmp_path


class Told(Screen[None]):
    """Keeps every turn message it is sent."""

    def __init__(self) -> None:
        super().__init__()
        self.told: list[Message] = []

    def on_turn_started(self, event: TurnStarted) -> None:
        self.told.append(event)

    def on_turn_finished(self, event: TurnFinished) -> None:
        self.told.append(event)

    def on_turn_failed(self, event: TurnFailed) -> None:
        self.told.append(event)


class Host(App[None]):
    def __init__(self, make: object) -> None:
        super().__init__()
        self.runner = LoopThread()
        self.session = ChatSession(self.runner, "fake:timed", factory=make, log=SessionLog("s-turn"))  # type: ignore[arg-type]
        self.host = Told()

    def on_mount(self) -> None:
        self.push_screen(self.host)

    async def on_unmount(self) -> None:
        await self.session.close_backend()
        self.runner.close()


async def test_a_turn_is_started_then_finished_with_its_typed_record_in_the_context() -> None:
    app = Host(factory_for(TimedBackend(first_ms=5, token_ms=1, reasoning=0, visible=3)))
    async with app.run_test() as pilot:
        turns = ChatTurns(app.session, app.host)
        assert await turns.start("hello", ev.now_ns()) is True
        assert turns.busy and turns.live is not None
        await wait_until(pilot, lambda: len(app.host.told) == 2)
        started, finished = app.host.told
        assert isinstance(started, TurnStarted) and isinstance(finished, TurnFinished)
        assert started.prompt == "hello" and started.live is finished.live and started.lag is finished.lag
        record = finished.record
        assert isinstance(record, TurnRecord) and record.status == "ok" and record.answer == "w00 w01 w02 "
        assert finished.log_error is None and finished.trouble is None
        # handed off: in the session's context before the screen hears of it, and no longer in flight
        assert app.session.records == [record] and not turns.busy
        assert [m.content for m in app.session.messages] == ["hello", "w00 w01 w02 "]
        assert [r["prompt"] for r in read_records(app.session.log.path)] == ["hello"]


async def test_a_backend_that_cannot_start_is_a_failure_with_its_words_and_nothing_logged() -> None:
    class NoKey(Exception):
        kind = "auth"
        hint = "set OPENAI_API_KEY"

    def make(spec: str, base_url: str | None) -> TimedBackend:
        raise NoKey("no API key for fake")

    app = Host(make)
    async with app.run_test() as pilot:
        turns = ChatTurns(app.session, app.host)
        assert await turns.start("hello", ev.now_ns()) is False
        assert not turns.busy
        await wait_until(pilot, lambda: len(app.host.told) == 1)
        (failed,) = app.host.told
        assert isinstance(failed, TurnFailed) and (failed.prompt, failed.spec) == ("hello", "fake:timed")
        assert (failed.error.type, failed.error.message, failed.error.hint) == (
            "auth",
            "no API key for fake",
            "set OPENAI_API_KEY",
        )
        assert app.session.records == [] and not app.session.log.path.exists()


async def test_a_turn_the_chat_moved_on_from_is_logged_but_not_folded_into_the_new_conversation() -> None:
    app = Host(factory_for(TimedBackend(first_ms=5, token_ms=20, reasoning=0, visible=200)))
    async with app.run_test() as pilot:
        turns = ChatTurns(app.session, app.host)
        await turns.start("long one", ev.now_ns())
        old_log = app.session.log.path
        await wait_until(pilot, lambda: turns.live is not None and turns.live.recorder.snapshot().visible_tokens >= 2)
        app.session.new_chat()  # as a new chat does, before the turn has ended
        assert turns.cancel() is True
        await turns.wait_idle(10)
        assert not turns.busy and turns.cancel() is False
        await wait_until(pilot, lambda: len(app.host.told) == 2)
        assert app.session.records == [] and app.session.messages == []
        (logged,) = read_records(old_log)
        assert logged["status"] == "cancelled" and logged["answer"].startswith("w00 w01")
