"""telemetry.small_stats gives numpy's floats exactly: the records' percentiles must not move by an ulp."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from telemetry.metrics import PERCENTILES, percentiles
from telemetry.small_stats import MAX_VALUES, stats


def numpy_figures(values: list[float]) -> dict[str, float]:
    arr = np.asarray(values, dtype=float)
    qs = np.percentile(arr, PERCENTILES)
    out = {f"p{p}": float(q) for p, q in zip(PERCENTILES, qs, strict=True)}
    out.update(mean=float(arr.mean()), min=float(arr.min()), max=float(arr.max()))
    return out


finite = st.floats(min_value=-1e12, max_value=1e12, allow_nan=False, allow_infinity=False)


@settings(max_examples=400, deadline=None)
@given(st.lists(finite, min_size=1, max_size=300))
def test_equal_to_numpy_bit_for_bit(values: list[float]) -> None:
    assert percentiles(values) == numpy_figures(values)


@pytest.mark.parametrize("n", [*range(1, 140), 255, 256, 257, 511, 777, MAX_VALUES - 1, MAX_VALUES])
def test_every_block_shape_of_the_pairwise_sum(n: int) -> None:
    rng = random.Random(n)
    for scale in (1e-3, 1.0, 1e6):
        gaps = [rng.expovariate(0.02) * scale for _ in range(n)]  # ITL-like: skewed, many digits
        assert percentiles(gaps) == numpy_figures(gaps)
        ints = [rng.randint(0, 10**9) / 1e6 for _ in range(n)]  # ns gaps as ms, as the records hold
        assert percentiles(ints) == numpy_figures(ints)


def test_numpy_decides_what_the_short_path_does_not_take() -> None:
    assert stats([], PERCENTILES) is None
    assert stats([1.0] * (MAX_VALUES + 1), PERCENTILES) is None
    assert stats([1.0, math.inf], PERCENTILES) is None
    assert stats([1.0, math.nan], PERCENTILES) is None
    long = [float(i % 97) for i in range(MAX_VALUES + 5)]
    assert percentiles(long) == numpy_figures(long)
    with_nan = percentiles([1.0, math.nan, 3.0])
    assert all(math.isnan(v) for k, v in with_nan.items() if k not in ("min", "max"))
    assert percentiles([1, 2, 3]) == numpy_figures([1.0, 2.0, 3.0])  # ints read as floats, as numpy does
