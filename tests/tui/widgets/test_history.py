"""tui.widgets.history: the session's turn table, from typed records; a record that does not read is a row saying so."""

from __future__ import annotations

from typing import Any

from telemetry.duration import DASH
from telemetry.record import TurnRecord
from tui.widgets.history import COLUMNS, _cells


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
