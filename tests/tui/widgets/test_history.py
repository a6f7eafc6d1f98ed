"""tui.widgets.history: the session's turn table, from typed records; a record that does not read is a row saying so."""

from __future__ import annotations

import asyncio
from typing import Any

from textual.app import App, ComposeResult
from textual.widgets import DataTable

from telemetry.duration import DASH
from telemetry.record import TurnRecord
from tests.support.turns import play, stream
from tui.widgets.history import COLUMNS, HistoryPanel, _cells


def test_a_turn_without_tokens_has_no_e2e_in_the_history() -> None:
    # Esc before the first token: the pane says "E2E – (stream end 237 ms)", and the history's E2E
    # column agrees (a dash), never passing the stream's end off as an E2E.
    rec: dict[str, Any] = {
        "turn_index": 0,
        "model": "x",
        "status": "cancelled",
        "metrics": {"ttft_ms": None, "ttfvt_ms": None, "tpot_ms": None, "e2e_ms": None, "total_ms": 237.0},
        "tokens": {"output": 0, "source": "estimated"},
    }
    cells = dict(zip(COLUMNS, _cells(TurnRecord.from_dict(rec)), strict=True))
    assert str(cells["E2E"]) == DASH
    rec["metrics"] |= {"e2e_ms": 2692.1, "total_ms": 2693.0}
    assert str(dict(zip(COLUMNS, _cells(TurnRecord.from_dict(rec)), strict=True))["E2E"]) == "2.7 s"


def test_a_logged_turn_that_does_not_read_is_a_row_saying_so() -> None:
    # a hand-edited line (a metric that is text, with an escape sequence) is one row saying so, never drawn raw
    good = play(stream(visible=3))
    bad = {**good, "turn_index": 1, "metrics": {"ttft_ms": "\x1b[2Jfast"}}

    class Host(App[None]):
        def compose(self) -> ComposeResult:
            yield HistoryPanel()

    async def go() -> list[list[str]]:
        app = Host()
        async with app.run_test(size=(100, 20)) as pilot:
            app.query_one(HistoryPanel).set_records([good, bad])
            await pilot.pause()
            table = app.query_one(DataTable)
            return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]

    rows = asyncio.run(go())
    assert len(rows) == 2 and rows[0][2] == "ok" and rows[1][:3] == ["2", "", "unreadable"]
    assert all(c == DASH for c in rows[1][3:]) and not any("\x1b" in c for row in rows for c in row)
