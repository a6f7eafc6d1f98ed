"""When an open-loop load run sends each request: a seeded Poisson schedule."""

from __future__ import annotations

import numpy as np


def poisson_schedule(rate: float, n: int, seed: int) -> list[float]:
    """Send offsets in seconds for ``n`` requests of a Poisson process at ``rate``/s.

    Inter-arrival gaps are exponential with mean 1/rate; the first request goes at 0.
    The same seed gives the same schedule.
    """
    if rate <= 0:
        raise ValueError("rate must be > 0")
    if n <= 0:
        return []
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1.0 / rate, size=n - 1)
    return [0.0, *np.cumsum(gaps).tolist()]
