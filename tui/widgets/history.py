"""The session's turns as a table, and the session summary sentence."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from ...telemetry.cost import fmt_usd
from ...telemetry.diagnosis import diagnose_session
from ...telemetry.duration import DASH, fmt_ms
from ...telemetry.record import TurnRecord
from ..format import short_model, turn_label, visible_controls

STATUS_STYLE = {"ok": "green", "error": "bold red", "cancelled": "yellow"}
# "tok": output tokens ("~" when estimated); short, so the 64-column pane keeps room for the model
COLUMNS = ("#", "model", "status", "TTFT", "TTFVT", "TPOT", "E2E", "tok")
# The turn's cost (telemetry.cost), once any turn shown has one: a session of unpriced models (a
# self-hosted server) keeps the room for the model's name rather than a column of dashes.
COST_COLUMN = "cost"
# The server's own account of the wait (queue/TTFT from scheduling: vLLM's per-request metrics,
# llama-server's timings), once any turn shown has it; a dash where a turn's server did not say.
SERVER_COLUMN = "server q/ttft"
MODEL_W = 16  # the model column when the table's width is not known yet
MODEL_MIN_W = 8
CELL_PAD = 2  # DataTable's cell padding, one column either side
SCROLLBAR_W = 1  # the table's own, once it scrolls (set in DEFAULT_CSS)
MAX_HEIGHT = 14  # the table's, header included: more rows than this scroll


def columns(priced: bool, served: bool = False) -> tuple[str, ...]:
    return (*COLUMNS, *((SERVER_COLUMN,) if served else ()), *((COST_COLUMN,) if priced else ()))


def has_server_account(r: TurnRecord) -> bool:
    return r.metrics.server_queue_ms is not None or r.metrics.server_ttft_ms is not None


def _compact(ms: float | None) -> str:
    return fmt_ms(ms).replace(" ", "")  # "1.4s": the pane is narrow


def _cells(r: TurnRecord, priced: bool = False, served: bool = False) -> list[str | Text]:
    """One turn's cells; the model's name in full (it is shortened to the room left). ``priced``: with
    the cost column (a dash for a turn that was not priced); ``served``: with the server's queue and TTFT."""
    m, tok = r.metrics, r.tokens
    out = tok.output
    cost = [fmt_usd(r.cost.total_usd if r.cost is not None else None)] if priced else []
    server = []
    if served:
        server = [f"{_compact(m.server_queue_ms)}/{_compact(m.server_ttft_ms)}" if has_server_account(r) else DASH]
    return [
        turn_label(r.turn_index, ""),  # under the "#" heading
        visible_controls(r.model),  # a log file's or a server's name: shown, never run
        Text(r.status or "?", style=STATUS_STYLE.get(r.status, "")),
        fmt_ms(m.ttft_ms),
        fmt_ms(m.ttfvt_ms),
        fmt_ms(m.tpot_ms, digits=1) if m.tpot_ms is not None else DASH,
        fmt_ms(m.e2e_ms),  # no token, no E2E: a turn's total time is not its E2E (the pane says it apart)
        DASH if out is None else f"{out}{'~' if tok.source == 'estimated' else ''}",
        *server,
        *cost,
    ]


def model_width(rows: Sequence[Sequence[str | Text]], width: int, heads: Sequence[str] = COLUMNS) -> int:
    """The model column's width: what the other columns (``heads``) leave of ``width``, so the last one
    is never cut off the pane's edge; MODEL_W while the width is unknown."""
    if width <= 0:
        return MODEL_W
    others = sum(
        max([len(heads[i]), *(len(str(row[i])) for row in rows)]) + CELL_PAD for i in range(len(heads)) if i != 1
    )
    longest = max((len(str(row[1])) for row in rows), default=MODEL_MIN_W)
    scrollbar = SCROLLBAR_W if len(rows) >= MAX_HEIGHT else 0
    return max(MODEL_MIN_W, min(longest, width - others - CELL_PAD - scrollbar))


class HistoryPanel(Vertical):
    DEFAULT_CSS = f"""
    HistoryPanel {{ height: auto; }}
    HistoryPanel DataTable {{ height: auto; max-height: {MAX_HEIGHT}; scrollbar-size-vertical: {SCROLLBAR_W}; }}
    """

    def compose(self) -> ComposeResult:
        self._records: list[TurnRecord] = []
        self._drawn_w = -1
        self._priced = False  # whether the cost column is up
        self._served = False  # whether the server's column is up
        table: DataTable[Any] = DataTable(cursor_type="row", zebra_stripes=True, id="history-table")
        table.add_columns(*COLUMNS)
        yield table
        yield Static("", id="session-summary", classes="summary")

    def on_resize(self) -> None:
        if self._records and self.size.width != self._drawn_w:
            self.set_records(self._records)  # the model's name gets the new room

    def set_records(self, records: Sequence[TurnRecord]) -> None:
        self._records = list(records)
        self._drawn_w = self.size.width
        table = self.query_one(DataTable)
        priced = any(r.cost is not None for r in records)
        served = any(has_server_account(r) for r in records)
        if (priced, served) != (self._priced, self._served):
            table.clear(columns=True)
            table.add_columns(*columns(priced, served))
            self._priced, self._served = priced, served
        else:
            table.clear()
        rows = [_cells(r, priced, served) for r in records]
        w = model_width(rows, self.size.width, columns(priced, served))
        for row in rows:
            row[1] = short_model(str(row[1]), w)
            table.add_row(*row)
        if records:
            table.move_cursor(row=len(records) - 1)
        table.refresh()  # the header row too: its cached line would keep the previous column widths on screen
        summary = visible_controls(diagnose_session(records))  # it may quote a server's error
        self.query_one("#session-summary", Static).update(Text(summary, style="italic"))
