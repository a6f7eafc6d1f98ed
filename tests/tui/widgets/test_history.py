"""tui.widgets.history: the session's turn table, from typed records; a record that does not read is a row saying so."""

from __future__ import annotations

from typing import Any

from ttft.telemetry.duration import DASH
from ttft.telemetry.record import TurnRecord
from ttft.tui.widgets.history import COLUMNS, SERVER_COLUMN, _cells, columns, has_server_account


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


def test_the_servers_own_queue_and_ttft_get_a_column_once_a_turn_has_them() -> None:
    def rec(i: int, queue: float | None, ttft: float | None) -> TurnRecord:
        m: dict[str, Any] = {"ttft_ms": 1900.0, "e2e_ms": 2500.0, "tpot_ms": 20.0}
        if queue is not None or ttft is not None:
            m |= {"server_queue_ms": queue, "server_ttft_ms": ttft, "server_timing_source": "vllm"}
        return TurnRecord.from_dict({"turn_index": i, "model": "m", "status": "ok", "metrics": m, "tokens": {}})

    plain, vllm, prefill_only = rec(0, None, None), rec(1, 1400.0, 350.0), rec(2, None, 104.0)
    heads = columns(False, served=True)
    assert heads[-1] == SERVER_COLUMN and columns(False) == COLUMNS
    cells = [dict(zip(heads, _cells(r, served=True), strict=True))[SERVER_COLUMN] for r in (plain, vllm, prefill_only)]
    assert cells == [DASH, "1.4s/350ms", f"{DASH}/104ms"]
    assert [has_server_account(r) for r in (plain, vllm, prefill_only)] == [False, True, True]
