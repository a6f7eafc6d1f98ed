"""backends.agent.stub: the bench's stand-in tool answers one fixed text after its latency, to many callers at once."""

from __future__ import annotations

import asyncio
import math
import time

import pytest
from ttft.backends.agent.stub import LOOKUP, STUB_ANSWER, StubHost, latency_problem


def test_lookup_answers_the_fixed_text_after_the_latency_to_calls_at_once() -> None:
    host = StubHost(80)
    assert host.tools() == [LOOKUP] and LOOKUP.input_schema["required"] == ["query"]

    async def calls() -> list:
        return await asyncio.gather(*(host.call("lookup", {"query": str(i)}) for i in range(20)))

    t0 = time.perf_counter()
    results = asyncio.run(calls())
    took_ms = (time.perf_counter() - t0) * 1000
    assert all(r.text == STUB_ANSWER and not r.is_error and r.size_bytes == len(STUB_ANSWER) for r in results)
    assert 79 <= took_ms < 80 * 20  # concurrent: about one latency, never 20 in a row (a sanity bound)


def test_a_name_it_does_not_have_is_an_error_result_at_once() -> None:
    r = asyncio.run(StubHost(10_000).call("search", {}))
    assert r.is_error and "search" in r.text


@pytest.mark.parametrize("ms", [-1.0, math.nan, math.inf, 3_600_001.0])
def test_a_latency_that_cannot_be_is_named(ms: float) -> None:
    assert latency_problem(ms) is not None


@pytest.mark.parametrize("ms", [0.0, 0.5, 250.0, 3_600_000.0])
def test_a_latency_from_zero_to_an_hour_is_kept(ms: float) -> None:
    assert latency_problem(ms) is None
