"""telemetry.bench: per-level figures (aggregate), the typed requests, the conclusion and the summary, from
hand-made records with known timings."""

from __future__ import annotations

import numpy as np
import pytest
from ttft.telemetry.bench import aggregate as agg
from ttft.telemetry.bench import summary as bench_summary
from ttft.telemetry.bench.aggregate import aggregate_level
from ttft.telemetry.bench.arrivals import poisson_schedule
from ttft.telemetry.bench.conclusion import conclusion, plateau
from ttft.telemetry.bench.requests import BenchTurn, group_levels, read_bench
from ttft.telemetry.bench.slo import SLO, parse_duration_ms
from ttft.telemetry.bench.summary import summary


def rec(
    *,
    sent_at: float,
    ttft: float,
    tokens: int,
    tpot: float,
    status: str = "ok",
    level: float = 1,
    warmup: bool = False,
    input_tokens: int = 100,
) -> dict:
    """A ttft.turn/1-shaped dict: first token at ttft, then one token every tpot ms."""
    chunks = [[ttft + i * tpot, "text", 1] for i in range(tokens)] if status == "ok" else []
    last = chunks[-1][0] if chunks else None
    e2e = last
    return {
        "schema": "ttft.turn/1",
        "turn_index": 0,
        "status": status,
        "started_at": "2025-01-01T00:00:00.000+00:00",
        "error": None if status == "ok" else {"type": "APIConnectionError", "message": "x"},
        "events_ms": {"sent": 0.0, "first_token": ttft if chunks else None, "last_token": last, "end": (last or 5.0)},
        "metrics": {
            "ttft_ms": ttft if chunks else None,
            "ttfvt_ms": ttft if chunks else None,
            "tpot_ms": tpot if tokens > 1 and chunks else None,
            "e2e_ms": e2e,
        },
        "tokens": {"input": input_tokens, "output": tokens if chunks else 0, "source": "usage"},
        "chunks": chunks,
        "extra": {"bench": {"level": level, "mode": "concurrency", "sent_at_ms": sent_at, "warmup": warmup}},
    }


def typed(records: list[dict]) -> list[BenchTurn]:
    """Records as aggregation reads them; every hand-made one reads."""
    read = read_bench(records)
    assert read.unreadable == 0, read.message()
    return read.turns


def test_throughput_and_percentiles_from_known_timings() -> None:
    # Two users back to back: each request 100 ms TTFT + 9 x 10 ms = 190 ms, 10 tokens.
    recs = [rec(sent_at=i * 200.0, ttft=100, tokens=10, tpot=10) for i in range(5)]
    recs += [rec(sent_at=i * 200.0, ttft=100, tokens=10, tpot=10) for i in range(5)]
    recs.append(rec(sent_at=0, ttft=1, tokens=3, tpot=1, warmup=True))  # ignored
    a = aggregate_level(typed(recs), level=2)
    assert a["requests"] == 10 and a["completed"] == 10 and a["failed"] == 0
    # first send 0, last response 800 + 190 = 990 ms
    assert a["duration_s"] == pytest.approx(0.99)
    assert a["output_throughput"] == pytest.approx(100 / 0.99)
    assert a["request_throughput"] == pytest.approx(10 / 0.99)
    assert a["ttft_ms"]["p50"] == pytest.approx(100)
    assert a["tpot_ms"]["p99"] == pytest.approx(10)
    assert a["itl_ms"]["mean"] == pytest.approx(10)
    assert a["per_user_tokens_per_s"]["p50"] == pytest.approx(100)
    assert a["e2e_ms"]["p50"] == pytest.approx(190)
    assert a["total_input_tokens"] == 1000 and a["total_output_tokens"] == 100


