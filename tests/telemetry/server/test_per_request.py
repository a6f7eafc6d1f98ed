"""vLLM's per-request metrics: read field by field from untrusted JSON, joined with the client's TTFT."""

from __future__ import annotations

import json
import math
import time

import pytest
from ttft.telemetry import events as ev
from ttft.telemetry.record import TurnRecord
from ttft.telemetry.server.per_request import notice_text, read_metrics

from tests.support.turns import at, play, stream

GOOD = {
    "time_to_first_token_ms": 350.0,
    "queue_time_ms": 1400,
    "generation_time_ms": 200.5,
    "mean_itl_ms": 9.1,
    "tokens_per_second": 50.0,
    "output_token_metrics": {
        "reasoning": {"token_count": 5, "time_to_first_token_ms": 350.0, "generation_time_ms": 40.0},
        "content": {"token_count": 10, "time_to_first_token_ms": 400.0, "mean_itl_ms": None},
        "unclassified_token_count": 1,
    },
    "speculative_decoding": {
        "mean_acceptance_length": 2.2,
        "draft_acceptance_rate": 0.4,
        "acceptance_histogram": [2, 5, 3, 0],
        "num_spec_steps": 10,
        "num_accepted_draft_tokens": 12,
        "num_draft_tokens": 30,
        "num_spec_tokens": 3,
    },
}


def test_a_well_formed_object_is_kept_as_sent() -> None:
    kept, dropped = read_metrics(GOOD)
    assert dropped == []
    assert kept == json.loads(json.dumps(GOOD))  # nulls too: the server had no such figure


@pytest.mark.parametrize(
    ("metrics", "named"),
    [
        ({"queue_time_ms": -1.0, "time_to_first_token_ms": 5}, "metrics.queue_time_ms (negative)"),
        ({"queue_time_ms": math.nan, "time_to_first_token_ms": 5}, "metrics.queue_time_ms (not finite)"),
        ({"queue_time_ms": math.inf, "time_to_first_token_ms": 5}, "metrics.queue_time_ms (not finite)"),
        ({"queue_time_ms": "12", "time_to_first_token_ms": 5}, "metrics.queue_time_ms (a string)"),
        ({"queue_time_ms": True, "time_to_first_token_ms": 5}, "metrics.queue_time_ms (a boolean)"),
        ({"queue_time_ms": {"ms": 1}, "time_to_first_token_ms": 5}, "metrics.queue_time_ms (an object)"),
        (
            {"time_to_first_token_ms": 5, "output_token_metrics": {"reasoning": {"token_count": 2.5}}},
            "metrics.output_token_metrics.reasoning.token_count (a number)",
        ),
        (
            {"time_to_first_token_ms": 5, "speculative_decoding": {"num_draft_tokens": -3}},
            "metrics.speculative_decoding.num_draft_tokens (negative)",
        ),
        (
            {"time_to_first_token_ms": 5, "speculative_decoding": {"acceptance_histogram": list(range(10_000))}},
            "metrics.speculative_decoding.acceptance_histogram (not a short list of counts)",
        ),
    ],
)
def test_a_bad_field_is_dropped_and_named_and_the_rest_kept(metrics: dict, named: str) -> None:
    kept, dropped = read_metrics(metrics)
    assert dropped == [named]
    assert kept is not None and kept["time_to_first_token_ms"] == 5


@pytest.mark.parametrize("metrics", [[1, 2], "fast", 3, {"elapsed": 4, "other": {"x": 1}}])
def test_an_object_of_no_known_field_keeps_nothing_and_says_so(metrics: object) -> None:
    kept, dropped = read_metrics(metrics)
    assert kept is None and len(dropped) == 1


def test_null_metrics_say_nothing() -> None:
    assert read_metrics(None) == (None, [])
    assert read_metrics(dict.fromkeys(("queue_time_ms", "time_to_first_token_ms"))) == (None, [])  # n > 1


def test_a_100000_deep_object_is_never_walked() -> None:
    deep: dict = {}
    node = deep
    for _ in range(100_000):
        node["a"] = {}
        node = node["a"]
    metrics = {"queue_time_ms": 3.0, "time_to_first_token_ms": 4.0, "output_token_metrics": deep, "x": deep}
    t0 = time.perf_counter()
    kept, dropped = read_metrics(metrics)
    assert time.perf_counter() - t0 < 0.5  # one look at the top, not a walk (a walk would also recurse out)
    assert kept == {"queue_time_ms": 3.0, "time_to_first_token_ms": 4.0}
    assert dropped == []  # the known block held nothing known: nothing to keep, nothing wrong
    deep_top = read_metrics({"output_token_metrics": {"reasoning": deep}})
    assert deep_top[0] is None


