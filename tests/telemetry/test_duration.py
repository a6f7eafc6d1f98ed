"""The one duration formatter (telemetry.duration) and the places that write durations through it."""

from __future__ import annotations

from ttft.telemetry.compare.stats import fmt_amount
from ttft.telemetry.diagnosis import diagnose_turn
from ttft.telemetry.duration import fmt_ms, unit_for
from ttft.telemetry.record import TurnRecord
from ttft.tui import format as ui_format
from ttft.tui.commands.ask import summary_line

from tests.support.turns import play, stream


def test_sizes_pick_the_unit() -> None:
    assert [fmt_ms(v) for v in (None, 0.4, 230.4, 999.4, 1000, 1840, 59_999, 60_000, 125_000)] == [
        "–", "0 ms", "230 ms", "999 ms", "1.0 s", "1.8 s", "60.0 s", "1 m 00 s", "2 m 05 s",
    ]  # fmt: skip
    assert fmt_ms(9.84, digits=1) == "9.8 ms" and fmt_ms(None, missing="-") == "-"


def test_automatic_decimals_and_a_forced_unit() -> None:
    assert [fmt_ms(v, digits=None) for v in (3.24, 9.96, 10.4, 180.4)] == ["3.2 ms", "10.0 ms", "10 ms", "180 ms"]
    assert fmt_ms(1234, digits=None, s_digits=2) == "1.23 s"
    assert fmt_ms(350, unit="s", s_digits=2, bare=True) == "0.35" and fmt_ms(2500, unit="ms") == "2500 ms"
    assert unit_for(200, 1500) == "s" and unit_for(200, 999) == "ms" and unit_for() == "ms"


def test_every_caller_writes_a_duration_the_same_way() -> None:
    assert getattr(ui_format, "fmt_ms", fmt_ms) is fmt_ms  # the UI uses telemetry's, it keeps none of its own
    assert fmt_amount(1234, "ms") == fmt_ms(1234, digits=None, s_digits=2) == "1.23 s"
    assert fmt_amount(3.24, "ms") == fmt_ms(3.24, digits=None) == "3.2 ms"
    rec = {
        "turn_index": 0, "provider": "p", "model": "m", "status": "ok", "settings": {"stream": True}, "attempts": 1,
        "metrics": {"ttft_ms": 312.4, "tpot_ms": 9.84, "e2e_ms": 2_100.0, "total_ms": 2_100.0},
        "tokens": {"output": 180, "source": "usage"},
    }  # fmt: skip
    line = summary_line(TurnRecord.from_dict(rec))  # was "E2E 2100 ms" with its own formatter
    assert "TTFT 312 ms" in line and "TPOT 9.8 ms" in line and "E2E 2.1 s" in line
    slow = play(stream(first_ms=75_000, gap_ms=10, visible=5))  # a first token after a minute and a quarter
    assert "1 m 15 s" in diagnose_turn(TurnRecord.from_dict(slow))  # not "75.0 s"


def test_a_non_finite_figure_is_a_dash_not_a_crash() -> None:
    # json.loads reads Infinity and NaN, so an old or hand-edited log can hold them
    for v in (float("inf"), float("-inf"), float("nan")):
        assert fmt_ms(v) == "–"
        assert fmt_ms(v, unit="s", missing="n/a") == "n/a"


def test_a_negative_duration_over_a_minute_is_the_positive_one_with_a_sign() -> None:
    # a difference between two turns can be negative; floor division wrote -90 s as "-2 m 30 s"
    assert fmt_ms(90_000) == "1 m 30 s"
    assert fmt_ms(-90_000) == "-1 m 30 s"
    assert fmt_ms(-61_000) == "-1 m 01 s"
