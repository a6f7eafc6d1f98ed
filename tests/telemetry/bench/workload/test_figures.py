"""telemetry.bench.workload.figures: a level's lengths, prefix cache, cost by turn and arrivals, from
hand-made records with known values."""

from __future__ import annotations

import pytest
from ttft.telemetry.bench.aggregate import aggregate_level
from ttft.telemetry.bench.requests import BenchTurn, read_bench


def rec(
    *,
    ttft: float,
    n_in: int,
    cached: int | None = None,
    bench: dict | None = None,
    server: dict | None = None,
    status: str = "ok",
) -> dict:
    chunks = [{"t_ms": ttft + i, "kind": "text", "tokens": 1} for i in range(4)] if status == "ok" else []
    return {
        "schema": "ttft.turn/2",
        "session_id": "b",
        "turn_index": 0,
        "status": status,
        "started_at": "2026-01-01T00:00:00.000+00:00",
        "events_ms": {"sent": 0.0, "first_token": ttft, "last_token": ttft + 3, "end": ttft + 4},
        "metrics": {"ttft_ms": ttft if status == "ok" else None, "tpot_ms": 1.0, "e2e_ms": ttft + 3},
        "tokens": {"input": n_in, "cached_input": cached, "output": 4, "source": "usage"},
        "server": server,
        "chunks": chunks,
        "extra": {"bench": {"level": 2, "mode": "concurrency", "sent_at_ms": 0.0, **(bench or {})}},
    }


def typed(records: list[dict]) -> list[BenchTurn]:
    read = read_bench(records)
    assert read.unreadable == 0, read.message()
    return read.turns


def test_a_plain_level_gains_no_workload_keys() -> None:
    a = aggregate_level(typed([rec(ttft=10, n_in=100)]))
    assert not {"lengths", "by_turn", "arrivals"} & set(a)


def test_cache_hits_and_misses_are_split_by_the_share_served_from_cache() -> None:
    rows = [
        rec(ttft=100, n_in=400, cached=0, bench={"prefix": 0}),  # the first of its prefix: a miss
        rec(ttft=30, n_in=400, cached=256, bench={"prefix": 0}),
        rec(ttft=34, n_in=400, cached=256, bench={"prefix": 1}),
        rec(ttft=90, n_in=400, cached=16, bench={"prefix": 1}),  # a template's block: not a hit
        rec(ttft=10, n_in=400, status="error", bench={"prefix": 1}),  # not completed: left out
    ]
    c = aggregate_level(typed(rows))["prefix_cache"]
    assert (c["requests"], c["hits"], c["with_prefix"]) == (4, 2, 5)
    assert c["hit_fraction"] == 0.5 and c["cached_input_tokens"] == 528
    assert c["ttft_hit_ms"]["p50"] == pytest.approx(32.0) and c["ttft_miss_ms"]["p50"] == pytest.approx(95.0)


def test_llama_server_cache_n_stands_in_when_usage_says_nothing() -> None:
    timings = {"llama-server": {"prompt_n": 20, "prompt_ms": 5.0, "cache_n": 300, "predicted_n": 4}}
    c = aggregate_level(typed([rec(ttft=12, n_in=320, server=timings)]))["prefix_cache"]
    assert c["cached_input_tokens"] == 300 and c["hits"] == 1


def test_by_turn_shows_what_a_growing_context_costs() -> None:
    rows = []
    for conv in range(3):
        for k, (ttft, n_in, prompt_ms) in enumerate(((20, 100, 10.0), (35, 250, 22.0), (50, 400, 35.0)), 1):
            server = {"llama-server": {"prompt_ms": prompt_ms, "prompt_n": n_in, "predicted_n": 4}}
            bench = {"conversation": conv * 3, "turn": k, "turns": 3, "input_tokens": 100, "output_tokens": 4}
            rows.append(rec(ttft=ttft + conv, n_in=n_in, server=server, bench=bench))
    turns = aggregate_level(typed(rows))["by_turn"]
    assert [t["turn"] for t in turns] == [1, 2, 3] and all(t["completed"] == 3 for t in turns)
    assert [t["ttft_ms"]["p50"] for t in turns] == [21, 36, 51]
    assert [t["server_prefill_ms"]["p50"] for t in turns] == [10.0, 22.0, 35.0]
    assert [t["input_tokens"]["p50"] for t in turns] == [100, 250, 400]


def test_a_failed_turn_cuts_its_conversation_short() -> None:
    rows = [
        rec(ttft=10, n_in=10, bench={"conversation": 0, "turn": 1, "turns": 2}),
        rec(ttft=10, n_in=20, bench={"conversation": 0, "turn": 2, "turns": 2}),
        rec(ttft=10, n_in=10, status="error", bench={"conversation": 2, "turn": 1, "turns": 2}),
    ]
    assert aggregate_level(typed(rows))["conversations"] == {"conversations": 2, "cut_short": 1, "requests": 3}


def test_lengths_drawn_against_lengths_received() -> None:
    rows = [rec(ttft=10, n_in=90 + i, bench={"input_tokens": 80 + 10 * i, "output_tokens": 8}) for i in range(5)]
    lengths = aggregate_level(typed(rows))["lengths"]
    assert lengths["input_tokens"]["mean"] == 100 and lengths["input_tokens"]["std"] == pytest.approx(14.142, 1e-3)
    assert lengths["output_tokens"]["p50"] == 8
    assert lengths["output_tokens_received"]["p50"] == 4  # the server stopped sooner than asked
    assert lengths["input_tokens_sent"]["min"] == 90


def test_arrivals_say_how_late_the_client_sent() -> None:
    rows = [
        rec(ttft=10, n_in=10, bench={"scheduled_at_ms": at, "sent_at_ms": at + late})
        for at, late in ((0, 0.5), (100, 1.0), (200, 2.0), (300, 12.0))
    ]
    arr = aggregate_level(typed(rows))["arrivals"]
    assert arr["scheduled"] == 4 and arr["late_ms"]["max"] == 12.0
    assert arr["on_time_fraction"] == 0.75