def test_the_notice_is_bounded_and_printable() -> None:
    dropped = [f"metrics.\x1b[31m{i}" for i in range(20)]
    text = notice_text(dropped)
    assert "\x1b" not in text and "and 14 more" in text


def _vllm_turn(ttft_ms: float, metrics: dict, **kw: object) -> dict:
    events = stream(first_ms=ttft_ms, gap_ms=10, visible=10)
    kept, _ = read_metrics(metrics)
    events.insert(-1, ev.ServerTimings(at(ttft_ms + 100), "vllm", kept or {}))
    return play(events)


def test_the_join_splits_the_client_ttft_into_queue_prefill_and_the_rest() -> None:
    d = _vllm_turn(1900, GOOD)
    m = d["metrics"]
    assert (m["server_timing_source"], m["server_queue_ms"], m["server_ttft_ms"]) == ("vllm", 1400.0, 350.0)
    assert m["server_rest_ms"] == pytest.approx(150.0)
    assert (m["server_reasoning_ttft_ms"], m["server_content_ttft_ms"]) == (350.0, 400.0)
    assert m["speculative"] == {
        "source": "vllm",
        "drafted": 30,
        "accepted": 12,
        "acceptance_rate": 0.4,
        "steps": 10,
        "tokens_per_step": 2.2,  # vLLM's own mean_acceptance_length
    }
    assert d["server"]["vllm"]["queue_time_ms"] == 1400  # the raw object, as sent
    assert d["diagnosis"].startswith(
        "TTFT 1.9 s: 1.4 s queued on the server, 350 ms prefill, 150 ms network and client"
    )
    assert "the server's queue" in d["diagnosis"]


def test_the_diagnosis_names_the_waiting_requests_from_the_gauges() -> None:
    events = stream(first_ms=1900, gap_ms=10, visible=10)
    events.insert(-1, ev.ServerTimings(at(0), "gauges", {"server": "vllm", "waiting": 4, "running": 8}))
    events.insert(-1, ev.ServerTimings(at(2000), "vllm", read_metrics(GOOD)[0] or {}))
    assert "1.4 s queued on the server (4 waiting)" in play(events)["diagnosis"]


def test_server_figures_beyond_the_client_ttft_give_no_rest_and_a_notice() -> None:
    d = _vllm_turn(300, {"queue_time_ms": 250.0, "time_to_first_token_ms": 100.0})
    assert d["metrics"]["server_rest_ms"] is None and d["metrics"]["server_queue_ms"] == 250.0
    assert "exceed the client's TTFT" in d["notices"]["server_timings"]


def test_llama_server_timings_give_the_prompt_time_and_no_queue() -> None:
    events = stream(first_ms=800, gap_ms=10, visible=10)
    timings = {"prompt_n": 900, "prompt_ms": 600.0, "predicted_n": 10, "predicted_ms": 90.0}
    events.insert(-1, ev.ServerTimings(at(900), "llama-server", timings))
    d = play(events)
    m = d["metrics"]
    assert (m["server_timing_source"], m["server_queue_ms"], m["server_ttft_ms"]) == ("llama-server", None, 600.0)
    assert m["server_rest_ms"] == pytest.approx(200.0)
    assert "600 ms prompt processing on llama-server" in d["diagnosis"]


def test_an_old_record_without_the_fields_reads_back_with_none() -> None:
    d = play(stream())
    for k in ("server_ttft_ms", "server_rest_ms", "server_timing_source", "server_content_ttft_ms"):
        d["metrics"].pop(k)
    m = TurnRecord.from_dict(d).metrics
    assert m.server_ttft_ms is None and m.server_timing_source is None and m.server_rest_ms is None


def test_a_hand_edited_server_entry_is_read_with_the_same_checks() -> None:
    events = stream(first_ms=900, gap_ms=10, visible=10)
    # what a log may hold: the reader's checks again, so a negative queue is no queue
    events.insert(-1, ev.ServerTimings(at(900), "vllm", {"queue_time_ms": -5, "time_to_first_token_ms": "x"}))
    m = play(events)["metrics"]
    assert m["server_timing_source"] is None and m["server_queue_ms"] is None
