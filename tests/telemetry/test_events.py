"""The clocks every record is stamped with: the monotonic one, and the wall clock's offset from it, read so
that a thread switch between the two reads moves no record's ``sent_at``."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from ttft.telemetry import events as ev


def _clocks(monotonic: list[int], wall: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    mono: Iterator[int] = iter(monotonic)
    walls: Iterator[int] = iter(wall)
    monkeypatch.setattr(time, "monotonic_ns", lambda: next(mono))
    monkeypatch.setattr(time, "time_ns", lambda: next(walls))


def test_a_read_split_by_a_switch_is_read_again_and_the_tight_one_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    # first try: 4 ms passed between the monotonic reads (the thread was switched out); second: 2 µs
    _clocks([1_000_000, 5_000_000, 6_000_000, 6_002_000], [10**18 + 3_000_000, 10**18 + 6_001_000], monkeypatch)
    assert ev.wall_offset_ns() == 10**18 + 6_001_000 - 6_001_000


def test_when_every_try_is_split_the_tightest_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    widths = [9_000_000, 3_000_000, 7_000_000, 5_000_000]
    mono: list[int] = []
    t = 0
    for w in widths:
        mono += [t, t + w]
        t += w + 1_000_000
    wall = [10**18 + a + 1_000 for a in mono[::2]]  # each wall read 1 µs after its try's first monotonic read
    _clocks(mono, wall, monkeypatch)
    tight = 1  # the 3 ms try: offset = wall - midpoint of its bracket
    assert ev.wall_offset_ns() == wall[tight] - (mono[2 * tight] + mono[2 * tight + 1]) // 2


def test_the_offset_turns_a_monotonic_stamp_into_the_wall_clock() -> None:
    offset = ev.wall_offset_ns()
    assert abs(ev.now_ns() + offset - time.time_ns()) < 50_000_000  # 50 ms: a slewed VM clock, not a bug
