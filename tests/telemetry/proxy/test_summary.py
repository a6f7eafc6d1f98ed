"""A proxy run's calls in figures: counts by client and model, medians, tokens with the cache's share,
failures by status and kind, and retries."""

from __future__ import annotations

import dataclasses

import pytest
from ttft.telemetry.proxy.summary import cache_share, summarize

from tests.telemetry.proxy.test_sessions import CLIENT, call


def test_the_figures_of_a_run_with_a_cache_hit_a_429_and_its_retry() -> None:
    first = call(0, 0.0, 400.0, ("a",), ttft=100.0, tokens=(1000, 0))
    cached = call(1, 500.0, 800.0, ("a", "b"), ttft=300.0, tokens=(2000, 1500))
    limited = call(2, 900.0, 950.0, ("a", "b", "c"), status=429)
    retried = call(3, 1000.0, 1300.0, ("a", "b", "c"), ttft=200.0, retry=1, tokens=(3000, 0))
    other = dataclasses.replace(first[0], model="other-model"), dataclasses.replace(first[1], call_index=4)
    f = summarize([first, cached, limited, retried, other])
    assert f.calls == 5 and f.retries == 1
    assert f.by_client_model[0] == (CLIENT, first[0].model, 4) and f.by_client_model[1][1:] == ("other-model", 1)
    assert f.ttft_p50_ms == pytest.approx(150.0, abs=1.0)  # of 100, 300, 200, 100; the 429 has none
    assert (f.input_tokens, f.cached_input_tokens) == (7000 + (limited[0].tokens.input or 0), 1500)
    assert f.failed == ((429, "rate_limited", 1),)
    assert f.cost_usd is None and f.unpriced == 5  # the test model has no price
    assert cache_share(cached[0].tokens) == pytest.approx(0.75) and cache_share(limited[0].tokens) is None


def test_no_calls_is_a_summary_of_nothing() -> None:
    f = summarize([])
    assert (f.calls, f.ttft_p50_ms, f.by_client_model, f.failed, f.cost_usd) == (0, None, (), (), None)
