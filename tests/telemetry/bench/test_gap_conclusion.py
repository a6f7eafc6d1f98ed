"""The conclusion with the server's own TTFT histograms: the gap between ttft's TTFT and the server's that
grows with load is named (the client, the network or the front end, not the engine); one within the
buckets' resolution gets no verdict; one that holds is said to hold."""

from __future__ import annotations

from typing import Any

from ttft.telemetry.bench.conclusion import client_server_gap, conclusion

from tests.telemetry.bench.test_aggregate import _level


def _level_with(c: int, client: float, server: float | None, bucket: tuple[float, float | None]) -> dict[str, Any]:
    lv = _level(c, 10, ttft=client)
    if server is not None:
        lv["server_metrics"] = {
            "server": "vllm",
            "latency": {"ttft": {"p50": server, "p90": server, "p99": server, "count": 10,
                                 "p50_bucket_ms": list(bucket)}},
        }  # fmt: skip
    return lv


def test_a_gap_that_grows_with_load_names_what_is_outside_the_engine() -> None:
    levels = [
        _level_with(1, 50, 9, (5, 10)),
        _level_with(4, 90, 9, (5, 10)),
        _level_with(8, 160, 15, (10, 20)),
    ]
    text = client_server_gap(levels)
    assert text is not None
    assert text.startswith("The gap between ttft's TTFT and the server's own grew with load: p50 41 ms at 1 concurrent")
    assert "145 ms at 8 concurrent (160 against 15)" in text
    assert "the client, the network or the server's front end" in text and "not the engine" in text
    assert text in conclusion(levels)


def test_the_threshold_is_twenty_ms_or_half_the_lightest_gap() -> None:
    # a 100 ms gap at the lightest level must grow by more than 50 ms
    light = _level_with(1, 110, 10, (5, 10))
    assert "did not grow" in (client_server_gap([light, _level_with(8, 155, 10, (5, 10))]) or "")
    assert "grew with load" in (client_server_gap([light, _level_with(8, 170, 10, (5, 10))]) or "")
    # a small gap must grow by more than 20 ms
    held = client_server_gap([_level_with(1, 12, 10, (5, 10)), _level_with(8, 30, 10, (5, 10))])
    assert held is not None and "did not grow with load (2 ms at 1 concurrent, 20 ms at 8 concurrent)" in held


def test_a_gap_within_the_buckets_resolution_gets_no_verdict() -> None:
    # 410 ms against an interpolated 312 ms: the true p50 may be anywhere up to 500 ms
    levels = [_level_with(1, 16, 15, (10, 20)), _level_with(6, 410, 312, (250, 500))]
    assert client_server_gap(levels) is None
    # an upper bound of +Inf: nothing can be said either
    assert client_server_gap([_level_with(1, 16, 15, (10, 20)), _level_with(6, 900, 10, (10, None))]) is None


def test_without_two_levels_of_server_ttft_nothing_is_said() -> None:
    assert client_server_gap([_level_with(1, 50, 9, (5, 10)), _level_with(8, 160, None, (0, 0))]) is None
    assert client_server_gap([_level_with(8, 160, 15, (10, 20))]) is None
