"""The event loop's lag on a turn (``metrics.loop_lag_ms``): when it is a large part of the wait, the split
names it as ttft's own (``wait_ms.client_lag``) and the diagnosis does not blame the server."""

from __future__ import annotations

import pytest
from ttft.telemetry.diagnosis import diagnose_turn
from ttft.telemetry.export import table
from ttft.telemetry.record import TurnRecord
from ttft.telemetry.wire import KEYS, LAG_MIN_MS, LAG_SHARE, WaitSplit, lag_dominates, with_client_lag

from tests.support.turns import play, recorder, stream


def _turn(lag_ms: float | None, first_ms: float = 200.0) -> dict:
    rec = recorder()
    rec.loop_lag_ms = lag_ms
    return play(stream(first_ms=first_ms), rec)


def test_the_rule_needs_both_a_share_of_the_wait_and_an_absolute_floor() -> None:
    assert lag_dominates(LAG_SHARE * 200, 200) and lag_dominates(LAG_MIN_MS, LAG_MIN_MS / LAG_SHARE)
    assert not lag_dominates(LAG_SHARE * 200 - 1, 200)  # a small share of a long wait
    assert not lag_dominates(LAG_MIN_MS - 1, LAG_MIN_MS)  # most of a tiny wait: the loop's jitter
    assert not lag_dominates(None, 200) and not lag_dominates(50, None) and not lag_dominates(50, 0)


@pytest.mark.parametrize("lag", [60.0, 150.0, 500.0])
def test_a_dominant_lag_moves_from_the_servers_part_and_the_split_still_sums_to_ttft(lag: float) -> None:
    split = WaitSplit(connect=5.0, send=1.0, server=94.0, first_token=100.0)
    moved = with_client_lag(split, lag)
    assert moved is not None
    assert moved.total_ms == pytest.approx(split.total_ms)
    assert moved.client_lag == pytest.approx(min(lag, split.server_ms))  # never more than the server's part
    assert moved.connect == 5.0 and moved.send == 1.0  # the network's part is measured, not guessed at
    assert moved.first_token == pytest.approx(max(0.0, 100.0 - lag))  # a late read lands at the end of the wait


def test_a_small_lag_is_recorded_but_leaves_the_split_alone() -> None:
    d = _turn(5.0)
    assert d["metrics"]["loop_lag_ms"] == 5.0
    assert d["metrics"]["wait_ms"]["client_lag"] == 0.0
    assert "ttft's own event loop" not in diagnose_turn(TurnRecord.from_dict(d))


def test_a_turn_whose_wait_was_the_loops_says_so_and_reads_back() -> None:
    d = _turn(150.0)  # of a 200 ms wait: headers at 100, first token at 200
    m = d["metrics"]
    assert m["loop_lag_ms"] == 150.0
    assert m["wait_ms"]["client_lag"] == 150.0
    assert m["wait_ms"]["first_token"] == 0.0 and m["wait_ms"]["server"] == 50.0
    assert sum(m["wait_ms"].values()) == pytest.approx(m["ttft_ms"], abs=1e-3)
    said = diagnose_turn(TurnRecord.from_dict(d))
    assert "ttft's own event loop" in said and "not the server" in said
    assert "nothing to fix" not in said


def test_an_old_line_without_the_fields_reads_as_unwatched() -> None:
    d = _turn(None)
    del d["metrics"]["loop_lag_ms"]
    del d["metrics"]["wait_ms"]["client_lag"]
    rec = TurnRecord.from_dict(d)
    assert rec.metrics.loop_lag_ms is None
    assert rec.metrics.wait_ms is not None and rec.metrics.wait_ms.client_lag == 0.0


def test_the_export_has_a_column_for_the_lag_and_for_every_part_of_the_split() -> None:
    names = {c.name for c in table.COLUMNS}
    assert "metrics.loop_lag_ms" in names
    assert {f"metrics.wait_ms.{k}" for k in KEYS} <= names
