"""What a compare pane's status line shows of a finished turn: its figures, and the server's own words
neutralised."""

from __future__ import annotations

from typing import Any

from ttft.telemetry.record import TurnRecord
from ttft.tui.compare.view import pane_done_text


def record(**fields: Any) -> TurnRecord:
    return TurnRecord.from_dict({"turn_index": 0, "provider": "openai", "model": "m", **fields})


def test_a_failed_panes_error_type_from_the_server_is_shown_not_run() -> None:
    rec = record(status="error", error={"type": "overloaded\x1b]0;pwned\x07\x9b2J", "status_code": 529})
    plain = pane_done_text(rec).plain
    assert "HTTP 529 overloaded" in plain
    assert not any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F for c in plain)


def test_a_failed_pane_without_a_type_says_error() -> None:
    assert pane_done_text(record(status="error", error={"type": None})).plain.endswith("error")


def test_a_finished_turn_shows_the_ranked_figures_and_its_wins() -> None:
    rec = record(
        status="ok",
        metrics={"ttft_ms": 180.0, "ttfvt_ms": 240.0, "tpot_ms": 12.0, "e2e_ms": 1430.0},
        tokens={"output": 101},
    )
    plain = pane_done_text(rec, ["TTFT", "E2E"]).plain
    assert plain == " OK  TTFT 180 ms · TTFVT 240 ms · TPOT 12 ms · E2E 1.43 s · 101 tok  ★ TTFT E2E"


def test_a_figure_the_turn_lacks_is_a_dash() -> None:
    plain = pane_done_text(record(status="ok", metrics={"ttft_ms": 180.0})).plain
    assert "TTFVT — · TPOT — · E2E — · — tok" in plain


def test_a_tool_using_turn_says_its_steps_and_its_time_in_tools() -> None:
    rec = record(
        status="ok",
        metrics={"ttft_ms": 180.0, "ttfvt_ms": 180.0, "tpot_ms": 2.0, "e2e_ms": 900.0},
        tokens={"output": 12},
        agent={"step_count": 3, "time_in_tools_ms": 420.0, "time_in_ttft_ms": 1.5},
    )
    assert pane_done_text(rec).plain.endswith("E2E 900 ms · 12 tok · 3 steps · tools 420 ms")
