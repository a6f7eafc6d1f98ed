"""The transcript draws typed records: a logged turn read back with ``TurnRecord.from_dict`` is drawn as the
turn was, its error card and compact line included, with no control character reaching the screen."""

from __future__ import annotations

from textual.app import App, ComposeResult
from ttft.telemetry.record import TurnRecord
from ttft.tui.widgets.error_card import ErrorCard
from ttft.tui.widgets.transcript import (
    AssistantMessage,
    CompactTurn,
    NoteMessage,
    Transcript,
    UserMessage,
    reasoning_title,
)

from tests.support.turns import play, stream


class _Host(App[None]):
    def compose(self) -> ComposeResult:
        yield Transcript(id="transcript")


async def test_a_logged_turn_is_drawn_from_its_typed_record() -> None:
    rec = play(stream(reasoning=3, visible=4))
    app = _Host()
    async with app.run_test(size=(80, 24)) as pilot:
        t = app.query_one(Transcript)
        await t.add_record(TurnRecord.from_dict(rec), lambda: 0)
        await pilot.pause()
        assert [u.prompt for u in app.query(UserMessage)] == [rec["prompt"]]
        msg = app.query_one(AssistantMessage)
        assert isinstance(msg.record, TurnRecord) and msg.record.answer == rec["answer"]
        assert msg.reasoning.display and str(msg.reasoning.title).startswith("thought for ")
        assert not app.query(NoteMessage)


async def test_an_error_turn_gets_its_card_and_a_compact_line() -> None:
    rec = play(stream(visible=2))
    rec = {**rec, "status": "error", "error": {"type": "rate_limit", "message": "slow\x1b[2Jdown", "status_code": 429}}
    app = _Host()
    async with app.run_test(size=(80, 24)) as pilot:
        t = app.query_one(Transcript)
        await t.add_record(TurnRecord.from_dict(rec), lambda: 0)
        await pilot.pause()
        card = str(app.query_one(ErrorCard).content)
        assert "rate_limit · HTTP 429" in card and "\x1b" not in card and "Rate limited" in card
        assert "partial answer above is kept" in card
        line = CompactTurn._content("q", TurnRecord.from_dict(rec)).renderables[-1]
        assert "✗ rate_limit · HTTP 429: slow" in str(line) and "\x1b" not in str(line)


def test_reasoning_title_reads_the_typed_fields() -> None:
    hidden = TurnRecord.from_dict(play(stream(visible=5, hidden_reasoning_tokens=40)))
    title = reasoning_title(hidden)
    assert title is not None and "40 tokens" in title and "(estimated)" in title and "hidden by the provider" in title
    assert reasoning_title(TurnRecord.from_dict(play(stream(visible=5)))) is None
