"""telemetry.bench.workload.lengths: the three forms of a length, their draws and their errors."""

from __future__ import annotations

import random
import statistics

import pytest
from ttft.telemetry.bench.workload.lengths import MAX_TOKENS, Lengths, TooLong


def test_a_fixed_length_is_what_it_says() -> None:
    n = Lengths.parse("128")
    assert n.kind == "fixed" and not n.spread and n.text() == "128"
    assert {n.draw_for(0, i, "input") for i in range(50)} == {128}
    assert Lengths.parse("64:0").kind == "fixed"  # no spread is the fixed form


def test_a_normal_draw_has_the_asked_mean_and_spread_and_never_goes_below_one() -> None:
    n = Lengths.parse("100:30")
    draws = [n.draw_for(7, i, "input") for i in range(4000)]
    assert statistics.mean(draws) == pytest.approx(100, abs=2.5)
    assert statistics.pstdev(draws) == pytest.approx(30, abs=2.5)
    assert all(isinstance(d, int) for d in draws)
    wide = Lengths.parse("5:50")  # most of its mass below 1: clipped, never 0 or negative
    assert min(wide.draw_for(0, i, "input") for i in range(500)) == 1


def test_a_uniform_draw_covers_both_ends_and_nothing_outside() -> None:
    u = Lengths.parse("50-60")
    draws = {u.draw_for(3, i, "output") for i in range(600)}
    assert draws == set(range(50, 61))
    assert u.to_dict() == {"spec": "50-60", "kind": "uniform", "mean": 55.0, "stddev": u.stddev, "min": 50, "max": 60}
    assert u.stddev == pytest.approx(statistics.pstdev(range(50, 61)))


def test_draws_repeat_per_seed_index_and_kind_and_differ_otherwise() -> None:
    n = Lengths.parse("100:30")
    a = [n.draw_for(1, i, "input") for i in range(20)]
    assert a == [n.draw_for(1, i, "input") for i in range(20)]  # the same on every run and every process
    assert a != [n.draw_for(2, i, "input") for i in range(20)]
    assert a != [n.draw_for(1, i, "output") for i in range(20)]  # input and output are drawn apart


@pytest.mark.parametrize("text", ["0", "-5", "abc", "100:-1", "100:x", "60-50", "0-10", "nan:3", "inf", "1e12", ""])
def test_nonsense_is_refused_with_the_forms_it_takes(text: str) -> None:
    with pytest.raises(ValueError, match="MEAN:STDDEV"):
        Lengths.parse(text)


def test_draw_takes_any_generator() -> None:
    u = Lengths.parse("1-3")
    assert {u.draw(random.Random(i)) for i in range(100)} == {1, 2, 3}


def test_a_spread_is_checked_at_its_reach_not_its_mean() -> None:
    """The issue's ``100:1e12``: a mean of 100 whose draws reach 3e12 tokens, refused naming the cap."""
    assert Lengths.parse("100:30").reach == 190 and Lengths.parse("50-150").reach == 150
    assert Lengths.parse("64").reach == 64
    with pytest.raises(TooLong, match=r"reaches 3,000,000,000,100 tokens \(MEAN \+ 3 STDDEV\), past ttft's cap"):
        Lengths.parse("100:1e12")
    with pytest.raises(TooLong, match="reaches 10,000,001 tokens, past ttft's cap of 10,000,000"):
        Lengths.parse(f"1-{MAX_TOKENS + 1}")
    assert Lengths.parse(f"{MAX_TOKENS - 30}:10").reach == MAX_TOKENS  # at the cap is allowed


def test_a_normal_never_draws_past_the_cap() -> None:
    wide = Lengths("normal", MAX_TOKENS / 2, MAX_TOKENS)  # as built in code, not parsed: the draw still caps it
    draws = [wide.draw_for(0, i, "input") for i in range(2000)]
    assert max(draws) == MAX_TOKENS and min(draws) == 1
