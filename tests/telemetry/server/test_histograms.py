"""The server's latency histograms: percentiles read from bucket deltas as Prometheus' histogram_quantile
reads them (hand-checked), and every edge a real or hostile endpoint gives (an empty level, a restart,
only a +Inf bucket, NaN, negative or unparseable text) a note, never an exception."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ttft.telemetry.server import histograms as h

INF = math.inf
# cumulative: 2 at or under 0.1 s, 6 under 0.2, 8 under 0.4, 10 in all
TEN = h.Histogram(((0.1, 2.0), (0.2, 6.0), (0.4, 8.0), (INF, 10.0)), 2.5)


@pytest.mark.parametrize(
    ("q", "want"),
    [
        (0.1, 0.05),  # rank 1 in the first bucket: from 0 to 0.1, half way
        (0.5, 0.175),  # rank 5: 3 of the 4 in (0.1, 0.2]
        (0.8, 0.4),  # rank 8: the top of (0.2, 0.4]
        (0.9, 0.4),  # rank 9 in the +Inf bucket: the highest finite bound
        (0.0, 0.0),  # rank 0: the first bucket's lower end
        (1.0, 0.4),
    ],
)
def test_quantile_is_prometheus_histogram_quantile(q: float, want: float) -> None:
    assert h.quantile(q, TEN) == pytest.approx(want)


def test_quantile_has_no_answer_where_prometheus_gives_nan() -> None:
    assert h.quantile(0.5, h.Histogram(((0.1, 0.0), (INF, 0.0)))) is None  # no observation
    assert h.quantile(0.5, h.Histogram(((INF, 5.0),))) is None  # only +Inf: no bound to read
    assert h.quantile(0.5, h.Histogram(((0.1, 1.0), (0.2, 3.0)))) is None  # no +Inf bucket
    assert h.quantile(1.5, TEN) is None and h.quantile(math.nan, TEN) is None
    # a first bound at or under zero is its own answer
    assert h.quantile(0.5, h.Histogram(((0.0, 4.0), (1.0, 4.0), (INF, 4.0)))) == 0.0
    # counts that dip are lifted to the largest before them, as Prometheus does
    assert h.quantile(0.5, h.Histogram(((0.1, 6.0), (0.2, 4.0), (INF, 10.0)))) == pytest.approx(5 / 6 * 0.1)


@given(
    st.lists(st.integers(0, 50), min_size=1, max_size=12),
    st.floats(0, 1),
    st.floats(0, 1),
)
def test_quantile_grows_with_q_and_stays_within_the_finite_bounds(per: list[int], a: float, b: float) -> None:
    bounds = [0.01 * 2**i for i in range(len(per))]
    cum, total = [], 0
    for n in per:
        total += n
        cum.append(float(total))
    hist = h.Histogram((*zip(bounds, cum, strict=True), (INF, cum[-1] + 1.0)))
    lo, hi = sorted((a, b))
    x, y = h.quantile(lo, hist), h.quantile(hi, hist)
    assert x is not None and y is not None
    assert 0 <= x <= y <= bounds[-1]


def _text(counts: dict[str, list[float]], extra: str = "", name: str = "vllm:time_to_first_token_seconds") -> str:
    """A vLLM exposition of ``name`` with these cumulative counts at bounds 0.1, 0.5, +Inf, per engine."""
    lines = [f"# HELP {name} Histogram of time to first token in seconds.", f"# TYPE {name} histogram"]
    for engine, cum in counts.items():
        for le, n in zip(("0.1", "0.5", "+Inf"), cum, strict=True):
            lines.append(f'{name}_bucket{{engine="{engine}",le="{le}",model_name="m"}} {n}')
        lines.append(f'{name}_count{{engine="{engine}",model_name="m"}} {cum[-1]}')
        lines.append(f'{name}_sum{{engine="{engine}",model_name="m"}} {cum[-1] * 0.2}')
    return "vllm:num_requests_running 1.0\n" + "\n".join(lines) + "\n" + extra


def test_a_level_is_the_difference_of_its_two_reads_summed_over_engines() -> None:
    before = h.snapshot(_text({"0": [1, 2, 3], "1": [0, 0, 0]}), "vllm")
    after = h.snapshot(_text({"0": [3, 6, 7], "1": [2, 2, 2]}), "vllm")
    out = h.level_latency("vllm", before, after)
    ttft = out["latency"]["ttft"]
    # the level: 4 under 0.1 s, 2 more under 0.5, 0 past it -> 6 in all
    assert ttft["count"] == 6
    assert ttft["p50"] == pytest.approx(75.0)  # rank 3 of the 4 in (0, 0.1]
    assert ttft["p90"] == pytest.approx(100 + 400 * (5.4 - 4) / 2)
    assert ttft["mean"] == pytest.approx((9 - 3) * 0.2 / 6 * 1000)
    assert "vllm publishes" not in out.get("latency_note", "")  # every kind is mapped for vLLM
    assert "no queue, prefill, decode, itl, e2e histogram" in out["latency_note"]  # this text had only TTFT


def test_an_empty_level_counts_zero_with_no_percentile() -> None:
    same = h.snapshot(_text({"0": [1, 2, 3]}), "vllm")
    ttft = h.level_latency("vllm", same, same)["latency"]["ttft"]
    assert ttft["count"] == 0 and ttft["p50"] is None and ttft["mean"] is None


def test_a_restart_between_the_reads_gives_no_figures_and_says_so() -> None:
    before = h.snapshot(_text({"0": [5, 8, 9]}), "vllm")
    after = h.snapshot(_text({"0": [1, 1, 2]}), "vllm")  # counts began again
    out = h.level_latency("vllm", before, after)
    assert "ttft" not in out["latency"]
    assert "counts began again" in out["latency_note"] and "ttft" in out["latency_note"]


def test_only_an_inf_bucket_counts_but_says_no_percentile() -> None:
    name = "vllm:time_to_first_token_seconds"
    t0 = f'{name}_bucket{{le="+Inf"}} 2\n'
    t1 = f'{name}_bucket{{le="+Inf"}} 7\n'
    out = h.level_latency("vllm", h.snapshot(t0, "vllm"), h.snapshot(t1, "vllm"))
    assert out["latency"]["ttft"]["count"] == 5 and out["latency"]["ttft"]["p50"] is None
    assert "no finite bucket" in out["latency_note"]


@pytest.mark.parametrize(
    "hostile",
    [
        'vllm:time_to_first_token_seconds_bucket{le="0.1"} NaN\nvllm:time_to_first_token_seconds_bucket{le="+Inf"} -4\n',  # noqa: E501
        'vllm:time_to_first_token_seconds_bucket{le="abc"} 3\n',
        'vllm:time_to_first_token_seconds_bucket{le="-Inf"} 1\nvllm:time_to_first_token_seconds_bucket{le="+Inf"} 9\n',
        'vllm:time_to_first_token_seconds_bucket{le="0.1" 3\n',  # a label set never closed
        'vllm:time_to_first_token_seconds_bucket{le="0.1"} three\n',
        "<html>vllm:time_to_first_token_seconds</html>\n",
        "".join(f'vllm:time_to_first_token_seconds_bucket{{le="{i}"}} {i}\n' for i in range(5000)),
    ],
)
def test_hostile_text_is_a_note_never_an_exception(hostile: str) -> None:
    good = h.snapshot(_text({"0": [1, 2, 3]}), "vllm")
    snap = h.snapshot(hostile, "vllm")
    out = h.level_latency("vllm", good, snap)
    assert isinstance(out["latency"], dict)
    json.dumps(out, allow_nan=False)  # whatever was read is finite: summary.json stays strict JSON
    for figures in out["latency"].values():  # ... and not negative
        assert all(v is None or v >= 0 for k, v in figures.items() if not k.endswith("_bucket_ms"))
    if hostile.count("\n") >= 5000:
        assert len(snap.latency["ttft"].buckets) <= h.MAX_BUCKETS
    else:
        assert snap.note or not snap.latency  # said, or nothing read


def test_each_server_says_what_it_does_not_publish() -> None:
    none = h.level_latency("llama-server", h.Snapshot(), h.Snapshot())
    assert none["latency"] == {} and "llama-server publishes no latency histograms" in none["latency_note"]
    tgi = h.level_latency("tgi", h.Snapshot(), h.Snapshot())
    assert "tgi publishes no ttft, prefill, decode histogram" in tgi["latency_note"]
    assert "the read before or after" in h.level_latency("vllm", None, h.Snapshot())["latency_note"]


def test_older_vllm_itl_name_and_sglang_ranks() -> None:
    older = _text({"0": [0, 1, 1]}, name="vllm:time_per_output_token_seconds")
    newer = _text({"0": [4, 5, 5]}, name="vllm:time_per_output_token_seconds")
    itl = h.level_latency("vllm", h.snapshot(older, "vllm"), h.snapshot(newer, "vllm"))["latency"]["itl"]
    assert itl["count"] == 4
    name = "sglang:queue_time_seconds"
    rank = '{{le="{le}",tp_rank="{r}"}} {n}\n'
    text = "".join(f"{name}_bucket" + rank.format(le=le, r=r, n=n) for r in (0, 1) for le, n in (("1", 2), ("+Inf", 3)))
    snap = h.snapshot(text, "sglang", ("tp_rank",))
    assert h.count(snap.latency["queue"]) == 3  # rank 1 repeats rank 0's scheduler: not counted twice


def test_speculative_acceptance_over_the_level() -> None:
    def text(drafts: int, drafted: int, accepted: int) -> str:
        return (
            f'vllm:spec_decode_num_drafts_total{{engine="0"}} {drafts}\n'
            f'vllm:spec_decode_num_draft_tokens_total{{engine="0"}} {drafted}\n'
            f'vllm:spec_decode_num_accepted_tokens_total{{engine="0"}} {accepted}\n'
        ) + _text({"0": [0, 0, 0]})

    out = h.level_latency("vllm", h.snapshot(text(10, 30, 12), "vllm"), h.snapshot(text(30, 90, 52), "vllm"))
    assert out["speculative"] == {
        "drafts": 20, "draft_tokens": 60, "accepted_tokens": 40, "acceptance_rate": pytest.approx(40 / 60, abs=1e-4),
        "mean_acceptance_length": 3.0,
    }  # fmt: skip
    restarted = h.level_latency("vllm", h.snapshot(text(30, 90, 52), "vllm"), h.snapshot(text(1, 3, 1), "vllm"))
    assert "speculative" not in restarted


def test_read_back_from_an_untrusted_summary() -> None:
    lv = {
        "server_metrics": {
            "latency": {"ttft": {"p50": 12.0, "p90": "x", "p99": -1, "count": 5}, "queue": "nonsense"},
            "speculative": {"acceptance_rate": 7, "mean_acceptance_length": 2.5},
            "latency_note": "tgi publishes no ttft\x1b[2J",
        }
    }
    read = h.read_latency(lv)
    assert read is not None
    assert read.kinds["ttft"] == h.Quantiles(12.0, None, None, 5) and "queue" not in read.kinds
    assert read.acceptance_rate is None and read.mean_acceptance_length == 2.5  # a rate past 1 is no rate
    assert "\x1b" not in read.note
    assert h.read_latency({"server_metrics": {"running": {}}}) is None and h.read_latency({}) is None
