from __future__ import annotations

import pytest
from ttft.telemetry.server.kvcache import kv_bytes_per_token, kv_cache_size


def test_llama2_7b_fp16_4k_is_about_2_gb() -> None:
    # No GQA: 32 layers, 32 kv heads x 128 = hidden 4096. The reference quotes about 2 GB.
    size = kv_cache_size(32, 32, 128, 2, seq_len=4096)
    assert size.bytes_per_token == 2 * 32 * 4096 * 2 == 524_288
    assert size.total_bytes == 524_288 * 4096
    assert 2.0e9 < size.total_bytes < 2.3e9


def test_gqa_shrinks_the_cache_by_the_group_factor() -> None:
    mha = kv_bytes_per_token(32, 32, 128)
    gqa = kv_bytes_per_token(32, 8, 128)  # Llama 3 8B: 8 kv heads
    assert mha / gqa == 4
    assert gqa == 131_072


def test_batch_and_length_multiply() -> None:
    one = kv_cache_size(18, 1, 256, 2, seq_len=1024)  # Gemma 3 270M shape
    many = kv_cache_size(18, 1, 256, 2, batch=4, seq_len=1024)
    assert many.total_bytes == 4 * one.total_bytes
    assert one.bytes_per_token == 18_432


def test_separate_value_width() -> None:
    assert kv_bytes_per_token(2, 1, 192, 1, value_head_dim=128) == 2 * (192 + 128)


def test_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        kv_bytes_per_token(0, 8, 128)
