"""A turn's cost (telemetry.cost): genai-prices' own figure for the turn's usage, cached input priced as
cached, the price that applied at the turn's time, config prices for a self-hosted model, and no cost
(never a guess) for an unknown model or estimated counts."""

from __future__ import annotations

from datetime import datetime

import pytest
from genai_prices import Usage, calc_price
from ttft.telemetry.cost import Cost, Price, PriceRef, fmt_usd, price_turn, sum_costs, table_source
from ttft.telemetry.metrics import TokenCounts
from ttft.telemetry.record import AttachmentInfo, TurnRecord

from tests.support.turns import reads_back

USAGE = TokenCounts(input=12_000, cached_input=8_000, output=640, reasoning=128, source="usage")
WHEN = "2026-03-02T12:00:00.000+00:00"


def _expected(model: str, provider: str, tokens: TokenCounts, when: str = WHEN):
    usage = Usage(input_tokens=tokens.input, cache_read_tokens=tokens.cached_input, output_tokens=tokens.output)
    return calc_price(
        usage, model_ref=model, provider_id=provider, genai_request_timestamp=datetime.fromisoformat(when)
    )


@pytest.mark.parametrize(
    ("model", "provider"),
    [("gpt-4o-mini", "openai"), ("gpt-4o-2024-08-06", "openai"), ("claude-haiku-4-5", "anthropic"), ("o3", "openai")],
)
def test_the_cost_is_genai_prices_figure(model: str, provider: str) -> None:
    cost = price_turn(PriceRef(model, provider_id=provider), USAGE, WHEN)
    expected = _expected(model, provider, USAGE)
    assert cost is not None
    assert (cost.input_usd, cost.output_usd, cost.total_usd) == (
        float(expected.input_price),
        float(expected.output_price),
        float(expected.total_price),
    )
    assert cost.priced_as == f"{provider}:{expected.model.id}" and cost.source == table_source()
    import genai_prices

    assert cost.source == f"genai-prices {genai_prices.__version__}"


def test_cached_input_is_priced_as_cached() -> None:
    ref = PriceRef("gpt-4o-mini", provider_id="openai")
    cached = price_turn(ref, USAGE, WHEN)
    uncached = price_turn(ref, TokenCounts(12_000, 0, 640, 128, "usage"), WHEN)
    assert cached is not None and uncached is not None
    assert cached.input_usd < uncached.input_usd and cached.output_usd == uncached.output_usd


def test_the_price_at_the_turns_time_applies_also_when_remembered() -> None:
    """DeepSeek's table prices by time of day: the same usage at two hours, each its own figure."""
    ref = PriceRef("deepseek-chat", provider_id="deepseek")
    peak, off = "2026-03-02T02:00:00+00:00", "2026-03-02T20:00:00+00:00"
    for when in (peak, off, peak, off):  # the second pair comes from what was remembered
        cost = price_turn(ref, USAGE, when)
        assert cost is not None and cost.total_usd == float(
            _expected("deepseek-chat", "deepseek", USAGE, when).total_price
        )
    assert price_turn(ref, USAGE, peak) != price_turn(ref, USAGE, off)


def test_an_address_the_table_knows_names_the_provider() -> None:
    cost = price_turn(PriceRef("llama-3.3-70b-versatile", api_url="https://api.groq.com/openai/v1"), USAGE, WHEN)
    assert cost is not None and cost.priced_as.startswith("groq:")


@pytest.mark.parametrize(
    "ref",
    [
        PriceRef("no-such-model-xyz", provider_id="openai"),  # a model the table does not know
        PriceRef("gpt-4o-mini", api_url="http://127.0.0.1:8080/v1"),  # a loopback server, whatever it calls itself
        PriceRef("m", provider_id="nosuchprovider"),
        None,
    ],
)
def test_what_the_table_cannot_price_is_null_never_a_guess(ref: PriceRef | None) -> None:
    assert price_turn(ref, USAGE, WHEN) is None


def test_estimated_counts_are_not_priced() -> None:
    estimated = TokenCounts(12_000, None, 640, 0, "estimated")
    assert price_turn(PriceRef("gpt-4o-mini", provider_id="openai"), estimated, WHEN) is None
    assert price_turn(PriceRef("gpt-4o-mini", provider_id="openai"), TokenCounts(None, 0, 5, 0, "usage"), WHEN) is None


