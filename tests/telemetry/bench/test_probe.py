"""telemetry.bench.probe: when the user beside the load (``--probe-rate``) sends, and its figures kept apart
from the load's, from hand-made records with known timings."""

from __future__ import annotations

import math

import pytest
from ttft.telemetry.bench import probe
from ttft.telemetry.bench import summary as bench_summary
from ttft.telemetry.bench.aggregate import aggregate_level
from ttft.telemetry.bench.conclusion import conclusion

from tests.telemetry.bench.test_aggregate import rec, typed


def probe_rec(*, sent_at: float, ttft: float, status: str = "ok", level: float = 1, rate: float = 2.0) -> dict:
    r = rec(sent_at=sent_at, ttft=ttft, tokens=5, tpot=40, status=status, level=level)
    r["extra"]["bench"].update(probe=True, probe_rate=rate, run_id="r", worker=0)
    return r


@pytest.mark.parametrize("rate", [0.0, -1.0, math.nan, -math.inf])
def test_a_rate_that_is_no_rate_is_refused(rate: float) -> None:
    assert probe.check_rate(rate) == f"expected requests/s above 0, got {rate:g}"


@pytest.mark.parametrize("rate", [1000.5, 1e6, math.inf])
def test_a_rate_past_one_user_is_refused_naming_the_bound(rate: float) -> None:
    assert probe.check_rate(rate) == f"{rate:g}/s is a load, not one user: at most 1000/s"


@pytest.mark.parametrize("rate", [0.01, 0.5, 1000.0])
def test_a_users_rate_is_taken(rate: float) -> None:
    assert probe.check_rate(rate) is None


def sends(rate: float, durations: list[float]) -> list[float]:
    """When each probe leaves, given how long each one's answer takes (the driver's loop, without a clock)."""
    at, out = probe.first_at_s(rate), []
    for d in durations:
        out.append(at)
        at = probe.next_at_s(at, at + d, rate)
    return out


def test_probes_go_a_gap_apart_starting_half_a_gap_in() -> None:
    assert sends(2.0, [0.1] * 4) == [0.25, 0.75, 1.25, 1.75]


def test_one_user_never_overlaps_itself_a_slow_answer_delays_the_next_probe() -> None:
    # The second answer takes 1.3 s (past the 0.5 s gap): the third goes when it ends, the fourth a gap later.
    got = sends(2.0, [0.1, 1.3, 0.1, 0.1])
    assert got == pytest.approx([0.25, 0.75, 2.05, 2.55])
    ends = [s + d for s, d in zip(got, [0.1, 1.3, 0.1, 0.1], strict=True)]
    assert all(nxt >= end for end, nxt in zip(ends, got[1:], strict=False))


def test_probe_numbers_are_unique_and_apart_from_the_loads_and_the_warm_ups() -> None:
    numbers = [probe.probe_index(level, k) for level in range(5) for k in range(1000)]
    assert len(set(numbers)) == len(numbers)
    assert min(numbers) > 10**6  # the warm-up's numbers start at 10**6, the load's at 0
    assert probe.probe_index(-1, 0) == probe.PROBE_INDEX  # never below the probes' base


def load_recs(level: float = 1) -> list[dict]:
    return [rec(sent_at=i * 200.0, ttft=100, tokens=10, tpot=10, level=level) for i in range(6)]


def test_the_loads_figures_are_the_same_with_the_probe_users_records_beside_them() -> None:
    load = load_recs()
    probes = [probe_rec(sent_at=250.0 + 500 * k, ttft=300 + 100 * k) for k in range(3)]
    alone = aggregate_level(typed(load), level=1)
    beside = aggregate_level(typed(load + probes), level=1, probe_rate=2.0)
    assert {k: v for k, v in beside.items() if k != "probe"} == alone
    assert beside["requests"] == 6 and beside["ttft_ms"]["p50"] == 100  # not the probes' 300-500 ms
    p = beside["probe"]
    assert (p["rate"], p["users"], p["requests"], p["ok"], p["errors"]) == (2.0, 1, 3, 3, 0)
    assert p["ttft_ms"]["p50"] == 400 and p["ttft_ms"]["max"] == 500
    assert p["tpot_ms"]["p50"] == 40 and p["e2e_ms"]["p50"] == 400 + 4 * 40


def test_a_failed_probe_is_counted_apart_and_leaves_the_percentiles() -> None:
    probes = [probe_rec(sent_at=0, ttft=300), probe_rec(sent_at=500, ttft=0, status="error")]
    a = aggregate_level(typed(load_recs() + probes), level=1)
    assert a["failed"] == 0  # the load's
    p = a["probe"]
    assert (p["requests"], p["ok"], p["errors"], p["rate"]) == (2, 1, 1, 2.0)  # the rate read from the tags
    assert p["ttft_ms"]["p50"] == 300


