"""The probe's results: measured points, fitted figures with intervals, and their JSON form.

No numpy here: the recorder imports these types (through a saved probe) on every
turn, and ``ttft ask`` must not pay for numpy before its request is out. The
fitting itself is :mod:`telemetry.probe.fit`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

from ..metrics import TokenSource
from ..record import Status

PointKind = Literal["input", "cache_cold", "cache_warm", "output"]


@dataclass(frozen=True, slots=True)
class Estimate:
    """A fitted figure and its 95% interval."""

    value: float
    low: float
    high: float

    def to_dict(self) -> dict[str, float]:
        return {"value": round(self.value, 3), "low": round(self.low, 3), "high": round(self.high, 3)}


@dataclass(frozen=True, slots=True)
class ProbePoint:
    """One measured turn of the probe (warm-up turns are never points)."""

    kind: PointKind
    group: int  # the design point: turns of one group differ only by their trial
    trial: int
    input_tokens: int | None
    cached_tokens: int | None
    output_tokens: int | None
    ttft_ms: float | None
    e2e_ms: float | None
    tpot_ms: float | None
    tokens_source: TokenSource
    server_prefill_ms: float | None = None  # the engine's own prompt-eval time, when it reports one
    status: Status = "ok"

    @property
    def fresh_input_tokens(self) -> int | None:
        """Input the server had to prefill: the input less what its cache served."""
        if self.input_tokens is None:
            return None
        return self.input_tokens - (self.cached_tokens or 0)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class CacheFit:
    detected: bool
    cached_tokens: int | None  # what the server said it served from cache on the second send
    ttft_saving_ms: Estimate | None  # cold TTFT - warm TTFT, paired per trial

    def to_dict(self) -> dict[str, Any]:
        return {
            "detected": self.detected,
            "cached_tokens": self.cached_tokens,
            "ttft_saving_ms": self.ttft_saving_ms.to_dict() if self.ttft_saving_ms else None,
        }


@dataclass(frozen=True, slots=True)
class ProbeFit:
    base_ttft_ms: Estimate | None
    prefill_ms_per_1k_input_tokens: Estimate | None
    tpot_ms: Estimate | None
    output_ms_per_100_tokens: Estimate | None
    cache: CacheFit
    points: tuple[ProbePoint, ...] = ()

    def to_dict(self, *, points: bool = True) -> dict[str, Any]:
        def e(x: Estimate | None) -> dict[str, float] | None:
            return x.to_dict() if x else None

        d: dict[str, Any] = {
            "base_ttft_ms": e(self.base_ttft_ms),
            "prefill_ms_per_1k_input_tokens": e(self.prefill_ms_per_1k_input_tokens),
            "tpot_ms": e(self.tpot_ms),
            "output_ms_per_100_tokens": e(self.output_ms_per_100_tokens),
            "cache": self.cache.to_dict(),
        }
        if points:
            d["points"] = [p.to_dict() for p in self.points]
        return d

    def prefill_at(self, fresh_input_tokens: float) -> float | None:
        """TTFT an idle server took, per the fit, for this many uncached input tokens."""
        if self.base_ttft_ms is None or self.prefill_ms_per_1k_input_tokens is None:
            return None
        return self.base_ttft_ms.value + self.prefill_ms_per_1k_input_tokens.value * fresh_input_tokens / 1000


# --- read back (a saved probe is a file on disk: untrusted) ---------------------------------
def _estimate(raw: object) -> Estimate | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ValueError("an estimate is not an object")
    vals = [raw.get(k) for k in ("value", "low", "high")]
    if not all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in vals):
        raise ValueError("an estimate's value, low and high must be finite numbers")
    return Estimate(float(vals[0]), float(vals[1]), float(vals[2]))  # type: ignore[arg-type]


def fit_from_dict(d: object) -> ProbeFit:
    """A fit from its ``to_dict`` form (without points); ValueError when it is not one."""
    if not isinstance(d, dict):
        raise ValueError("a probe fit is not an object")
    cache = d.get("cache") or {}
    if not isinstance(cache, dict):
        raise ValueError("the probe's cache is not an object")
    cached = cache.get("cached_tokens")
    if cached is not None and (not isinstance(cached, int) or isinstance(cached, bool) or cached < 0):
        raise ValueError("cached_tokens must be a whole number")
    return ProbeFit(
        base_ttft_ms=_estimate(d.get("base_ttft_ms")),
        prefill_ms_per_1k_input_tokens=_estimate(d.get("prefill_ms_per_1k_input_tokens")),
        tpot_ms=_estimate(d.get("tpot_ms")),
        output_ms_per_100_tokens=_estimate(d.get("output_ms_per_100_tokens")),
        cache=CacheFit(bool(cache.get("detected")), cached, _estimate(cache.get("ttft_saving_ms"))),
    )
