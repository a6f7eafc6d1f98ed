"""vLLM's per-request metrics through every OpenAI reader, the SDKs' and the lean ones, against a fake
whose scheduler (fixed slots, a held queue) knows the truth of each request's queue and TTFT."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from ttft.backends.base import Backend
from ttft.backends.providers.lean.chat import LeanChatBackend

from tests.fakes import FakeServer, Schedule
from tests.support.backend_util import backend_for, one_turn

READERS = ("compat", "lean-chat", "responses", "lean-responses")
# The join itself is exact (asserted equal to what the server sent). How close the fake's own figures
# come to its schedule depends on its sleeps, which a loaded machine stretches (5.05 ms once in a full
# CI run): a sanity bound here; tests/benchmarks/server_join.py measures the figures.
TOLERANCE_MS = 25.0


@pytest.fixture(autouse=True)
def _data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))


def _backend(reader: str, srv: FakeServer) -> Backend:
    if reader == "lean-chat":
        return LeanChatBackend("fake-model", provider="compat", base_url=srv.openai_base_url, compat=True)
    return backend_for(reader, srv)


async def _turn(reader: str, srv: FakeServer, **settings: Any) -> dict[str, Any]:
    b = _backend(reader, srv)
    try:
        return await one_turn(b, max_retries=0, **settings)
    finally:
        await b.aclose()


HELD = Schedule(
    queue_hold_ms=400,
    first_token_ms=150,
    token_ms=5,
    reasoning_tokens=3,
    visible_tokens=6,
    vllm_metrics=True,
    output_token_metrics=True,
    spec_decode=(30, 12, 10),
)


@pytest.mark.parametrize("reader", READERS)
async def test_the_join_holds_each_figure_exactly_and_near_the_schedules_truth(reader: str) -> None:
    with FakeServer(HELD) as srv:
        d = await _turn(reader, srv, stream=True)
        sent = srv.requests[-1].server_metrics
    assert d["status"] == "ok" and d["notices"] == {}
    m = d["metrics"]
    assert m["server_timing_source"] == "vllm"
    # joined exactly as the server sent them, and the server's figures are the schedule's truth
    assert sent is not None and d["server"]["vllm"] == sent
    assert (m["server_queue_ms"], m["server_ttft_ms"]) == (sent["queue_time_ms"], sent["time_to_first_token_ms"])
    assert abs(m["server_queue_ms"] - HELD.queue_hold_ms) < TOLERANCE_MS
    assert abs(m["server_ttft_ms"] - HELD.first_token_ms) < TOLERANCE_MS
    assert abs(m["server_reasoning_ttft_ms"] - HELD.first_token_ms) < TOLERANCE_MS
    assert abs(m["server_content_ttft_ms"] - HELD.expected_ttfvt_ms()) < TOLERANCE_MS
    # the rest: what the client waited beyond the server's queue and TTFT, never negative
    rest = m["server_rest_ms"]
    assert rest == pytest.approx(m["ttft_ms"] - m["server_queue_ms"] - m["server_ttft_ms"], abs=1e-3)
    assert 0 <= rest < 100  # a loopback hop and the reader: sanity bound, not a timing claim
    network = sum(m["wait_ms"][k] for k in ("dns", "connect", "tls", "send"))
    assert abs(rest - network) < TOLERANCE_MS  # on loopback the rest is the connection (server_join.py: < 1 ms)
    assert m["speculative"]["source"] == "vllm" and m["speculative"]["tokens_per_step"] == 2.2
    assert "queued on the server" in d["diagnosis"] and "prefill" in d["diagnosis"]


async def test_the_sdk_and_lean_readers_record_the_same_server_figures() -> None:
    with FakeServer(HELD) as srv:
        recs = {r: await _turn(r, srv, stream=True) for r in READERS}
    keys = ("server_timing_source", "speculative")
    seen = {r: ({k: d["metrics"][k] for k in keys}, sorted(d["server"]["vllm"]), d["notices"]) for r, d in recs.items()}
    assert len({repr(v) for v in seen.values()}) == 1, seen


@pytest.mark.parametrize("reader", READERS)
async def test_a_non_streamed_answer_carries_its_metrics_at_the_top(reader: str) -> None:
    with FakeServer(HELD) as srv:
        d = await _turn(reader, srv, stream=False)
    m = d["metrics"]
    assert m["server_timing_source"] == "vllm" and abs(m["server_queue_ms"] - HELD.queue_hold_ms) < TOLERANCE_MS
    assert m["server_ttft_ms"] == HELD.first_token_ms and m["server_rest_ms"] >= 0


async def test_a_fixed_slot_scheduler_queues_the_second_request_behind_the_first() -> None:
    s = Schedule(slots=1, first_token_ms=120, token_ms=10, visible_tokens=10, vllm_metrics=True)
    with FakeServer(s) as srv:
        first, second = await asyncio.gather(_turn("lean-chat", srv, stream=True), _turn("compat", srv, stream=True))
    queues = sorted([first["metrics"]["server_queue_ms"], second["metrics"]["server_queue_ms"]])
    assert queues[0] < TOLERANCE_MS  # the first took the free slot at once
    # the second waited for the whole of the first (its last token, then its stream's end)
    assert abs(queues[1] - s.end_ms()) < 3 * TOLERANCE_MS
    for d in (first, second):
        m = d["metrics"]
        assert abs(m["server_ttft_ms"] - s.first_token_ms) < TOLERANCE_MS and m["server_rest_ms"] >= 0


DEEP = '{"a":' * 500 + "1" + "}" * 500  # as deep as JSON parsers take: the reader must not walk it
HOSTILE = {
    "wrong_types": '{"time_to_first_token_ms": "fast", "queue_time_ms": [1], "mean_itl_ms": {"x": 1}}',
    "negative_and_nan": '{"time_to_first_token_ms": NaN, "queue_time_ms": -12.5, "generation_time_ms": Infinity}',
    "not_an_object": '"metrics"',
    "a_list": "[1, 2, 3]",
    "deep": DEEP,
    "deep_inside": '{"queue_time_ms": 2, "output_token_metrics": {"reasoning": {"time_to_first_token_ms": '
    + DEEP
    + "}}}",
    "huge_histogram": '{"queue_time_ms": 2, "speculative_decoding": {"acceptance_histogram": ['
    + ",".join(["1"] * 5000)
    + "]}}",
}


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("case", list(HOSTILE))
async def test_hostile_metrics_leave_the_turn_intact_with_a_notice(reader: str, case: str) -> None:
    s = Schedule(first_token_ms=20, visible_tokens=4, metrics_json=HOSTILE[case])
    with FakeServer(s) as srv:
        d = await _turn(reader, srv, stream=True)
    assert d["status"] == "ok" and d["answer"] == "w00 w01 w02 w03 "
    assert d["tokens"]["source"] == "usage"  # the usage beside the metrics still counts
    assert "per-request metrics" in d["notices"]["server_metrics"]
    m = d["metrics"]
    if case.startswith(("deep_inside", "huge")):
        assert m["server_queue_ms"] == 2 and m["server_timing_source"] == "vllm"
    else:
        assert m["server_timing_source"] is None and d["server"] is None


DEEPEST = '{"a":' * 100_000 + "1" + "}" * 100_000  # past every parser's recursion limit


@pytest.mark.parametrize("reader", ["lean-chat", "lean-responses"])
@pytest.mark.parametrize("inside", [False, True])
async def test_metrics_nested_100000_deep_leave_the_turn_intact_on_the_lean_readers(reader: str, inside: bool) -> None:
    """The default readers leave out what nests past the guard's depth, so the usage chunk (or
    response.completed) that carries such a ``metrics`` object still counts; a ``metrics`` that is
    nothing but the nesting is dropped with a notice, and what lies beside a deep part is read. (The
    SDKs parse the chunk themselves, and fail past Python's recursion limit.)"""
    metrics = '{"queue_time_ms": 2, "output_token_metrics": ' + DEEPEST + "}" if inside else DEEPEST
    with FakeServer(Schedule(first_token_ms=20, visible_tokens=4, metrics_json=metrics)) as srv:
        d = await _turn(reader, srv, stream=True)
    assert d["status"] == "ok" and d["answer"] == "w00 w01 w02 w03 ", d["error"]
    assert d["tokens"]["source"] == "usage"
    if inside:
        assert d["metrics"]["server_queue_ms"] == 2
    else:
        assert "per-request metrics" in d["notices"]["server_metrics"]
        assert d["metrics"]["server_timing_source"] is None


@pytest.mark.parametrize("reader", ["compat", "lean-chat"])
async def test_no_metrics_no_server_figures(reader: str) -> None:
    with FakeServer(Schedule(visible_tokens=3)) as srv:
        d = await _turn(reader, srv, stream=True)
    assert d["metrics"]["server_timing_source"] is None and d["notices"] == {}