def test_goodput_counts_errors_as_misses() -> None:
    recs = [
        rec(sent_at=0, ttft=100, tokens=5, tpot=10),  # good
        rec(sent_at=0, ttft=900, tokens=5, tpot=10),  # TTFT miss
        rec(sent_at=0, ttft=100, tokens=5, tpot=80),  # TPOT miss
        rec(sent_at=0, ttft=0, tokens=0, tpot=0, status="error"),  # error = miss
    ]
    slo = SLO.parse("ttft=500ms,tpot=50ms,e2e=10s")
    assert slo == SLO(500, 50, 10_000)
    a = aggregate_level(typed(recs), level=4, slo=slo)
    assert a["good"] == 1
    assert a["failed"] == 1
    assert a["errors"] == {"APIConnectionError": 1}
    assert a["goodput_fraction"] == pytest.approx(0.25)
    assert a["goodput"] == pytest.approx(1 / a["duration_s"])
    assert a["vllm"]["request_goodput"] == a["goodput"]


@pytest.mark.parametrize(
    ("text", "ms"), [("500ms", 500), ("10s", 10_000), ("1.5s", 1500), ("250", 250), ("2m", 120_000)]
)
def test_parse_duration(text: str, ms: float) -> None:
    assert parse_duration_ms(text) == ms


def test_bad_slo_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="ttft=500ms"):
        SLO.parse("latency=5")
    with pytest.raises(ValueError, match="duration"):
        SLO.parse("ttft=fast")


def test_vllm_keys_present_and_consistent() -> None:
    recs = [rec(sent_at=i * 50.0, ttft=50 + i, tokens=8, tpot=5 + i) for i in range(20)]
    a = aggregate_level(typed(recs), level=4)
    v = a["vllm"]
    for k in ("duration", "completed", "failed", "total_input_tokens", "total_output_tokens"):
        assert k in v
    for short in ("ttft", "tpot", "itl", "e2el"):
        for stat in ("mean", "median", "std", "p90", "p99"):
            assert f"{stat}_{short}_ms" in v, f"{stat}_{short}_ms"
    assert v["request_throughput"] == a["request_throughput"]
    assert v["median_ttft_ms"] == a["ttft_ms"]["p50"]
    assert v["std_tpot_ms"] == pytest.approx(float(np.std([5 + i for i in range(20)])))
    assert v["max_concurrency"] == 4
    s = summary([a], meta={"model": "m"})
    assert s["model"] == "m" and s["median_ttft_ms"] == v["median_ttft_ms"] and len(s["levels"]) == 1


def test_poisson_schedule_statistics_and_seed() -> None:
    rate, n = 20.0, 4000
    t = poisson_schedule(rate, n, seed=7)
    assert t[0] == 0.0 and len(t) == n
    assert t == poisson_schedule(rate, n, seed=7)
    assert t != poisson_schedule(rate, n, seed=8)
    gaps = np.diff(t)
    assert gaps.mean() == pytest.approx(1 / rate, rel=0.05)
    # Exponential gaps: coefficient of variation 1; the count in 1 s windows is Poisson (var == mean).
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, abs=0.06)
    counts = np.bincount(np.floor(np.asarray(t)).astype(int))[:-1]
    assert counts.mean() == pytest.approx(rate, rel=0.06)
    assert counts.var() / counts.mean() == pytest.approx(1.0, abs=0.3)
    with pytest.raises(ValueError):
        poisson_schedule(0, 3, seed=1)


