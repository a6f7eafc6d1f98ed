"""QA regression: the history table shows no E2E for a turn that got no token."""

from __future__ import annotations

from typing import Any

from telemetry.duration import DASH
from telemetry.record import TurnRecord
from tui.widgets.history import COLUMNS, _cells


def test_a_turn_without_tokens_has_no_e2e_in_the_history() -> None:
    # Esc before the first token: the pane said "E2E – (stream end 237 ms)" while the history's
    # E2E column said "237 ms", the stream's end passed off as an E2E.
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
