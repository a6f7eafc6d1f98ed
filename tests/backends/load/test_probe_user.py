"""The user beside a level's load (backends.load.driver, ``LoadConfig.probe_rate``): when it sends, that it
stops with the load, and that a level cut short keeps its request in flight."""

from __future__ import annotations

import asyncio
import time
from itertools import pairwise
from pathlib import Path

import pytest
from ttft.backends.load.driver import LoadConfig, run_level
from ttft.backends.load.outcome import LevelCancelled
from ttft.backends.load.runner import BackendSpec, build_backend
from ttft.backends.providers.lean.transport import default_transport

from tests.fakes.batching_server import BatchingServer


@pytest.fixture(autouse=True)
def _data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))


def spec(srv: BatchingServer) -> BackendSpec:
    return BackendSpec("compat:fake", srv.base_url, options={"lean": True}, aiohttp=True, transport=default_transport())


async def test_the_user_sends_one_at_a_time_a_gap_apart_until_the_load_ends_and_none_in_the_warm_up() -> None:
    # 8 slots: the probe never waits for one. Its answers (10 x 10 ms) are shorter than its 200 ms gap.
    with BatchingServer(slots=8, token_ms=10, alpha=0, prefill_ms=10) as srv:
        backend = build_backend(spec(srv), pool=8)
        try:
            cfg = LoadConfig(levels=(2,), requests=12, input_tokens=8, max_output_tokens=10, warmup=0, probe_rate=5)
            warm = await run_level(backend, cfg, 1, run_id="p", requests=2, warmup=True)
            res = await run_level(backend, cfg, 2, run_id="p", level_index=3)
        finally:
            await backend.aclose()
    assert not any(r["extra"]["bench"].get("probe") for r in warm.records)
    probes = [r for r in res.records if r["extra"]["bench"].get("probe")]
    load = [r for r in res.records if not r["extra"]["bench"].get("probe")]
    assert len(load) == 12 and len(probes) >= 2
    assert all(r["status"] == "ok" and r["tokens"]["output"] == 10 for r in probes)
    assert [r["extra"]["bench"]["index"] for r in probes] == [10**9 + 3 * 10**6 + k for k in range(len(probes))]
    sent = [r["extra"]["bench"]["sent_at_ms"] for r in probes]
    # a timer never fires early: the first no sooner than half a gap (100 ms), each next no sooner than a
    # gap after the one before was due (a late one only closes the gap to the next by its lateness)
    assert sent[0] >= 100 - 5
    assert all(b - a >= 100 for a, b in pairwise(sent)), sent
    load_end = max(r["extra"]["bench"]["sent_at_ms"] + r["events_ms"]["end"] for r in load)
    assert all(s <= load_end for s in sent)  # none left after the load's last answer


async def test_a_probe_waiting_on_its_answer_holds_the_next_one_back() -> None:
    # 1 slot and a load of 1 user: every probe queues behind the load's answer (~175 ms), past its 100 ms gap
    with BatchingServer(slots=1, token_ms=15, alpha=0, prefill_ms=10) as srv:
        backend = build_backend(spec(srv), pool=8)
        try:
            cfg = LoadConfig(levels=(1,), requests=4, input_tokens=8, max_output_tokens=12, warmup=0, probe_rate=10)
            res = await run_level(backend, cfg, 1, run_id="p")
        finally:
            await backend.aclose()
    probes = [r for r in res.records if r["extra"]["bench"].get("probe")]
    assert probes
    for a, b in pairwise(probes):  # never two of the user's requests at once
        assert b["extra"]["bench"]["sent_at_ms"] >= a["extra"]["bench"]["sent_at_ms"] + a["events_ms"]["end"] - 1


async def test_a_level_cut_short_keeps_the_probe_in_flight_as_cancelled() -> None:
    with BatchingServer(slots=4, token_ms=50, alpha=0, prefill_ms=10) as srv:
        backend = build_backend(spec(srv), pool=8)
        try:
            cfg = LoadConfig(levels=(1,), requests=4, input_tokens=8, max_output_tokens=100, warmup=0, probe_rate=10)
            task = asyncio.create_task(run_level(backend, cfg, 1, run_id="p"))
            deadline = time.monotonic() + 30
            while srv.active < 2 and time.monotonic() < deadline:  # the load's answer and the probe's stream
                await asyncio.sleep(0.02)
            assert srv.active == 2
            task.cancel()
            with pytest.raises(LevelCancelled) as exc:
                await task
        finally:
            await backend.aclose()
    probes = [r for r in exc.value.records if r["extra"]["bench"].get("probe")]
    assert len(probes) == 1 and probes[0]["status"] == "cancelled"
    assert len(exc.value.records) == 2
