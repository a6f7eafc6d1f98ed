"""The pane, the history table and the session summary draw what a turn's attachments and cost were
(the figures come from telemetry; the widgets only format them)."""

from __future__ import annotations

import dataclasses
from typing import Any

from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets import DataTable, Static
from ttft.telemetry.record import TurnRecord
from ttft.tui.widgets.history import COLUMNS, COST_COLUMN, HistoryPanel
from ttft.tui.widgets.telemetry_pane import record_text

from tests.support.turns import play, stream

COST = {"input_usd": 0.000135, "output_usd": 0.00006, "total_usd": 0.000195, "priced_as": "openai:gpt-4o-mini"}
FILES = [
    {"name": "chart.png", "bytes": 1_234_567, "media_type": "image/png", "est_tokens": 765},
    {"name": "notes\x1b[2J.txt", "bytes": 3_100, "media_type": "text/plain", "est_tokens": 235},
]


def _turn(**extra: Any) -> TurnRecord:
    return TurnRecord.from_dict({**play(stream(visible=4)), **extra})


def test_the_pane_shows_the_files_and_what_they_added_to_the_input_and_the_prefill() -> None:
    llama = {"llama-server": {"prompt_n": 1200, "prompt_ms": 300.0, "predicted_n": 4, "predicted_ms": 40.0}}
    rec = _turn(
        attachments=FILES, tokens={"input": 1250, "cached_input": 0, "output": 4, "source": "usage"}, server=llama
    )
    shown = record_text(rec).plain
    assert "attached       chart.png 1.2 MB · notes" in shown and ".txt 3 KB" in shown
    assert "~1,000 input tokens (80% of the input) · ~250 ms of the llama-server prefill" in shown
    hosted = record_text(dataclasses.replace(rec, server=None)).plain
    assert "~1,000 input tokens (80% of the input)" in hosted and "prefill" not in hosted.split("they added")[1]


def test_the_pane_shows_the_cost_and_where_the_price_came_from() -> None:
    shown = record_text(_turn(cost={**COST, "source": "genai-prices 0.2.3"})).plain
    assert "cost           $0.000195 · in $0.000135 · out $0.00006" in shown
    assert "priced as    openai:gpt-4o-mini (genai-prices 0.2.3)" in shown
    unpriced = record_text(_turn()).plain
    assert "cost" not in unpriced and "attached" not in unpriced  # nothing to say, no row


class _Host(App[None]):
    def compose(self) -> ComposeResult:
        yield HistoryPanel()


def _heads(table: DataTable[Any]) -> list[str]:
    return [str(c.label) for c in table.columns.values()]


async def test_the_history_table_gets_a_cost_column_once_a_turn_is_priced() -> None:
    app = _Host()
    async with app.run_test(size=(80, 30)) as pilot:
        panel = app.query_one(HistoryPanel)
        table = app.query_one(DataTable)
        unpriced = [_turn(), _turn()]
        panel.set_records(unpriced)
        await pilot.pause()
        assert _heads(table) == list(COLUMNS)  # no column of dashes for a self-hosted session
        priced = [*unpriced, _turn(turn_index=2, cost={**COST, "source": "config"})]
        panel.set_records(priced)
        await pilot.pause()
        assert _heads(table) == [*COLUMNS, COST_COLUMN]
        assert [str(table.get_row_at(i)[-1]) for i in range(3)] == ["–", "–", "$0.00019"]
        summary = app.query_one("#session-summary", Static).render()
        text = summary.plain if isinstance(summary, Text) else str(summary)
        assert "Cost $0.000195 over 1 turn; 2 more not priced." in text
        panel.set_records(unpriced)  # a new chat: back to no column
        await pilot.pause()
        assert _heads(table) == list(COLUMNS)
