"""Render lag: how long a token waited between arriving (its stamp) and being on screen.

A front end calls ``add`` each time it paints text, with the arrival stamp of the
oldest chunk that paint made visible and how many chunks were still unpainted; the
summary says whether painting keeps up (lag) and whether a backlog grew over the turn.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..metrics import NS_PER_MS, percentiles


@dataclass
class RenderLag:
    lags_ms: list[float] = field(default_factory=list)
    backlog: list[int] = field(default_factory=list)  # chunks arrived but not yet painted, at each paint
    paint_ms: list[float] = field(default_factory=list)  # each paint: from the change to it being on screen

    def add(self, arrived_ns: int, painted_ns: int, backlog_chunks: int = 0, paint_ms: float | None = None) -> float:
        lag = max(0.0, (painted_ns - arrived_ns) / NS_PER_MS)
        self.lags_ms.append(lag)
        self.backlog.append(backlog_chunks)
        if paint_ms is not None:
            self.paint_ms.append(paint_ms)
        return lag

    def summary(self) -> dict[str, float | int | None]:
        p = percentiles(self.lags_ms)
        cost = percentiles(self.paint_ms)
        half = len(self.lags_ms) // 2
        first = percentiles(self.lags_ms[:half]).p50 if half else None
        second = percentiles(self.lags_ms[half:]).p50 if half else None
        return {
            "paints": len(self.lags_ms),
            "p50_ms": p.p50,
            "p95_ms": p.p95,
            "max_ms": p.max,
            "backlog_max": max(self.backlog, default=0),
            "backlog_last": self.backlog[-1] if self.backlog else 0,
            # > 1 means painting fell further behind as the turn went on
            "lag_growth": (second / first) if first and second is not None else None,
            "paint_p50_ms": cost.p50,
            "paint_p95_ms": cost.p95,
        }
