"""numpy's percentiles (linear) and mean, bit for bit, in pure Python for short lists.

Every turn's record carries its inter-token gaps' percentiles, so a bench pays for them once per
request: numpy's percentile and mean cost ~50 us of fixed overhead on a 31-gap answer, this a
tenth of that. Same floats as numpy, not merely close: ``telemetry.metrics.percentiles`` uses
this up to :data:`MAX_VALUES` values (numpy's sum buffers longer arrays in blocks) and numpy past
it, and tests/test_small_stats.py holds the two equal.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

MAX_VALUES = 1024  # past it numpy is the faster (and its sum blocks arrays past 8192 values)


def _pairwise_sum(a: Sequence[float], lo: int, n: int) -> float:
    """numpy's pairwise summation of ``a[lo:lo+n]``: eight running sums per block of 128, halves above."""
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    if n <= 128:
        r0, r1, r2, r3, r4, r5, r6, r7 = a[lo : lo + 8]
        end = lo + n - n % 8
        for i in range(lo + 8, end, 8):
            r0 += a[i]
            r1 += a[i + 1]
            r2 += a[i + 2]
            r3 += a[i + 3]
            r4 += a[i + 4]
            r5 += a[i + 5]
            r6 += a[i + 6]
            r7 += a[i + 7]
        res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
        for i in range(end, lo + n):
            res += a[i]
        return res
    half = n // 2
    half -= half % 8
    return _pairwise_sum(a, lo, half) + _pairwise_sum(a, lo + half, n - half)


def _linear(s: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) of sorted ``s`` as numpy's 'linear' method computes it."""
    n = len(s)
    v = (n - 1) * q
    if v >= n - 1:
        return s[-1]
    lo = math.floor(v)
    t = v - lo
    a, b = s[lo], s[lo + 1]
    d = b - a
    return b - d * (1 - t) if t >= 0.5 else a + d * t  # numpy's _lerp, the same two roundings


def stats(values: Sequence[float], percents: Sequence[int]) -> tuple[list[float], float, float, float] | None:
    """(percentiles, mean, min, max) equal to numpy's for 1..MAX_VALUES finite values; None otherwise
    (empty, too long, or a NaN or infinity: then numpy decides)."""
    n = len(values)
    if not 0 < n <= MAX_VALUES:
        return None
    a = [float(x) for x in values]
    total = 0.0 + _pairwise_sum(a, 0, n)  # numpy starts the sum at add's identity
    if not math.isfinite(total):
        return None
    a.sort()
    return [_linear(a, p / 100) for p in percents], total / n, a[0], a[-1]
