"""The session's turns as a table, and the session summary sentence."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.text import Text
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from telemetry.diagnosis import diagnose_session
from tui.format import DASH, fmt_ms, short_model, turn_label

STATUS_STYLE = {"ok": "green", "error": "bold red", "cancelled": "yellow"}
MODEL_W = 16


class HistoryPanel(Vertical):
    DEFAULT_CSS = """
    HistoryPanel { height: auto; }
    HistoryPanel DataTable { height: auto; max-height: 14; }
    """

    def compose(self):  # type: ignore[override]
        table: DataTable[Any] = DataTable(cursor_type="row", zebra_stripes=True, id="history-table")
        table.add_columns("#", "model", "status", "TTFT", "TTFVT", "TPOT", "E2E", "out tok")
        yield table
        yield Static("", id="session-summary", classes="summary")

    def set_records(self, records: Sequence[dict[str, Any]]) -> None:
        table = self.query_one(DataTable)
        table.clear()
        for r in records:
            m = r.get("metrics") or {}
            tok = r.get("tokens") or {}
            status = r.get("status") or "?"
            out = tok.get("output")
            table.add_row(
                turn_label(r.get("turn_index"), ""),  # under the "#" heading
                short_model(r.get("model"), MODEL_W),
                Text(status, style=STATUS_STYLE.get(status, "")),
                fmt_ms(m.get("ttft_ms")),
                fmt_ms(m.get("ttfvt_ms")),
                fmt_ms(m.get("tpot_ms"), digits=1) if m.get("tpot_ms") is not None else DASH,
                fmt_ms(m.get("e2e_ms") or m.get("total_ms")),
                DASH if out is None else f"{out}{'~' if tok.get('source') == 'estimated' else ''}",
            )
        if records:
            table.move_cursor(row=len(records) - 1)
        self.query_one("#session-summary", Static).update(Text(diagnose_session(list(records)), style="italic"))