def _level(c: int, tpot: float, ttft: float = 50, n: int = 20, tokens: int = 16) -> dict:
    recs = []
    for _user in range(c):
        t = 0.0
        for _ in range(n // c):
            recs.append(rec(sent_at=t, ttft=ttft, tokens=tokens, tpot=tpot, level=c))
            t += ttft + (tokens - 1) * tpot
    return aggregate_level(typed(recs), level=c)


def test_conclusion_names_plateau_and_what_users_pay() -> None:
    levels = [_level(1, 10), _level(2, 12), _level(4, 16), _level(8, 32, ttft=400)]
    tps = [lv["output_throughput"] for lv in levels]
    assert tps[0] < tps[1] < tps[2]
    assert plateau(levels) == 2
    text = conclusion(levels)
    assert "stops growing" in text and "4 concurrent" in text
    assert "per-user speed is 62.5 tokens/s against 100.0" in text
    assert "Each user pays" in text


def test_conclusion_when_still_growing_and_client_bound() -> None:
    a, b = _level(1, 10), _level(2, 10)
    b["client_bottleneck"] = agg.client_bottleneck({"loop_lag_ms": {"p99": 12.0}, "cpu_percent": 40})
    assert b["client_bottleneck"] and "lag" in b["client_bottleneck"]
    text = conclusion([a, b])
    assert "had not stopped growing" in text
    assert "client itself was a bottleneck at 2 concurrent" in text


def test_client_bottleneck_thresholds() -> None:
    assert agg.client_bottleneck({"loop_lag_ms": {"p99": 1.0}, "cpu_percent": 30}) is None
    assert "CPU" in (agg.client_bottleneck({"loop_lag_ms": {"p99": 1.0}, "cpu_percent": 97}) or "")
    assert agg.client_bottleneck(None) is None


def test_group_levels_and_csv_row() -> None:
    recs = [rec(sent_at=0, ttft=10, tokens=4, tpot=2, level=lv) for lv in (1, 1, 2)]
    groups = group_levels(typed(recs))
    assert [(m, lv, len(r)) for m, lv, r in groups] == [("concurrency", 1.0, 2), ("concurrency", 2.0, 1)]
    row = bench_summary.csv_row(aggregate_level(groups[0][2], level=1))
    assert set(row) == set(bench_summary.CSV_COLUMNS)
    assert row["ttft_p50_ms"] == pytest.approx(10)


def test_empty_level_does_not_crash() -> None:
    a = aggregate_level([], level=1)
    assert a["completed"] == 0 and a["output_throughput"] is None and a["vllm"]["request_rate"] == "inf"
    assert "nothing to conclude" in conclusion([a])


def test_server_timings_of_every_server_kind_are_summarised() -> None:
    # telemetry.server.timings reads each server's own names: llama-server's ms, Ollama's ns and
    # the in-process engine's figures land in one summary; a server value of the wrong type
    # (an old or odd log) is no figure, not a traceback.
    servers = [
        {"llama-server": {"prompt_ms": 30.0, "predicted_n": 5, "predicted_ms": 40.0}},
        {"ollama": {"prompt_eval_duration": 20_000_000, "eval_count": 11, "eval_duration": 100_000_000}},
        {"llama.cpp": {"prompt_eval_ms": 10.0, "decode_tokens": 3, "decode_ms": 30.0}},
        {"llama-server": {"prompt_ms": "fast", "predicted_n": 1, "predicted_ms": 9.0}},  # one token: no per-token
    ]
    recs = []
    for server in servers:
        r = rec(sent_at=0, ttft=10, tokens=4, tpot=5)
        r["server"] = server
        recs.append(r)
    s = aggregate_level(typed(recs), level=1)["server"]
    assert s["prompt_ms"]["p50"] == pytest.approx(20.0) and s["prompt_ms"]["max"] == pytest.approx(30.0)
    per_token = s["predicted_ms_per_token"]
    assert per_token["min"] == pytest.approx(8.0) and per_token["max"] == pytest.approx(10.0)
    assert per_token["mean"] == pytest.approx((8.0 + 100 / 11 + 10.0) / 3)  # ns read as ms, 1-token left out
    assert aggregate_level(typed([rec(sent_at=0, ttft=10, tokens=4, tpot=5)]), level=1)["server"] is None


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda d: d["extra"].update(bench="level 2"), "extra.bench"),
        (lambda d: d["extra"]["bench"].update(warmup="no"), "extra.bench.warmup"),
        (lambda d: d["extra"]["bench"].update(level="2"), "extra.bench.level"),
        (lambda d: d["metrics"].update(ttft_ms="fast"), "metrics.ttft_ms"),
        (lambda d: d.pop("turn_index"), "turn_index"),
    ],
)
def test_a_request_that_does_not_read_is_counted_and_named(change, named: str) -> None:
    good = [rec(sent_at=0, ttft=10, tokens=4, tpot=2) for _ in range(3)]
    odd = rec(sent_at=0, ttft=10, tokens=4, tpot=2)
    change(odd)
    read = read_bench([good[0], odd, good[1], "not a record", good[2]])
    assert len(read.turns) == 3 and read.unreadable == 2
    assert named in (read.message() or "") and "2 bench records" in (read.message() or "")
    assert aggregate_level(read.turns, level=1)["requests"] == 3
    assert read_bench(good).message() is None


