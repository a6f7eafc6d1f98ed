"""Anthropic's cache writes (``cache_creation_input_tokens``) counted on both readers and priced as such."""

from __future__ import annotations

from pathlib import Path

import pytest
from ttft.backends.providers.anthropic_messages import AnthropicMessagesBackend
from ttft.backends.providers.lean.messages import LeanMessagesBackend
from ttft.telemetry.cost import PriceRef, price_turn
from ttft.telemetry.metrics import TokenCounts

from tests.fakes import FakeServer, Schedule
from tests.support.backend_util import one_turn


@pytest.fixture(autouse=True)
def _data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))


@pytest.mark.parametrize("lean", [False, True])
@pytest.mark.parametrize("stream", [True, False])
async def test_cache_writes_are_counted_and_priced(lean: bool, stream: bool) -> None:
    s = Schedule(input_tokens=40, cached_tokens=2_000, cache_write_tokens=3_000, visible_tokens=4)
    with FakeServer(s) as srv:
        cls = LeanMessagesBackend if lean else AnthropicMessagesBackend
        b = cls("claude-haiku-4-5", base_url=srv.url, api_key="k")
        b.price = PriceRef("claude-haiku-4-5", provider_id="anthropic")  # what the registry sets for anthropic
        try:
            d = await one_turn(b, stream=stream, max_retries=0)
        finally:
            await b.aclose()
    tok = d["tokens"]
    # input is everything read: the uncached, the cache reads and the cache writes
    assert (tok["input"], tok["cached_input"], tok["cache_write_input"]) == (5_040, 2_000, 3_000)
    want = price_turn(
        PriceRef("claude-haiku-4-5", provider_id="anthropic"),
        TokenCounts(5_040, 2_000, tok["output"], 0, "usage", cache_write_input=3_000),
        d["started_at"],
    )
    unwritten = price_turn(
        PriceRef("claude-haiku-4-5", provider_id="anthropic"),
        TokenCounts(5_040, 2_000, tok["output"], 0, "usage"),
        d["started_at"],
    )
    assert want is not None and unwritten is not None and want.input_usd > unwritten.input_usd
    assert d["cost"]["input_usd"] == want.input_usd


def test_the_config_takes_a_cache_write_price_and_checks_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ttft.backends.providers.config import configured_price
    from ttft.backends.providers.registry import ProviderError

    monkeypatch.setenv("TTFT_CONFIG_DIR", str(tmp_path))
    cfg = tmp_path / "config.toml"
    cfg.write_text('[prices."compat:m"]\ninput_per_mtok = 1\noutput_per_mtok = 2\ncache_write_input_per_mtok = 1.25\n')
    price = configured_price("compat", "m")
    assert price is not None and price.cache_write_input_per_mtok == 1.25 and price.cached_input_per_mtok is None
    cfg.write_text('[prices."compat:m"]\ninput_per_mtok = 1\noutput_per_mtok = 2\ncache_write_input_per_mtok = -1\n')
    with pytest.raises(ProviderError, match="cache_write_input_per_mtok"):
        configured_price("compat", "m")
