"""The server's own gauges: each server's names mapped onto ttft's, a level's scrapes summarised, and
what a summary or a record holds read back without trusting it."""

from __future__ import annotations

import math

import pytest
from ttft.telemetry.server import gauges as g

VLLM = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 2.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 4.0
vllm:num_requests_waiting{engine="1",model_name="m"} NaN
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.7
# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 1000.0
vllm:prefix_cache_queries_created{engine="0",model_name="m"} 1.7e9
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 250.0
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="0.001",model_name="m"} 0.0
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 9.0
vllm:time_to_first_token_seconds_sum{model_name="m"} 1.5
vllm:time_to_first_token_seconds_count{model_name="m"} 9.0
"""

# As llama-server build 11434 (--metrics) answered on this machine, after two requests.
LLAMA = """# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed, excluding cached tokens
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 38
# HELP llamacpp:prompt_tokens_cached_total Number of prompt tokens reused from the cache
# TYPE llamacpp:prompt_tokens_cached_total counter
llamacpp:prompt_tokens_cached_total 36
# TYPE llamacpp:prompt_seconds_total counter
llamacpp:prompt_seconds_total 2.03001
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 40
# TYPE llamacpp:tokens_predicted_seconds_total counter
llamacpp:tokens_predicted_seconds_total 10.0582
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 2
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 1
# TYPE llamacpp:n_busy_slots_per_decode gauge
llamacpp:n_busy_slots_per_decode 1
# HELP llamacpp:n_tokens_max Largest observed sequence length (prompt + generation)
# TYPE llamacpp:n_tokens_max counter
llamacpp:n_tokens_max 56
"""

SGLANG = """# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m",tp_rank="0"} 6.0
sglang:num_running_reqs{model_name="m",tp_rank="1"} 6.0
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="m",tp_rank="0"} 2.0
sglang:num_queue_reqs{model_name="m",tp_rank="1"} 2.0
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="m"} 0.28
# TYPE sglang:cache_hit_rate gauge
sglang:cache_hit_rate{model_name="m"} 0.75
"""

TGI = "# TYPE tgi_queue_size gauge\ntgi_queue_size 5\n# TYPE tgi_batch_current_size gauge\ntgi_batch_current_size 8\n"


def _read(text: str) -> tuple[g.Dialect, g.Reading]:
    samples = g.parse(text)
    d = g.dialect_of(samples)
    assert d is not None
    return d, g.reading(samples, d)


def test_vllm_is_summed_over_its_engines_and_only_the_mapped_lines_are_parsed() -> None:
    samples = g.parse(VLLM)
    assert not any("time_to_first_token" in name for name in samples)  # the histogram never reached the parser
    d, r = _read(VLLM)
    assert d.name == "vllm"
    assert r.running == 5.0  # two engines' batches
    assert r.waiting == 4.0  # a NaN series is no count
    assert r.kv_cache_usage == pytest.approx(0.6)  # a share: averaged over the engines, not summed
    assert (r.prefix_hits, r.prefix_queries) == (250.0, 1000.0)


def test_older_vllm_names_its_kv_gauge_otherwise() -> None:
    old = VLLM.replace("kv_cache_usage_perc", "gpu_cache_usage_perc")
    assert _read(old)[1].kv_cache_usage == pytest.approx(0.6)


def test_llama_server_queue_and_prefix_counters_and_no_kv() -> None:
    d, r = _read(LLAMA)
    assert d.name == "llama-server"
    assert (r.running, r.waiting, r.kv_cache_usage) == (2.0, 1.0, None)
    # its prompt_tokens_total excludes the cached ones: the denominator is both
    assert (r.prefix_hits, r.prefix_queries) == (36.0, 74.0)


def test_sglang_counts_a_tensor_parallel_queue_once() -> None:
    d, r = _read(SGLANG)
    assert d.name == "sglang"
    assert (r.running, r.waiting) == (6.0, 2.0)  # tp_rank 1 repeats rank 0
    assert r.kv_cache_usage == pytest.approx(0.28) and r.prefix_hit_rate == pytest.approx(0.75)


def test_tgi_has_a_queue_and_a_batch() -> None:
    d, r = _read(TGI)
    assert (d.name, r.waiting, r.running, r.kv_cache_usage) == ("tgi", 5.0, 8.0, None)


def test_untrusted_values_are_left_out() -> None:
    text = (
        "vllm:num_requests_running -3\n"  # no count
        "vllm:num_requests_waiting +Inf\n"
        "vllm:kv_cache_usage_perc 71\n"  # no share
    )
    _, r = _read(text)
    assert (r.running, r.waiting, r.kv_cache_usage) == (None, None, None)


@pytest.mark.parametrize(
    "text",
    ["<html><body>404 Not Found</body></html>", '{"detail": "Not Found"}', ""],
)
def test_a_page_that_is_not_prometheus_is_said(text: str) -> None:
    assert g.parse(text) == {}  # nothing of a mapped name: not even parsed
    with pytest.raises(g.NotPrometheus):
        g.check_text(text)


def test_a_broken_line_of_a_mapped_name_is_said_not_raised_raw() -> None:
    with pytest.raises(g.NotPrometheus, match="not Prometheus text"):
        g.parse('vllm:num_requests_running{model_name="m" 3\n')


def test_other_prometheus_text_parses_but_names_no_server() -> None:
    text = "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 12.5\n"
    g.check_text(text)  # valid Prometheus ...
    assert g.dialect_of(g.parse(text)) is None  # ... of no server ttft maps


def _scrape(t_ms: float, text: str) -> g.Scrape:
    d = g.dialect_of(g.parse(text))
    assert d is not None
    return g.scrape(text, int(t_ms * 1e6), d)


def _vllm(running: int, waiting: int, kv: float, queries: float, hits: float) -> str:
    return (
        f"vllm:num_requests_running {running}\nvllm:num_requests_waiting {waiting}\n"
        f"vllm:kv_cache_usage_perc {kv}\n# TYPE vllm:prefix_cache_queries_total counter\n"
        f"vllm:prefix_cache_queries_total {queries}\n# TYPE vllm:prefix_cache_hits_total counter\n"
        f"vllm:prefix_cache_hits_total {hits}\n"
    )


VLLM_DIALECT = g.DIALECTS[0]


def test_level_summary_means_the_reads_during_the_level_and_rates_the_counters_over_it() -> None:
    before = _scrape(0, _vllm(0, 0, 0.0, 100, 10))  # idle edges: not in the means
    during = tuple(_scrape(250 * k, _vllm(4, w, 0.2 * w, 100, 10)) for k, w in ((1, 1), (2, 3), (3, 2)))
    after = _scrape(1000, _vllm(0, 0, 0.0, 500, 210))
    s = g.level_summary(g.LevelScrapes(VLLM_DIALECT, before, during, after))
    assert s["server"] == "vllm" and s["samples"] == 3 and s["interval_ms"] == pytest.approx(250)
    assert s["running"] == {"mean": 4.0, "max": 4.0}
    assert s["waiting"] == {"mean": 2.0, "max": 3.0}
    assert s["kv_cache_usage"]["mean"] == pytest.approx(0.4) and s["kv_cache_usage"]["max"] == pytest.approx(0.6)
    assert s["prefix_cache_hit_rate"] == pytest.approx(200 / 400)  # over the level, not since the server started
    assert "failed_reads" not in s


def test_a_restarted_server_gives_no_hit_rate_and_a_short_level_no_means() -> None:
    before = _scrape(0, _vllm(0, 0, 0.0, 900, 500))
    after = _scrape(100, _vllm(0, 0, 0.0, 50, 5))  # counters went back: a restart
    s = g.level_summary(g.LevelScrapes(VLLM_DIALECT, before, (), after, failed=2))
    assert s["prefix_cache_hit_rate"] is None
    assert s["samples"] == 0 and s["running"] is None and s["waiting"] is None and s["interval_ms"] is None
    assert s["failed_reads"] == 2
    read = g.read_level({"server_metrics": s})
    assert read is not None and read.waiting is None and read.samples == 0


def test_llama_server_keeps_its_counters_over_the_level() -> None:
    before = _scrape(0, LLAMA)
    after_text = LLAMA.replace("tokens_predicted_total 40", "tokens_predicted_total 240").replace(
        "tokens_predicted_seconds_total 10.0582", "tokens_predicted_seconds_total 14.0582"
    )
    mid = _scrape(250, LLAMA)
    s = g.level_summary(g.LevelScrapes(g.DIALECTS[2], before, (mid,), _scrape(500, after_text)))
    assert s["tokens_predicted_total"] == 200  # a counter: the level's share
    assert s["server_decode_tokens_per_s"] == pytest.approx(50.0)
    assert s["n_busy_slots_per_decode"] == 1  # a gauge: as last read
    assert s["n_tokens_max"] == 56 and "n_tokens_max_total" not in s  # typed a counter, named as a gauge
    assert s["waiting"] == {"mean": 1.0, "max": 1.0} and s["kv_cache_usage"] is None
    assert s["prefix_cache_hit_rate"] is None  # no prompt in between: 0 of 0 is no rate


def test_sglang_hit_rate_is_its_own_mean_over_the_level() -> None:
    a = _scrape(0, SGLANG)
    b = _scrape(250, SGLANG.replace('cache_hit_rate{model_name="m"} 0.75', 'cache_hit_rate{model_name="m"} 0.25'))
    s = g.level_summary(g.LevelScrapes(g.DIALECTS[1], None, (a, b), None))
    assert s["prefix_cache_hit_rate"] == pytest.approx(0.5)


@pytest.mark.parametrize(
    "metrics",
    [
        None,
        "text",
        {"tokens_predicted_total": 24.0},  # an older run's llama-server counters alone
        [],
    ],
)
def test_read_level_without_gauges_is_none(metrics: object) -> None:
    assert g.read_level({"server_metrics": metrics}) is None


def test_read_level_distrusts_a_hand_edited_summary() -> None:
    lv = {
        "server_metrics": {
            "server": "vllm\x1b[2J",
            "samples": "many",
            "running": {"mean": "3", "max": 4},
            "waiting": {"mean": 2.5, "max": 6},
            "kv_cache_usage": {"mean": math.nan, "max": 1},
            "prefix_cache_hit_rate": 7,
        }
    }
    r = g.read_level(lv)
    assert r is not None
    assert "\x1b" not in r.server and r.samples == 0
    assert r.running is None and r.waiting == g.Stat(2.5, 6.0) and r.kv_cache_usage is None
    assert r.prefix_cache_hit_rate is None


def test_a_turn_keeps_one_reading_and_the_pane_says_it_in_words() -> None:
    d, r = _read(VLLM)
    entry = g.turn_entry(r, d, 1.23456)
    assert entry == {"server": "vllm", "running": 5.0, "waiting": 4.0, "kv_cache_usage": pytest.approx(0.6),
                     "read_ms": 1.235}  # fmt: skip
    t = g.turn_gauges({g.GAUGES_SOURCE: entry, "llama-server": {"prompt_ms": 3}})
    assert t is not None and t.describe() == "4 requests waiting · 5 running · KV 60%"
    one = g.turn_gauges({g.GAUGES_SOURCE: {"waiting": 1, "running": 0}})
    assert one is not None and one.describe() == "1 request waiting · 0 running"


@pytest.mark.parametrize(
    "server",
    [None, [], {"gauges": "x"}, {"gauges": {"waiting": "3", "kv_cache_usage": 7}}, {"other": {"waiting": 1}}],
)
def test_turn_gauges_of_anything_else_is_none(server: object) -> None:
    assert g.turn_gauges(server) is None
