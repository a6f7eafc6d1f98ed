"""QA regression: the bench's conclusion does not say users pay when their speed held."""

from __future__ import annotations

from telemetry.bench.conclusion import conclusion


def _level(rate: float, tps: float, per_user: float, tpot: float, ttft: float) -> dict:
    return {
        "mode": "rate",
        "level": rate,
        "completed": 10,
        "failed": 0,
        "output_throughput": tps,
        "per_user_tokens_per_s": {"p50": per_user},
        "tpot_ms": {"p50": tpot},
        "ttft_ms": {"p50": ttft},
    }


def test_unchanged_per_user_speed_is_not_a_price() -> None:
    # `ttft bench --rate 5,10` on an idle batching fake said "Each user pays for it: ... (1.0x slower,
    # TPOT p50 5.1 ms -> 5.1 ms)": there was nothing to pay.
    text = conclusion([_level(5, 47.6, 196.9, 5.1, 23.0), _level(10, 78.5, 194.3, 5.1, 23.0)])
    assert "pays for it" not in text and "1.0x slower" not in text
    assert "keeps their speed" in text and "194.3 tokens/s against 196.9" in text


def test_a_real_slowdown_is_still_its_price() -> None:
    text = conclusion([_level(1, 150.0, 200.0, 5.0, 25.0), _level(4, 270.0, 160.0, 6.2, 130.0)])
    assert "Each user pays for it" in text and "1.2x slower" in text