def test_config_prices_win_and_cached_input_defaults_to_the_input_price() -> None:
    own = Price("compat:qwen3", input_per_mtok=0.4, output_per_mtok=1.6, cached_input_per_mtok=0.04)
    cost = price_turn(PriceRef("qwen3", config=own), USAGE, WHEN)
    assert cost == Cost(
        input_usd=pytest.approx((4_000 * 0.4 + 8_000 * 0.04) / 1e6),
        output_usd=pytest.approx(640 * 1.6 / 1e6),
        total_usd=pytest.approx((4_000 * 0.4 + 8_000 * 0.04 + 640 * 1.6) / 1e6),
        priced_as="compat:qwen3",
        source="config",
    )
    flat = price_turn(PriceRef("qwen3", config=Price("local", 1.0, 2.0)), USAGE, WHEN)
    assert flat is not None and flat.input_usd == pytest.approx(12_000 / 1e6)
    free = price_turn(PriceRef("x", config=Price("local", 0, 0)), USAGE, WHEN)
    assert free is not None and free.total_usd == 0.0


def test_sums_say_how_many_turns_were_not_priced() -> None:
    a = Cost(0.001, 0.002, 0.003, "openai:gpt-4o-mini", "genai-prices 0.2.3")
    s = sum_costs([a, None, a])
    assert (s.total_usd, s.input_usd, s.output_usd, s.priced, s.unpriced) == (0.006, 0.002, 0.004, 2, 1)
    assert sum_costs([]).to_dict() == {
        "total_usd": 0.0,
        "input_usd": 0.0,
        "output_usd": 0.0,
        "priced": 0,
        "unpriced": 0,
    }


@pytest.mark.parametrize(
    ("value", "text"),
    [(None, "–"), (0.0, "$0"), (0.000195, "$0.00019"), (0.0000042, "$0.0000042"), (0.5, "$0.50"), (12.345, "$12.35")],
)
def test_costs_read_as_dollars_without_hiding_fractions_of_a_cent(value: float | None, text: str) -> None:
    assert fmt_usd(value) == text


def test_a_record_keeps_cost_and_attachments_and_reads_back() -> None:
    rec = TurnRecord.from_dict({"schema": "ttft.turn/2", "turn_index": 0, "status": "ok"})
    assert rec.cost is None and rec.attachments == ()  # an old line, without the fields
    d = {
        **rec.to_dict(),
        "attachments": [{"name": "pic.png", "bytes": 1234, "media_type": "image/png", "est_tokens": 765}],
        "cost": {
            "input_usd": 1e-4,
            "output_usd": 2e-4,
            "total_usd": 3e-4,
            "priced_as": "openai:o3",
            "source": "config",
        },
    }
    back = TurnRecord.from_dict(d)
    assert back.attachments == (AttachmentInfo("pic.png", 1234, "image/png", 765),)
    assert back.cost == Cost(1e-4, 2e-4, 3e-4, "openai:o3", "config")
    assert reads_back(back.to_dict()) == back.to_dict() == d


def test_cache_writes_are_priced_at_the_tables_cache_write_price() -> None:
    ref = PriceRef("claude-haiku-4-5", provider_id="anthropic")
    plain = TokenCounts(12_000, 0, 640, 0, "usage")
    written = TokenCounts(12_000, 0, 640, 0, "usage", cache_write_input=10_000)
    cost_plain, cost_written = price_turn(ref, plain, WHEN), price_turn(ref, written, WHEN)
    assert cost_plain is not None and cost_written is not None
    expected = calc_price(
        Usage(input_tokens=12_000, cache_read_tokens=0, cache_write_tokens=10_000, output_tokens=640),
        model_ref="claude-haiku-4-5",
        provider_id="anthropic",
        genai_request_timestamp=datetime.fromisoformat(WHEN),
    )
    assert cost_written.input_usd == float(expected.input_price)
    # Anthropic's 5-minute cache write costs 1.25x input: 10,000 such tokens, 2,500 input tokens' worth more
    assert cost_written.input_usd == pytest.approx(cost_plain.input_usd * (2_000 + 12_500) / 12_000)
    assert cost_written.output_usd == cost_plain.output_usd


def test_config_prices_cache_writes_at_their_own_rate_or_as_input() -> None:
    tokens = TokenCounts(1_000_000, 200_000, 0, 0, "usage", cache_write_input=300_000)
    own = Price("compat:m", 1.0, 2.0, cached_input_per_mtok=0.1, cache_write_input_per_mtok=1.5)
    cost = price_turn(PriceRef("m", config=own), tokens)
    assert cost is not None and cost.input_usd == pytest.approx(0.5 * 1.0 + 0.2 * 0.1 + 0.3 * 1.5)
    plain = price_turn(PriceRef("m", config=Price("compat:m", 1.0, 2.0, cached_input_per_mtok=0.1)), tokens)
    assert plain is not None and plain.input_usd == pytest.approx(0.8 * 1.0 + 0.2 * 0.1)


def test_an_old_record_without_cache_writes_reads_back() -> None:
    d = {"schema": "ttft.turn/2", "turn_index": 0, "status": "ok",
         "tokens": {"input": 5, "cached_input": 0, "output": 3, "reasoning": 0, "source": "usage"}}  # fmt: skip
    assert TurnRecord.from_dict(d).tokens.cache_write_input is None