def test_a_level_the_probe_never_reached_says_so_and_one_without_a_probe_user_has_no_block() -> None:
    a = aggregate_level(typed(load_recs()), level=1, probe_rate=0.5)
    assert a["probe"]["requests"] == 0 and "before the first one's moment (1 s in)" in a["probe"]["note"]
    assert probe.probe_sentence(a) == (
        "one user at 0.5 req/s beside this load: no probe was sent (the load ended before the first one's moment)"
    )
    assert "probe" not in aggregate_level(typed(load_recs()), level=1)


def test_the_printed_line_the_summary_and_the_csv() -> None:
    levels = []
    for c, base in ((1, 800.0), (4, 1400.0)):
        probes = [probe_rec(sent_at=250.0 + 500 * k, ttft=base + 10 * k, level=c, rate=0.5) for k in range(5)]
        levels.append(aggregate_level(typed(load_recs(c) + probes), level=c, probe_rate=0.5))
    assert probe.probe_sentence(levels[0]) == (
        "one user at 0.5 req/s beside this load: TTFT p50 820 ms (p90 836 ms), TPOT p50 40 ms (5 requests)"
    )
    assert (probe.probe_sentence(levels[1]) or "").endswith("TTFT p50 1.4 s (p90 1.4 s), TPOT p50 40 ms (5 requests)")
    s = bench_summary.summary(levels)
    assert [lv["probe"]["requests"] for lv in s["levels"]] == [5, 5]
    assert (
        "One user at 0.5 req/s beside the load waited TTFT p50 820 ms at 1 concurrent and 1.4 s at 4 concurrent"
        in (s["conclusion"])
    )
    row = bench_summary.csv_row(levels[1])
    assert set(row) == set(bench_summary.CSV_COLUMNS)
    assert (row["probe_rate"], row["probe_requests"], row["probe_ttft_p50_ms"]) == (0.5, 5, 1420.0)
    plain = bench_summary.csv_row(aggregate_level(typed(load_recs()), level=1))
    assert all(plain[c] is None for c in probe.CSV_COLUMNS)
    assert "One user" not in conclusion([aggregate_level(typed(load_recs()), level=1)])


def test_merged_runs_probe_users_are_counted() -> None:
    probes = [probe_rec(sent_at=0, ttft=300), probe_rec(sent_at=10, ttft=320)]
    probes[1]["extra"]["bench"]["run_id"] = "other-machine"
    a = aggregate_level(typed(load_recs() + probes), level=1)
    assert a["probe"]["users"] == 2
    assert (probe.probe_sentence(a) or "").startswith("2 probe users at 2 req/s each beside this load: TTFT p50 310 ms")


@pytest.mark.parametrize(
    "block",
    [
        "fast",
        ["a"],
        {"rate": "2", "requests": "many", "ttft_ms": "slow", "tpot_ms": {"p50": [1]}, "users": -3},
        {"rate": math.nan, "requests": 3, "ok": 3, "ttft_ms": {"p50": "1e9"}, "errors": True},
    ],
)
def test_a_probe_block_from_disk_that_does_not_read_is_no_figure_never_a_traceback(block: object) -> None:
    level = {"probe": block}
    p = probe.read_probe(level)
    if not isinstance(block, dict):
        assert p is None and probe.probe_sentence(level) is None
        return
    assert p is not None and p["rate"] is None and p["users"] == 1 and p["ttft_ms"]["p50"] is None
    assert isinstance(probe.probe_sentence(level), str)
    assert probe.csv_cells(level)["probe_ttft_p50_ms"] is None


def test_merged_runs_count_their_load_alone_and_their_probe_users_apart() -> None:
    from ttft.telemetry.bench.merge import Part, union_level

    parts = []
    for run in ("a", "b"):
        recs = [*load_recs(), probe_rec(sent_at=250, ttft=300), probe_rec(sent_at=750, ttft=320)]
        for r in recs:
            r["extra"]["bench"]["run_id"] = run
        parts.append(Part(run, 1, typed(recs)))
    merged = union_level("concurrency", parts)
    assert [r.requests for r in merged.parts] == [6, 6]
    a = aggregate_level(merged.turns, level=merged.level, mode="concurrency")
    assert a["requests"] == 12 and a["probe"]["requests"] == 4 and a["probe"]["users"] == 2