def test_a_record_no_bench_sent_has_no_level() -> None:
    plain = rec(sent_at=0, ttft=10, tokens=4, tpot=2)
    del plain["extra"]
    (turn,) = typed([plain])
    assert turn.bench.level is None and not turn.bench.warmup
    assert group_levels([turn]) == []


def _level_p50s(rate: float, tps: float, per_user: float, tpot: float, ttft: float) -> dict:
    """A rate level as the conclusion reads it: throughput and the p50s only."""
    return {
        "mode": "rate",
        "level": rate,
        "completed": 10,
        "failed": 0,
        "output_throughput": tps,
        "per_user_tokens_per_s": {"p50": per_user},
        "tpot_ms": {"p50": tpot},
        "ttft_ms": {"p50": ttft},
    }


def test_conclusion_calls_an_unchanged_per_user_speed_no_price() -> None:
    # An idle batching fake at --rate 5,10: each user's speed held (TPOT p50 5.1 ms at both), so
    # there is nothing to pay and "1.0x slower" would be a false alarm.
    text = conclusion([_level_p50s(5, 47.6, 196.9, 5.1, 23.0), _level_p50s(10, 78.5, 194.3, 5.1, 23.0)])
    assert "pays for it" not in text and "1.0x slower" not in text
    assert "keeps their speed" in text and "194.3 tokens/s against 196.9" in text


def test_conclusion_names_a_real_slowdown_as_its_price() -> None:
    text = conclusion([_level_p50s(1, 150.0, 200.0, 5.0, 25.0), _level_p50s(4, 270.0, 160.0, 6.2, 130.0)])
    assert "Each user pays for it" in text and "1.2x slower" in text


def test_a_levels_cost_is_the_sum_of_its_priced_requests() -> None:
    cost = {"input_usd": 0.001, "output_usd": 0.002, "total_usd": 0.003, "priced_as": "openai:m", "source": "config"}
    records = [
        {**rec(sent_at=0, ttft=10, tokens=3, tpot=1), "cost": cost},
        {**rec(sent_at=1, ttft=10, tokens=3, tpot=1, status="error"), "cost": cost},  # billed even though it failed
        rec(sent_at=2, ttft=10, tokens=3, tpot=1),  # not priced
        {**rec(sent_at=0, ttft=10, tokens=3, tpot=1, warmup=True), "cost": cost},  # a warm-up is not measured
    ]
    level = aggregate_level(typed(records), level=1)
    assert level["cost_usd"] == {
        "total_usd": pytest.approx(0.006),
        "input_usd": pytest.approx(0.002),
        "output_usd": pytest.approx(0.004),
        "priced": 2,
        "unpriced": 1,
    }
    out = summary([level])
    assert out["levels"][0]["total_cost_usd"] == pytest.approx(0.006)
    assert bench_summary.csv_row(level)["total_cost_usd"] == pytest.approx(0.006)
    unpriced = aggregate_level(typed([rec(sent_at=0, ttft=10, tokens=3, tpot=1)]), level=1)
    assert summary([unpriced])["levels"][0]["total_cost_usd"] is None  # not $0: nothing was priced
