"""The conclusion with the server's own gauges: whether its queue or the prefill took the time to the
first token, and the summary's and CSV's gauge fields."""

from __future__ import annotations

from typing import Any

from ttft.telemetry.bench import summary as bench_summary
from ttft.telemetry.bench.conclusion import conclusion, queue_or_prefill

from tests.telemetry.bench.test_aggregate import _level


def _gauged(c: int, ttft: float, waiting: tuple[float, float] | None, prompt_ms: float | None = None) -> dict[str, Any]:
    lv = _level(c, 10, ttft=ttft)
    if waiting is not None:
        lv["server_metrics"] = {
            "server": "vllm",
            "samples": 8,
            "running": {"mean": 4.0, "max": 4.0},
            "waiting": {"mean": waiting[0], "max": waiting[1]},
            "kv_cache_usage": {"mean": 0.4, "max": 0.5},
            "prefix_cache_hit_rate": 0.25,
        }
    if prompt_ms is not None:
        lv["server"] = {"prompt_ms": {"p50": prompt_ms}, "predicted_ms_per_token": {"p50": 10.0}}
    return lv


def test_a_queue_that_took_the_time_is_named() -> None:
    levels = [_gauged(1, 40, (0, 0)), _gauged(4, 45, (0, 0)), _gauged(8, 900, (3.6, 5))]
    text = queue_or_prefill(levels)
    assert text is not None
    assert text.startswith("At 8 concurrent the server's queue, not the prefill, took the time")
    assert "3.6 requests waited for a slot on average (up to 5" in text
    assert "TTFT p50 was 900 ms against a prefill of 40 ms (TTFT p50 at 1 concurrent)" in text
    assert text in conclusion(levels)


def test_the_servers_own_prefill_is_the_baseline_when_it_has_one() -> None:
    levels = [_gauged(1, 40, (0, 0), prompt_ms=35), _gauged(8, 900, (3.6, 5), prompt_ms=120)]
    text = queue_or_prefill(levels)
    assert text is not None and "against a prefill of 120 ms (as the server timed it)" in text


def test_ttft_that_grew_with_nothing_waiting_is_the_prefill() -> None:
    levels = [_gauged(1, 40, (0, 0)), _gauged(8, 300, (0, 0))]
    text = queue_or_prefill(levels)
    assert text is not None and "no request waited in the server's queue" in text
    assert "the prefill itself took longer" in text


def test_nothing_to_say_without_gauges_or_without_growth_or_with_an_ambiguous_queue() -> None:
    assert queue_or_prefill([_gauged(1, 40, None), _gauged(8, 900, None)]) is None  # no --server-metrics
    assert queue_or_prefill([_gauged(1, 40, (0, 0)), _gauged(8, 60, (2, 3))]) is None  # TTFT hardly grew
    assert queue_or_prefill([_gauged(1, 40, (0, 0)), _gauged(8, 900, (0.2, 1))]) is None  # a queue now and then
    assert queue_or_prefill([]) is None
    short = _gauged(8, 900, (0, 0))
    short["server_metrics"]["samples"] = 1  # one read, maybe as the level drained: no verdict
    assert queue_or_prefill([_gauged(1, 40, (0, 0)), short]) is None
    assert "queue, not the prefill" not in conclusion([_gauged(1, 40, None), _gauged(8, 900, None)])


def test_one_level_with_a_server_prefill_can_say_it_too() -> None:
    text = conclusion([_gauged(8, 900, (3.0, 4), prompt_ms=50)])
    assert text.startswith("At 8 concurrent:") and "the server's queue, not the prefill" in text


def test_the_summary_and_csv_carry_the_gauges() -> None:
    levels = [_gauged(1, 40, (0, 0)), _gauged(8, 900, (3.6, 5)), _gauged(16, 950, None)]
    s = bench_summary.summary(levels)
    assert s["levels"][1]["server_metrics"]["waiting"] == {"mean": 3.6, "max": 5}
    assert "server_metrics" not in s["levels"][2]
    row = bench_summary.csv_row(levels[1])
    assert (row["server_waiting_mean"], row["server_waiting_max"], row["server_running_mean"]) == (3.6, 5, 4.0)
    assert (row["server_kv_cache_usage_mean"], row["server_prefix_cache_hit_rate"]) == (0.4, 0.25)
    assert bench_summary.csv_row(levels[2])["server_waiting_mean"] is None
