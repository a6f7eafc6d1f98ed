"""A chat turn on a compat server records the server's own queue and KV use as its request left: with the
real OpenAI SDK and the lean reader, against the loopback gauged fake; a server without /metrics is asked
once and says why in the record."""

from __future__ import annotations

import asyncio

import pytest
from ttft.backends.base import ChatRequest, Message
from ttft.backends.providers.gauged import GaugedBackend
from ttft.backends.providers.registry import create_backend
from ttft.backends.turn import new_recorder, run_turn
from ttft.telemetry.record import TurnRecord
from ttft.telemetry.server.gauges import GAUGES_SOURCE, turn_gauges
from ttft.telemetry.server.timings import server_timings
from ttft.telemetry.settings import TurnSettings

from tests.fakes import FakeServer, Schedule
from tests.fakes.gauged_server import GaugedServer
from tests.support.turns import reads_back


@pytest.fixture(autouse=True)
def _data_dir(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))


def _request(text: str = "hello there") -> ChatRequest:
    return ChatRequest((Message("user", text),), TurnSettings(max_output_tokens=6))


async def _turn(backend: object, index: int = 0) -> TurnRecord:
    request = _request()
    rec = new_recorder(backend, request, session_id="s", turn_index=index, saved_probe=False)  # type: ignore[arg-type]
    return await run_turn(backend, request, rec)  # type: ignore[arg-type]


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "sdk"])
async def test_a_turn_keeps_the_queue_it_met(lean: bool) -> None:
    with GaugedServer(slots=1, token_ms=15, prefill_ms=5, default_tokens=6) as srv:
        backend = create_backend("compat:gauged-fake", base_url=srv.base_url, lean=lean, server_gauges=True)
        assert isinstance(backend, GaugedBackend)
        try:
            await backend.warm_up()  # the chat's start-up: the endpoint is probed there
            reads = len(srv.reads)
            # two users ahead on the one slot: this turn waits behind them
            others = [asyncio.create_task(_turn(create_backend("compat:m", base_url=srv.base_url, lean=True), 9))
                      for _ in range(2)]  # fmt: skip
            while srv.in_flight < 2:
                await asyncio.sleep(0.005)
            record = await _turn(backend)
            await asyncio.gather(*others)
        finally:
            await backend.aclose()
        assert len(srv.reads) == reads + 1  # one read for the turn
        running, waiting = srv.reads[-1]
    assert record.status == "ok" and record.answer
    entry = record.server[GAUGES_SOURCE]
    assert entry["server"] == "vllm"
    assert (entry["running"], entry["waiting"]) == (running, waiting)  # as the server answered the read
    assert entry["running"] == 1 and entry["waiting"] >= 1  # one slot busy, at least one other user queued
    assert entry["kv_cache_usage"] == pytest.approx(0.2)
    assert 0 <= entry["read_ms"] < record.metrics.e2e_ms  # read while the turn ran
    d = reads_back(record.to_dict())  # the log keeps it, and reads it back
    g = turn_gauges(d["server"])
    assert g is not None and "waiting · 1 running · KV 20%" in g.describe()
    assert not any(st.source == GAUGES_SOURCE for st in server_timings(d["server"]))  # no server "timings"


async def test_a_server_without_metrics_is_asked_once_and_the_record_says_why() -> None:
    with FakeServer(Schedule(first_token_ms=10, token_ms=2, visible_tokens=4)) as srv:
        backend = create_backend("compat:fake-model", base_url=srv.openai_base_url, lean=True, server_gauges=True)
        try:
            first = await _turn(backend)
            second = await _turn(backend, 1)
        finally:
            await backend.aclose()
        asked = [r for r in srv.requests if r.method == "GET" and r.path == "/metrics"]
    assert len(asked) == 1  # not again on the next turn
    assert first.status == "ok" and second.status == "ok"  # a note, never an error
    assert "no server gauges" in first.notices["server_gauges"] and "HTTP 404" in first.notices["server_gauges"]
    assert "server_gauges" not in second.notices
    assert first.server is None or GAUGES_SOURCE not in first.server


async def test_a_warm_up_that_found_nothing_tells_the_first_turn() -> None:
    with FakeServer(Schedule(first_token_ms=5, token_ms=1, visible_tokens=2)) as srv:
        backend = create_backend("compat:fake-model", base_url=srv.openai_base_url, lean=True, server_gauges=True)
        try:
            await backend.warm_up()
            first, second = await _turn(backend), await _turn(backend, 1)
        finally:
            await backend.aclose()
        asked = [r for r in srv.requests if r.method == "GET" and r.path == "/metrics"]
    assert len(asked) == 1
    assert "HTTP 404" in first.notices["server_gauges"] and "server_gauges" not in second.notices


def test_only_a_compat_server_and_only_when_asked() -> None:
    assert not isinstance(create_backend("compat:m", base_url="http://127.0.0.1:9/v1", lean=True), GaugedBackend)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPENAI_API_KEY", "sk-test")
        hosted = create_backend("openai:gpt-4o-mini", base_url="http://127.0.0.1:9/v1", lean=True, server_gauges=True)
    assert not isinstance(hosted, GaugedBackend)  # a hosted provider's API has no /metrics to read
