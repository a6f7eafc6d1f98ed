"""KV-cache sizing: 2 (K and V) x layers x kv_heads x head_dim x bytes per element, per token.

With grouped-query attention ``kv_heads`` is smaller than the number of query
heads, and the cache shrinks by the same factor. Without GQA, kv_heads x head_dim
equals the hidden size.
"""

from __future__ import annotations

from dataclasses import dataclass

DTYPE_BYTES = {"f32": 4.0, "f16": 2.0, "bf16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32, "fp8": 1.0}


@dataclass(frozen=True, slots=True)
class KVCacheSize:
    bytes_per_token: float
    total_bytes: float
    tokens: int

    @property
    def total_mib(self) -> float:
        return self.total_bytes / 2**20


def kv_bytes_per_token(
    layers: int,
    kv_heads: int,
    head_dim: int,
    dtype_bytes: float = 2.0,
    *,
    value_head_dim: int | None = None,
) -> float:
    """Bytes one token occupies in the cache. ``value_head_dim`` for models whose V width differs from K."""
    if min(layers, kv_heads, head_dim) <= 0 or dtype_bytes <= 0:
        raise ValueError("layers, kv_heads, head_dim and dtype_bytes must be positive")
    v_dim = head_dim if value_head_dim is None else value_head_dim
    return layers * kv_heads * (head_dim + v_dim) * dtype_bytes


def kv_cache_size(
    layers: int,
    kv_heads: int,
    head_dim: int,
    dtype_bytes: float = 2.0,
    *,
    batch: int = 1,
    seq_len: int,
    value_head_dim: int | None = None,
) -> KVCacheSize:
    per_token = kv_bytes_per_token(layers, kv_heads, head_dim, dtype_bytes, value_head_dim=value_head_dim)
    tokens = batch * seq_len
    return KVCacheSize(per_token, per_token * tokens, tokens)
