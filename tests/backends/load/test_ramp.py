"""A closed-loop level's users can start spread over a ramp (backends.load.driver.LoadConfig.ramp_s), as
AIPerf's --concurrency-ramp-duration."""

from __future__ import annotations

from pathlib import Path

import pytest
from ttft.backends.load.driver import LoadConfig, run_level
from ttft.backends.load.runner import BackendSpec, build_backend
from ttft.backends.providers.lean.transport import default_transport

from tests.fakes.batching_server import BatchingServer


@pytest.fixture(autouse=True)
def _data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))


async def _first_sends_ms(ramp_s: float) -> list[float]:
    with BatchingServer(slots=8, token_ms=5, alpha=0, prefill_ms=5) as srv:
        spec = BackendSpec(
            "compat:fake", srv.base_url, options={"lean": True}, aiohttp=True, transport=default_transport()
        )
        backend = build_backend(spec, pool=8)
        try:
            cfg = LoadConfig(levels=(4,), requests=4, input_tokens=8, max_output_tokens=160, warmup=0, ramp_s=ramp_s)
            res = await run_level(backend, cfg, 4, run_id="ramp")
        finally:
            await backend.aclose()
    assert all(r["status"] == "ok" for r in res.records)
    return sorted(r["extra"]["bench"]["sent_at_ms"] for r in res.records)


async def test_users_start_spread_over_the_ramp() -> None:
    # each answer (160 tokens at 5 ms) outlasts the ramp: every user sends one request of its own
    sent = await _first_sends_ms(0.6)  # users 1-3 wait 150, 300, 450 ms from the level's start
    # a timer never fires early, so each user leaves no sooner than its share of the ramp (a loaded
    # machine only delays them); 5 ms for the clocks' granularity
    assert all(s >= 150 * k - 5 for k, s in enumerate(sent)), sent
    assert sent[-1] - sent[0] >= 400, sent
